"""`vwctl config check FILE`: a daemon's settings file judged as the
daemon would judge it at start (`config_file`), without starting it or
reaching a controller. Which daemon: --for, else the file's name
(controller.yaml, collector.yaml, extender.yaml, intent-db.yaml)."""
import os

from virtualwire import config_file

DAEMONS = ('controller', 'collector', 'extender', 'intent-db')


def _parser(daemon):
    if daemon == 'controller':
        from virtualwire.main import build_parser
    elif daemon == 'collector':
        from virtualwire.collectord.main import build_parser
    elif daemon == 'extender':
        from virtualwire.extender.command import build_parser
    else:
        from virtualwire.store.intent_db_service import build_parser
    return build_parser()


def daemon_of(path, given):
    if given:
        return given
    stem = os.path.splitext(os.path.basename(path))[0]
    return stem if stem in DAEMONS else None


def check(path, daemon):
    """(exit code, lines to print)."""
    daemon = daemon_of(path, daemon)
    if daemon is None:
        return 2, ['vwctl: error: which daemon is %s for? Name it '
                   'controller.yaml, collector.yaml, extender.yaml or '
                   'intent-db.yaml, or say --for %s'
                   % (path, '|'.join(DAEMONS))]
    try:
        values = config_file.read(_parser(daemon), path)
    except config_file.ConfigError as e:
        return 1, e.errors
    return 0, ['%s: ok, %d setting%s for virtualwire-%s' % (
        path, len(values), '' if len(values) == 1 else 's', daemon)]


def add_parser(sub):
    from virtualwire.cli import settings
    s = sub.add_parser('config', help="check a daemon's settings file; "
                       'show and set the shared settings')
    verbs = s.add_subparsers(dest='config_verb', required=True)
    settings.add_verbs(verbs)
    c = verbs.add_parser('check', help='say every error in FILE, by line')
    c.add_argument('file')
    c.add_argument('--for', dest='daemon', choices=DAEMONS,
                   help='the daemon it configures (default: from the name)')
    c.set_defaults(local=lambda args: check(args.file, args.daemon))
