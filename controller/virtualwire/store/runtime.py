"""Runtime state: what the controller observed and decided, as opposed to
intent (`store.intent`). Host snapshots (the last view of each host, so a
restart never acts on a partial picture) and migration records (so a
restart mid-migration knows each move's source). Same database as intent,
other tables.

Writes go through one writer thread, in order, so the control loop never
waits on the database: `save_*` queue the write and return a ticket
(`control.loop.Future`) that a caller who needs durability can wait on.
"""
import collections
import datetime
import json
import logging
import time
from typing import Optional

import ovs.db.idl

from os_ken.lib import hub

from virtualwire.future import Future
from virtualwire.store import counter_rows, host_rows
from virtualwire.ovsdb import rawrpc
from virtualwire.store.errors import StoreError
from virtualwire.store.intent import DB_NAME

LOG = logging.getLogger(__name__)


class RuntimeStore:
    def __init__(self, client):
        self.client = client          # the intent store's IdlClient
        self._queue = hub.Queue()
        self._thread = None
        self._written = None          # Counters rows as last written
        # {host: host_rows.written(its rows)} as last written (None: unknown)
        self._hosts_written: Optional[dict] = None
        self._unsaved: dict = {}      # host name -> its view a write lost
        # Bytes of each counter save (what a cluster replicates).
        self.counter_writes: collections.deque = collections.deque(
            maxlen=100)

    def start(self):
        self._thread = hub.spawn(self._writer)
        return self

    def stop(self, timeout=5.0):
        if self._thread is not None:
            self._queue.put(None)
            join = getattr(self._thread, 'join', None)
            if join is not None:
                join(timeout)
            else:
                hub.joinall([self._thread])
            self._thread = None

    def save_host(self, host):
        return self._submit(self._save_host, host)

    def save_migration(self, rec, keep=()):
        return self._submit(self._save_migration, rec, list(keep))

    def _submit(self, fn, *args):
        fut = Future()
        if self._thread is None:        # not started (tests): write now
            self._do(fn, args, fut)
        else:
            self._queue.put((fn, args, fut))
        return fut

    def _writer(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._do(*item)

    def _do(self, fn, args, fut):
        try:
            fut.set(fn(*args))
        except Exception as e:
            LOG.error('runtime write %s failed: %s', fn.__name__, e)
            if fn == self._save_host:
                # Written again after the next write that succeeds (the
                # collector saves every few seconds): a host view lost
                # while the database was away would leave the next start
                # without it, if the host changes nothing after.
                self._unsaved[args[0].name] = args[0]
            fut.set(error=e)
            return
        for name, host in list(self._unsaved.items()):
            try:
                self._save_host(host)
            except Exception as e:      # still away: the next write
                LOG.error('runtime write of host %s failed again: %s',
                          name, e)
                return
            LOG.info('host %s: its view, unsaved since a write failed, '
                     'is written', name)

    def hosts(self):
        """Hosts as last seen: the view the controller starts from, so a
        restart never acts on a partial picture. Read directly, not
        through the IDL: these rows are ours (`store.host_rows`)."""
        hosts, ports = self._host_rows()
        self._hosts_written = {n: host_rows.written((t, ports.get(n, {})))
                               for n, t in hosts.items()}
        # vNIC rows of a host whose own row is gone: known, so a save
        # updates them instead of inserting them again.
        for n in set(ports) - set(hosts):
            self._hosts_written[n] = (None, host_rows.written(
                ('', ports[n]))[1])
        out = {}
        for name, text in hosts.items():
            try:
                out[name] = host_rows.join(text, ports.get(name, {}))
            except (ValueError, TypeError, KeyError) as e:
                LOG.warning('ignoring unreadable host snapshot %s: %s',
                            name, e)
        return out

    def _host_rows(self):
        res = rawrpc.transact(self.client.remote, DB_NAME, [
            {'op': 'select', 'table': 'Host', 'where': [],
             'columns': ['name', 'snapshot']},
            {'op': 'select', 'table': 'HostVnic', 'where': [],
             'columns': ['host', 'vnic', 'port', *host_rows.COLUMNS]}])
        hosts = {r['name']: r['snapshot'] for r in res[0].get('rows', [])}
        ports: dict = {}
        for r in res[1].get('rows', []):
            host, vnic = r.pop('host'), r.pop('vnic')
            if not r.get('port'):
                r.pop('port', None)    # typed (the text only in older rows)
            ports.setdefault(host, {})[vnic] = r
        return hosts, ports

    def _save_host(self, host, again=True):
        """Writes the host's row and the vNIC rows that changed since the
        last save; returns how many rows were written. Rows changed
        behind our back (a restore of an older backup, an operator's
        edit: an update that matched nothing, an insert of a row already
        there) are read again and the save done once more at once: a
        host row left missing would make the next start act without it
        (a restart that briefly removed a working wire's flows)."""
        if self._hosts_written is None:
            self.hosts()
        assert self._hosts_written is not None
        now_rows = host_rows.split(host)
        written = self._hosts_written.get(host.name)
        head, insert, update, delete = host_rows.changes(
            written or (hash(''), {}), now_rows)
        name = host.name
        if not (head or insert or update or delete):
            self._unsaved.pop(name, None)
            return 0
        now = datetime.datetime.now(datetime.timezone.utc) \
            .isoformat(timespec='seconds')
        ops: list = []
        if head:
            ops.append({'op': 'update', 'table': 'Host',
                        'where': [['name', '==', name]],
                        'row': {'snapshot': now_rows[0], 'updated_at': now}}
                       if written and written[0] is not None else
                       {'op': 'insert', 'table': 'Host',
                        'row': {'name': name, 'snapshot': now_rows[0],
                                'updated_at': now}})
        ops += [{'op': 'delete', 'table': 'HostVnic',
                 'where': [['host', '==', name], ['vnic', '==', v]]}
                for v in delete]
        # 'port' emptied: a row written before the typed columns held its
        # vNIC there as JSON text.
        ops += [{'op': 'update', 'table': 'HostVnic',
                 'where': [['host', '==', name], ['vnic', '==', v]],
                 'row': dict(r, port='')} for v, r in update]
        ops += [{'op': 'insert', 'table': 'HostVnic',
                 'row': dict(r, host=name, vnic=v, port='')}
                for v, r in insert]
        # Is the host's row still there? (A save of its vNICs alone would
        # not find out.)
        there = [{'op': 'select', 'table': 'Host', 'columns': ['name'],
                  'where': [['name', '==', name]]}] \
            if written and written[0] is not None else []
        try:
            results = rawrpc.transact(self.client.remote, DB_NAME,
                                      ops + there)
        except StoreError as e:
            self._hosts_written = None      # unsure: read again
            if again and behind_our_back(e):
                LOG.warning('host %s: its rows were not as last written '
                            '(%s); read again and rewritten', name, e)
                return self._save_host(host, again=False)
            raise StoreError('saving host %s failed: %s' % (name, e)) \
                from None
        if again and matched_nothing(ops + there, results):
            LOG.warning('host %s: a row last written here is gone (a '
                        'restore?); read again and rewritten', name)
            self._hosts_written = None
            return self._save_host(host, again=False)
        if self._hosts_written is not None:
            self._hosts_written[name] = host_rows.written(now_rows)
        self._unsaved.pop(name, None)       # this save supersedes it
        return len(ops)

    def migrations(self):
        """Migration records as saved: [dict], in no particular order."""
        with self.client.lock:
            texts = [r.record for r in
                     self.client.idl.tables['Migration'].rows.values()]
        out = []
        for t in texts:
            try:
                out.append(json.loads(t))
            except ValueError as e:
                LOG.warning('ignoring unreadable migration record: %s', e)
        return out

    def _save_migration(self, rec, keep=()):
        """Upsert one migration record (a dict with 'id', 'vm_uuid',
        'state'); records whose id is not in `keep` and that are not active
        are dropped (bounded history)."""
        text = json.dumps(rec, sort_keys=True)
        keep = set(keep) | {rec['id']}

        def build(txn, idl):
            found = False
            for r in list(idl.tables['Migration'].rows.values()):
                if r.id == rec['id']:
                    found = True
                    if r.record != text:
                        r.record, r.state = text, rec['state']
                elif r.id not in keep and r.state != 'prepared':
                    r.delete()
            if not found:
                row = txn.insert(idl.tables['Migration'])
                row.id, row.vm_uuid = rec['id'], rec['vm_uuid']
                row.state, row.record = rec['state'], text

        status, txn = self.client.transact(build)
        if status not in (ovs.db.idl.Transaction.SUCCESS,
                          ovs.db.idl.Transaction.UNCHANGED):
            raise StoreError('saving migration %s failed: %s (%s)'
                             % (rec['id'], status, txn.get_error()))

    # -- flow counters (metrics.collector) -----------------------------------
    # Not through the IDL (the table is not monitored): see store.rawrpc.
    def counters(self):
        """The collector's last saved state (a dict), or None."""
        self._written = self._counter_rows()
        return counter_rows.snapshot(self._written)

    def _counter_rows(self):
        [res] = rawrpc.transact(self.client.remote, DB_NAME, [
            {'op': 'select', 'table': 'Counters', 'where': [],
             'columns': ['name', 'snapshot']}])
        return {r['name']: r['snapshot'] for r in res.get('rows', [])}

    def save_counters(self, snap):
        return self._submit(self._save_counters, snap)

    def _save_counters(self, snap, again=True):
        """Writes the rows that changed since the last save; returns the
        bytes written."""
        now_rows = counter_rows.rows(snap)
        if self._written is None:
            self._written = self._counter_rows()
        insert, update, delete = counter_rows.changes(self._written,
                                                      now_rows)
        if not (insert or update or delete):
            return 0
        now = datetime.datetime.now(datetime.timezone.utc) \
            .isoformat(timespec='seconds')
        ops: list = [{'op': 'delete', 'table': 'Counters',
                'where': [['name', '==', n]]} for n in delete]
        ops += [{'op': 'update', 'table': 'Counters',
                 'where': [['name', '==', n]],
                 'row': {'snapshot': t, 'updated_at': now}}
                for n, t in update]
        ops += [{'op': 'insert', 'table': 'Counters',
                 'row': {'name': n, 'snapshot': t, 'updated_at': now}}
                for n, t in insert]
        t0 = time.monotonic()
        try:
            results = rawrpc.transact(self.client.remote, DB_NAME, ops)
        except StoreError as e:
            self._written = None        # unsure what is there: read again
            if again and behind_our_back(e):
                return self._save_counters(snap, again=False)
            raise StoreError('saving counters failed: %s' % e) from None
        finally:
            if self.client.observe is not None:
                self.client.observe(time.monotonic() - t0)
        if again and matched_nothing(ops, results):
            self._written = None        # a row we wrote is gone: rewrite
            return self._save_counters(snap, again=False)
        for n in delete:
            del self._written[n]
        self._written.update(insert)
        self._written.update(update)
        self.counter_writes.append(sum(len(t) for _n, t in insert + update))
        return self.counter_writes[-1]


def behind_our_back(e) -> bool:
    """Did a write fail on rows not as we wrote them (an insert of one
    already there), not on the database being away?"""
    return 'constraint violation' in str(e)


def matched_nothing(ops, results) -> bool:
    """Did an update or select of a row we had written find no row (it
    was deleted behind our back)?"""
    return any(isinstance(r, dict) and (
        (op['op'] == 'update' and r.get('count') == 0) or
        (op['op'] == 'select' and r.get('rows') == []))
        for op, r in zip(ops, results))
