"""What every daemon reads the same way: listen addresses, its bearer
token, its TLS files, the intent database's remote and whether it can be
trusted; and a watch polled for good. The controller, the collector and
the extender agent use these; none imports another's entry point."""
import logging
import os
import secrets
import sys


def poll_forever(hub, watch, what, every=1.0):
    """watch.poll() every `every` seconds, off the loop, for good."""
    while True:
        try:
            watch.poll()
        except Exception:
            logging.getLogger('virtualwire').exception('reading %s failed',
                                                       what)
        hub.sleep(every)


def split_listen(hostport, what, prog='virtualwire-controller'):
    host, sep, port = hostport.rpartition(':')
    if not sep or not port.isdigit():
        sys.exit('%s: %s must be HOST:PORT, got %r' % (prog, what, hostport))
    return host.strip('[]') or '0.0.0.0', int(port)


def read_token(path):
    """A bearer token someone else made (the extender's, from enrolment):
    exits saying which file when it is missing or empty."""
    try:
        with open(path) as f:
            token = f.read().strip()
    except OSError as e:
        sys.exit('token file %s: %s' % (path, e.strerror))
    if not token:
        sys.exit('token file %s is empty' % path)
    return token


def read_or_create_token(path):
    if os.path.exists(path):
        with open(path) as f:
            token = f.read().strip()
        if token:
            return token
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as f:
        f.write(token + '\n')
    return token


def load_tls(args, prog='virtualwire-controller'):
    """TlsFiles from the three options, or None with the lab flag; exits
    saying what is missing otherwise."""
    given = [o for o in ('private_key', 'certificate', 'ca_cert')
             if getattr(args, o)]
    if args.insecure_plaintext_lab:
        if given:
            sys.exit('%s: --insecure-plaintext-lab '
                     'and TLS files (--%s) exclude each other'
                     % (prog, given[0].replace('_', '-')))
        return None
    if len(given) < 3:
        missing = [o for o in ('private_key', 'certificate', 'ca_cert')
                   if o not in given]
        sys.exit('%s: TLS needs --private-key, '
                 '--certificate and --ca-cert (missing: %s; make them with '
                 'vw-pki), or --insecure-plaintext-lab for a lab '
                 'without TLS' % (prog, ', '.join('--' + m.replace('_', '-')
                                                  for m in missing)))
    from virtualwire.tls import TlsFiles
    try:
        return TlsFiles(args.private_key, args.certificate, args.ca_cert)
    except (OSError, ValueError) as e:
        sys.exit('%s: TLS files: %s' % (prog, e))


def trusted_intent_remote(remote, args, prog='virtualwire-controller'):
    """The ssl: members opened through `ovsdb.tls_remote` (the database's
    CA and name checked in the handshake); exits saying why when no member
    can be trusted."""
    from virtualwire.ovsdb import tls_remote
    tls_remote.configure(args.intent_db_ca, args.intent_db_name)
    bad = tls_remote.why_not(remote)
    members = [p for p in remote.split(',') if p.startswith('ssl:')]
    for part, why in sorted(bad.items()):
        logging.getLogger('virtualwire').warning(
            'intent database member %s refused: %s', part, why)
    if len(bad) == len(members):
        sys.exit('%s: no member of --intent-db can be '
                 'trusted as %s (CA %s):\n%s' % (
                     prog, args.intent_db_name, args.intent_db_ca, '\n'.join(
                         '  %s: %s' % kv for kv in sorted(bad.items()))))
    return tls_remote.translate(remote)


def check_intent_remote(args, prog='virtualwire-controller'):
    """A remote intent database over plain TCP lets anyone who reaches it
    write wires, or a credential whose token they chose: only in a lab."""
    for part in filter(None, args.intent_db.split(',')):
        kind = part.split(':', 1)[0]
        if kind == 'unix':
            continue
        if kind == 'tcp' and args.insecure_plaintext_lab:
            continue
        if kind == 'ssl' and args.intent_db_ca and args.certificate:
            continue
        sys.exit('%s: --intent-db %s: %s' % (
            prog, part, 'plain TCP lets whoever reaches the database write wires '
            'and credentials; use ssl: (with --intent-db-ca), the local '
            'database (no --intent-db) or a unix: socket, or '
            '--insecure-plaintext-lab in a lab' if kind == 'tcp' else
            'ssl: needs --intent-db-ca (the CA of the database servers\' '
            'certificates) and the controller\'s own --private-key, '
            '--certificate, --ca-cert' if kind == 'ssl' else
            'remotes are unix:, ssl: or (lab) tcp:'))
