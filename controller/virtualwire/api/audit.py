"""The audit log: one JSON line per request that changes (or tries to
change) something, refused ones included: when, who (the credential, not
the token), from where, what (method, path, the request's fields that
name objects) and the result (status, and the error's message).

Lines are appended to a file (`--audit-log`, default STATE_DIR/audit.log)
and flushed before the answer is sent; the last MEMORY lines are also kept
for `GET /v1/audit`. What it does not do: fsync each line (a machine
crash can lose the last ones; a controller crash cannot), sign lines, or
keep an attacker with root on the controller from editing the file: ship
it to a log host for that.

Extender reports that succeed are not changes anyone makes (an agent
says every few seconds what it sees) and are left out; a refused one is
kept.

Requests with no valid credential are not lines of their own: anyone
who reaches the port could fill the disk with them and push the real
entries out of `GET /v1/audit`. They are counted by source address and
written as one summary line at most every ANONYMOUS_EVERY seconds
(the busiest ANONYMOUS_SOURCES addresses named)."""
import collections
import datetime
import json
import logging
import os
import threading
import time

LOG = logging.getLogger(__name__)
MEMORY = 1000
# Body fields worth keeping, per action (never a token, never a key).
FIELDS = {'connect': ('a', 'b'), 'issue_credential': ('role', 'name'),
          'assign_tenant': ('tenant',), 'connect_extenders': ('a', 'b'),
          'announce_migration': ('vm', 'vm_uuid', 'vnics', 'destination'),
          'migration_released': ('host',), 'batch': ('create', 'delete'),
          'set_setting': ('value',), 'place_vnic': ('host',),
          'extender_key_change': ('result', 'old', 'new', 'why')}
QUIET_WHEN_OK = frozenset({'extender_report'})
ANONYMOUS_EVERY = 60.0
ANONYMOUS_SOURCES = 10


def who(principal):
    if principal is None:
        return 'anonymous'
    if principal == 'admin':
        return 'admin'
    return '%s:%s' % principal


class AuditLog:
    def __init__(self, path, clock=time.monotonic):
        self.path = path
        self.lock = threading.Lock()
        self.recent = collections.deque(self._tail(), maxlen=MEMORY)
        self.failures = 0
        self.clock = clock
        self.anonymous_total = 0
        self._anonymous: collections.Counter = collections.Counter()
        self._anonymous_written = None      # clock() of the last summary

    def _tail(self):
        if not self.path or not os.path.exists(self.path):
            return []
        with open(self.path, 'rb') as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 512 * MEMORY))
            lines = f.read().splitlines()[-MEMORY:]
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue        # the first, cut line
        return out

    def record(self, principal, remote, method, path, action, body, status,
               message=None):
        if method == 'GET' or (action in QUIET_WHEN_OK and status < 300):
            return
        if principal is None:
            self._count_anonymous(remote)
            return
        entry = {'at': _now(), 'who': who(principal), 'from': remote,
                 'method': method, 'path': path, 'action': action,
                 'status': status}
        if isinstance(body, dict) and action == 'batch':
            # Counts, not ten thousand items.
            body = {k: len(v) for k, v in body.items()
                    if k in ('create', 'delete') and isinstance(v, list)}
        if isinstance(body, dict):
            kept = {k: body[k] for k in FIELDS.get(action, ()) if k in body}
            if kept:
                entry['request'] = kept
        if message:
            entry['error'] = message
        self._write(entry)

    def _count_anonymous(self, remote):
        with self.lock:
            self.anonymous_total += 1
            if remote in self._anonymous or \
                    len(self._anonymous) < 4 * ANONYMOUS_SOURCES:
                self._anonymous[remote] += 1
            else:
                self._anonymous['(others)'] += 1
            now = self.clock()
            if self._anonymous_written is not None and \
                    now - self._anonymous_written < ANONYMOUS_EVERY:
                return
            self._anonymous_written = now
            seen, self._anonymous = self._anonymous, collections.Counter()
        self._write({'at': _now(), 'who': 'anonymous',
                     'action': 'unauthenticated', 'status': 401,
                     'count': sum(seen.values()),
                     'from': dict(seen.most_common(ANONYMOUS_SOURCES))})

    def _write(self, entry):
        line = json.dumps(entry, sort_keys=True) + '\n'
        with self.lock:
            self.recent.append(entry)
            if not self.path:
                return
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND |
                             os.O_CREAT, 0o600)
                with os.fdopen(fd, 'a') as f:
                    f.write(line)
            except OSError as e:
                # The change is made; that it went unlogged must be seen.
                self.failures += 1
                LOG.error('audit log %s not written: %s', self.path, e)

    def view(self, limit=100):
        with self.lock:
            entries = list(self.recent)[-limit:]
        return {'entries': entries, 'path': self.path,
                'write_failures': self.failures,
                'unauthenticated_total': self.anonymous_total}


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(
        timespec='milliseconds')
