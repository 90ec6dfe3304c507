"""`virtualwire-intent-db restore`: put a backup back without bringing
back what was revoked since it was taken.

`ovsdb-client restore` alone replaces every row with the backup's: an
API token revoked yesterday, or a join token spent yesterday, in a
backup from the day before works again. So the backup is prepared on a
copy first, then restored in one step:

1. converted to the server's schema if it is older (never down: a
   backup newer than the server is refused, as an upgrade would be);
2. the revocation list (`store.revocations`) of the server it replaces,
   and of any newer backups named with --revocations-from, is merged
   into the copy's, and every credential and join token row whose
   digest is listed is deleted from the copy;
3. what the controllers observed (hosts as last seen, their vNICs,
   moves in flight, flow counters: `OBSERVED`) is the server's, read
   last, not the backup's, when the server has any: observations are
   newer than any backup (an older host snapshot read at the next start
   would name a host missing, and its wires' flows elsewhere would be
   removed until it reports; counters would go back; a finished move
   would be under way again);
4. the copy is restored (`ovsdb-client restore`: one transaction, so no
   controller ever reads the backup's rows without the list).

What it protects against: an operator restoring an older backup (after
a bad apply, or into a rebuilt cluster with a newer backup at hand)
reviving what was taken back. What it does not: restoring into a new,
empty cluster from one old backup alone cannot know later revocations;
name the newest backup you have with --revocations-from. A controller's
observation written between step 3's read and the restore is lost with
the backup's rows; the controller writes it again at its next save
(`store.runtime` reads its rows again when one it wrote is gone)."""
import json
import os
import shutil
import subprocess
import tempfile
import time

from virtualwire.store import schema_version
from virtualwire.ovsdb import rawrpc

DB = 'VirtualWire'
LIST_SINCE = '1.13.0'       # the schema that brought Revocation
TAKEN_BACK = (('Credential', 'credentials'), ('JoinToken', 'join tokens'))
# Tables of what the controllers observed, not intent (store.runtime).
OBSERVED = ('Host', 'HostVnic', 'Migration', 'Counters')
_ENTRY = ('kind', 'name', 'digest', 'revoked_at', 'expires_at', 'reason')


def _optional(v):
    """An OVSDB optional column's JSON ([] or ['set', []] or a value)."""
    if isinstance(v, list) and v and v[0] == 'set':
        return v[1][0] if v[1] else None
    return v


def plan(backup, listed, revoked, have_list, now):
    """Pure. `backup`: the backup's {'Credential': [(uuid, digest)],
    'JoinToken': [...]}, `listed`: the digests its own list holds;
    `revoked`: entries (dicts of _ENTRY) from the server and other
    backups; `have_list`: the schema has the Revocation table. Returns
    (OVSDB operations, taken back as {table: count}, entries added)."""
    listed = set(listed)
    ops: list = []
    added = 0
    for e in revoked:
        exp = _optional(e.get('expires_at'))
        if e['digest'] in listed or (exp is not None and exp <= now):
            continue
        listed.add(e['digest'])
        if have_list:
            row = {k: e[k] for k in _ENTRY if k != 'expires_at'}
            row['expires_at'] = ['set', [] if exp is None else [exp]]
            ops.append({'op': 'insert', 'table': 'Revocation', 'row': row})
            added += 1
    taken = {}
    for table, _ in TAKEN_BACK:
        gone = [u for u, d in backup.get(table, ()) if d in listed]
        taken[table] = len(gone)
        ops += [{'op': 'delete', 'table': table,
                 'where': [['_uuid', '==', ['uuid', u]]]} for u in gone]
    return ops, taken, added


def keep_leadership(server, backup):
    """Pure. The OVSDB operations that keep the server's Leadership row
    when its term is newer than the backup's: a term is the OpenFlow
    generation id switches have seen, so bringing back an older one
    would make the next leader's role requests look stale to every
    switch. `server`: its row (all columns) or None; `backup`: [(uuid,
    term)]."""
    if server is None or (backup and all(server['term'] <= t
                                         for _, t in backup)):
        return []
    row = {k: v for k, v in server.items() if not k.startswith('_')}
    return [{'op': 'delete', 'table': 'Leadership',
             'where': [['_uuid', '==', ['uuid', u]]]} for u, _ in backup] + \
        [{'op': 'insert', 'table': 'Leadership', 'row': row}]


def keep_observed(server, backup):
    """Pure. The OVSDB operations that put the server's rows of each
    OBSERVED table in place of the backup's, for the tables where the
    server has rows (a new, empty cluster keeps the backup's: an old
    picture is better than none at a start). `server`: {table: rows
    (all columns)}; `backup`: {table: [uuid]}."""
    ops: list = []
    for table, rows in sorted(server.items()):
        if not rows:
            continue
        ops += [{'op': 'delete', 'table': table,
                 'where': [['_uuid', '==', ['uuid', u]]]}
                for u in backup.get(table, ())]
        ops += [{'op': 'insert', 'table': table,
                 'row': {k: v for k, v in r.items()
                         if not k.startswith('_')}} for r in rows]
    return ops


class Restore:
    """The steps, with `run(cmd, stdin=None) -> stdout` (raising on a
    non-zero exit), the ovsdb-client prefix (timeout) and the server's
    local remote. The copy is prepared through an ovsdb-server of its
    own (any size of transaction; ovsdb-tool transact takes it as one
    argument)."""

    def __init__(self, run, client, remote):
        self.run, self.client, self.remote = run, client, remote

    @staticmethod
    def _select(remote, table, cols=None):
        op = {'op': 'select', 'table': table, 'where': []}
        if cols:
            op['columns'] = cols
        return rawrpc.transact(remote, DB, [op], timeout=30)[0]['rows']

    def _file_entries(self, f):
        v = self.run(['ovsdb-tool', 'db-version', f])
        if schema_version.compare(v, LIST_SINCE) == 'older':
            raise ValueError('%s is at schema %s: it predates the '
                             'revocation list (%s)' % (f, v, LIST_SINCE))
        out = json.loads(self.run(['ovsdb-tool', 'query', f, json.dumps(
            [DB, {'op': 'select', 'table': 'Revocation', 'where': [],
                  'columns': list(_ENTRY)}])]))
        return out[0]['rows']

    def restore(self, backup_file, revocations_from=(), now=None):
        """Returns what it did, for the operator, as one line."""
        now = time.time() if now is None else now
        ours = self.run(self.client + ['get-schema', self.remote, DB])
        tables = set(json.loads(ours)['tables'])
        have_list = 'Revocation' in tables
        revoked = self._select(self.remote, 'Revocation', list(_ENTRY)) \
            if have_list else []
        for f in revocations_from:
            revoked += self._file_entries(f)
        leader = self._select(self.remote, 'Leadership') \
            if 'Leadership' in tables else []
        tmp = tempfile.mkdtemp(prefix='vw-restore-')
        try:
            copy = os.path.join(tmp, 'backup.db')
            shutil.copyfile(backup_file, copy)
            self._convert(copy, ours, tmp)
            with _Server(copy, tmp) as prep:
                backup = {t: [(r['_uuid'][1], r['digest']) for r in
                              self._select(prep, t, ['_uuid', 'digest'])]
                          for t, _ in TAKEN_BACK if t in tables}
                listed = {r['digest'] for r in self._select(
                    prep, 'Revocation', ['digest'])} if have_list else ()
                ops, taken, added = plan(backup, listed, revoked, have_list,
                                         now)
                if 'Leadership' in tables:
                    ops += keep_leadership(leader[0] if leader else None, [
                        (r['_uuid'][1], r['term']) for r in self._select(
                            prep, 'Leadership', ['_uuid', 'term'])])
                observed = [t for t in OBSERVED if t in tables]
                ops += keep_observed(
                    {t: self._select(self.remote, t) for t in observed},
                    {t: [r['_uuid'][1] for r in self._select(
                        prep, t, ['_uuid'])] for t in observed})
                if ops:
                    rawrpc.transact(prep, DB, ops, timeout=60)
            with open(copy) as f:
                self.run(self.client + ['restore', self.remote, DB], stdin=f)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return ('restored %s; revocation list: %d entries added from the '
                'server and newer backups; took back %s still in the backup'
                % (backup_file, added, ', '.join(
                    '%d %s' % (taken.get(t, 0), what)
                    for t, what in TAKEN_BACK)))

    def _convert(self, copy, server_schema, tmp):
        have = self.run(['ovsdb-tool', 'db-version', copy])
        theirs = json.loads(server_schema)['version']
        way = schema_version.compare(have, theirs)
        if way == 'newer':
            raise ValueError(
                'the backup is at schema %s, newer than the server\'s %s: '
                'upgrade the server first (a conversion never goes down); '
                'nothing changed' % (have, theirs))
        if way == 'older':
            path = os.path.join(tmp, 'server.ovsschema')
            with open(path, 'w') as f:
                f.write(server_schema)
            self.run(['ovsdb-tool', 'convert', copy, path])


class _Server:
    """ovsdb-server on a file, in the foreground, for as long as the
    `with` lasts; its remote is the `with`'s value."""

    def __init__(self, db, tmp):
        self.sock = os.path.join(tmp, 'prep.sock')
        self.cmd = ['ovsdb-server', db, '--remote=punix:' + self.sock,
                    '--unixctl=' + os.path.join(tmp, 'prep.ctl'),
                    '--no-chdir', '-vconsole:off']

    def __enter__(self):
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        for _ in range(200):
            if os.path.exists(self.sock):
                return 'unix:' + self.sock
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.__exit__()
        err = self.proc.stderr.read() if self.proc.stderr else ''
        raise ValueError('ovsdb-server would not open the backup: %s'
                         % err.strip())

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(10)
