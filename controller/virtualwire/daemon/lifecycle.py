"""What the daemons (`virtualwire-controller`, `virtualwire-collector`;
the extender agent its logging) do to start, reload and stop: logging,
the os-ken hub patched before anything opens a socket, SIGHUP re-reading
the settings file, and a stop on SIGTERM/SIGINT that first saves what
would be lost (counters read since the last save)."""
import logging
import os
import signal
import sys


def start(args):
    """Logging from --log-level/--log-file, then the hub (eventlet unless
    OSKEN_HUB_TYPE says otherwise) patched; returns os-ken's hub."""
    os.environ.setdefault('OSKEN_HUB_TYPE', 'eventlet')
    configure_logging(args)
    import warnings
    warnings.filterwarnings('ignore', message=r'(?s).*Eventlet is deprecated')
    # eventlet's WSGI server logs every request at INFO: keep that for debug.
    logging.getLogger('os_ken.lib.hub').setLevel(logging.WARNING)
    from os_ken.lib import hub
    hub.patch(thread=False)
    # The listeners' caps are shares of this (listen_guard.budget).
    from virtualwire.listen_guard import raise_file_limit
    raise_file_limit()
    return hub


FORMAT = '%(asctime)s %(levelname)s %(name)s: %(message)s'
# What SIGHUP applies; every other setting needs a restart (docs/install).
RELOADABLE = ('log_level', 'log_file', 'log_format')
_handler = None


class JsonFormatter(logging.Formatter):
    """One JSON object a line, for log shippers: time (UTC, ISO 8601),
    level, logger, message, and the traceback when there is one."""

    def format(self, record):
        import datetime
        import json
        doc = {'time': datetime.datetime.fromtimestamp(
                   record.created, datetime.timezone.utc).isoformat(
                       timespec='milliseconds'),
               'level': record.levelname, 'logger': record.name,
               'message': record.getMessage(), 'pid': record.process}
        if record.exc_info:
            doc['traceback'] = self.formatException(record.exc_info)
        return json.dumps(doc)


def add_tls_files(group, ca_help):
    """--private-key, --certificate and --ca-cert (what `ca_help` says the
    CA is for), as every daemon with TLS has."""
    group.add_argument('--private-key', default='', metavar='PEM',
                       help="this daemon's TLS private key")
    group.add_argument('--certificate', default='', metavar='PEM',
                       help='its certificate (issued by vw-pki or '
                            'enrolment)')
    group.add_argument('--ca-cert', default='', metavar='PEM', help=ca_help)


def add_intent_db_tls(p):
    """How a client of a TLS intent database checks its servers."""
    p.add_argument('--intent-db-ca', default='', metavar='PEM',
                   help="the CA of the intent database servers' "
                        'certificates (e.g. controller-ca.pem)')
    p.add_argument('--intent-db-name', default='virtualwire-intent-db',
                   help='the name their certificates must carry '
                        '(default: %(default)s)')


def add_log_arguments(p):
    """--log-file, --log-level and --log-format, as every daemon has."""
    p.add_argument('--log-file', default='',
                   help='log to this file (reopened on SIGHUP, for '
                        'logrotate); default: stderr (the journal)')
    p.add_argument('--log-level', default='INFO',
                   help='DEBUG, INFO, WARNING or ERROR; applied again on '
                        'SIGHUP (default: %(default)s)')
    p.add_argument('--log-format', choices=('text', 'json'), default='text',
                   help='text, or json: one object a line (time, level, '
                        'logger, message, traceback) for log shippers; '
                        'applied again on SIGHUP (default: %(default)s)')


def configure_logging(args):
    """The root logger from --log-level and --log-file (reopened: after
    logrotate moved it, SIGHUP writes to a new file of that name)."""
    global _handler
    root = logging.getLogger()
    if _handler is not None:        # ours only: others' stay
        root.removeHandler(_handler)
        _handler.close()
    _handler = logging.FileHandler(args.log_file) if args.log_file \
        else logging.StreamHandler()
    _handler.setFormatter(JsonFormatter() if getattr(
        args, 'log_format', 'text') == 'json' else logging.Formatter(FORMAT))
    root.addHandler(_handler)
    root.setLevel(args.log_level.upper())


def reload(args, parse, log):
    """SIGHUP: the settings file read again. What can change at run time
    changes; the rest is named in the log as needing a restart. A file
    with errors changes nothing. Returns the settings in force."""
    try:
        new = parse()
    except SystemExit:          # the parser printed the file's errors
        log.error('settings not reloaded: the file has errors (above)')
        return args
    changed = sorted(k for k in vars(new)
                     if getattr(new, k) != getattr(args, k, None))
    for k in RELOADABLE:
        setattr(args, k, getattr(new, k))
    configure_logging(args)
    from virtualwire.core.shared_settings import SETTINGS
    shared = [k for k in changed if k.replace('_', '-') in SETTINGS]
    later = [k for k in changed if k not in RELOADABLE and k not in shared]
    log.warning('settings reloaded: %s applied%s%s',
                ', '.join(k for k in changed if k in RELOADABLE) or
                'nothing changed',
                '; needing a restart: %s' % ', '.join(
                    '--' + k.replace('_', '-') for k in later)
                if later else '',
                '; shared by every instance, so set at run time with '
                '`vwctl config set`: %s' % ', '.join(
                    k.replace('_', '-') for k in shared) if shared else '')
    return args


def on_sighup(hub, args, parse, log):
    """Reload on SIGHUP, off the signal handler (which under eventlet
    runs in the hub's own greenlet and must not block)."""
    signal.signal(signal.SIGHUP,
                  lambda *_: hub.spawn(reload, args, parse, log))


def _memory_snapshots(hub, log):
    """Where memory goes, on request: started with PYTHONTRACEMALLOC=N, a
    daemon writes a tracemalloc snapshot on SIGUSR2 (to
    $VIRTUALWIRE_TRACEMALLOC_OUT, default /tmp/<name>-<pid>.tracemalloc;
    read it with `python -m virtualwire.memory_report FILE`). Off
    otherwise: tracing costs about twice the memory and much CPU."""
    import tracemalloc
    if not tracemalloc.is_tracing():
        return
    name = os.path.basename(sys.argv[0]) or 'python'
    out = os.environ.get('VIRTUALWIRE_TRACEMALLOC_OUT',
                         '/tmp/%s-%d.tracemalloc' % (name, os.getpid()))

    def _dump():
        tracemalloc.take_snapshot().dump(out)
        now, peak = tracemalloc.get_traced_memory()
        log.info('tracemalloc snapshot written to %s (traced now %.1f MiB, '
                 'peak %.1f MiB)', out, now / 2**20, peak / 2**20)
    signal.signal(signal.SIGUSR2, lambda *_: hub.spawn(_dump))


def run_until_stopped(hub, services, mgr, save, log):
    """Serve until a signal; then save() (a failure is logged: we stop
    regardless) and exit at once. The handler only starts the stop: under
    eventlet it runs in the hub's own greenlet, which must not wait (it
    did, and every save on the way out failed with "Cannot switch to
    MAINLOOP from MAINLOOP")."""
    def _stop():
        log.info('stopping')
        try:
            save()
        except Exception as e:      # noqa: BLE001 (stopping regardless)
            log.warning('counters not saved on the way out: %s', e)
        os._exit(0)

    def _term(*_):
        hub.spawn(_stop)
    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    _memory_snapshots(hub, log)
    try:
        hub.joinall(services)
    finally:
        mgr.close()
