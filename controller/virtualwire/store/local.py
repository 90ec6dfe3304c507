"""Start (or reuse) the local ovsdb-server that holds the intent database.

It runs detached with a pidfile, as a service of its own: a controller
restart leaves it (and the wires in it) untouched.
"""
import json
import logging
import os
import subprocess
import time

from virtualwire.store import collector_access, schema_version
from virtualwire.store.intent import SCHEMA_PATH


class LocalOvsdbError(Exception):
    pass


def _alive(pidfile):
    try:
        with open(pidfile) as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def ensure(state_dir, collector=(), tls=None):
    """Returns the remote ('unix:...') of a running intent ovsdb-server.
    collector: its pssl: listeners for the collector (RBAC role
    `collector`, store.collector_access), served with tls = (key,
    certificate, the collector's CA) when the server starts here."""
    os.makedirs(state_dir, exist_ok=True)
    db = os.path.join(state_dir, 'intent.db')
    sock = os.path.join(state_dir, 'intent.sock')
    pidfile = os.path.join(state_dir, 'intent-ovsdb.pid')
    remote = 'unix:' + sock
    ours = _run(['ovsdb-tool', 'schema-version', SCHEMA_PATH])
    if _alive(pidfile) and os.path.exists(sock):
        # The server outlives controller restarts (hitless): a controller
        # that brings a newer schema converts it in place, online; an
        # older one (rolled back) leaves a newer database as it is.
        have = _run(['ovsdb-client', 'get-schema-version', remote,
                     'VirtualWire'])
        if _up(have, ours):
            _run(['ovsdb-client', 'convert', remote, SCHEMA_PATH])
        _grant(remote, collector)
        return remote
    if not os.path.exists(db):
        # Not silent: against switches that hold wires this is the start
        # control.safe_start guards (their flows are held, not deleted).
        logging.getLogger(__name__).warning(
            'no intent database at %s: creating an empty one', db)
        _run(['ovsdb-tool', 'create', db, SCHEMA_PATH])
    elif _up(_run(['ovsdb-tool', 'db-version', db]), ours):
        _run(['ovsdb-tool', 'convert', db, SCHEMA_PATH])
    served = []
    if collector:
        key, cert, ca = tls
        served = ['--remote=' + collector_access.REMOTE,
                  '--private-key=' + key, '--certificate=' + cert,
                  '--ca-cert=' + ca]
    _run(['ovsdb-server', db, '--remote=punix:' + sock] + served + [
          '--pidfile=' + pidfile,
          '--unixctl=' + os.path.join(state_dir, 'intent-ovsdb.ctl'),
          '--log-file=' + os.path.join(state_dir, 'intent-ovsdb.log'),
          '--detach', '--no-chdir'])
    for _ in range(100):
        if os.path.exists(sock):
            _grant(remote, collector)
            return remote
        time.sleep(0.05)
    raise LocalOvsdbError('ovsdb-server did not create %s' % sock)


def _grant(remote, collector):
    """The database lists exactly `collector` as the collector's
    listeners (none: the rows go)."""
    _run(['ovsdb-client', 'transact', remote,
          json.dumps(collector_access.ops(list(collector)))])


def _up(have, ours):
    """Whether to convert a database at `have` to our schema."""
    way = schema_version.compare(have, ours)
    if way == 'newer':
        logging.getLogger(__name__).warning(
            'the intent database is at schema %s, newer than this '
            "controller's %s: used as it is, never converted down", have,
            ours)
    return way == 'older'


def stop(state_dir):
    pid = _alive(os.path.join(state_dir, 'intent-ovsdb.pid'))
    if pid:
        os.kill(pid, 15)


def _run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise LocalOvsdbError('%s failed: %s' % (' '.join(cmd),
                                                  p.stderr.strip()))
    return p.stdout.strip()
