"""What the collector process reads from and writes to the intent database.

- Wires' identities (connector id, creation time), monitored
  (`store.wire_replica`, as the controller does): a wire deleted is
  forgotten, one recreated under the same id counts from zero.
- Host names by datapath id, from the controller's host rows (read when a
  switch nobody named yet is connected): a switch is read only once the
  controller admitted it as a host.
- The counter base (`store.counter_rows`), restored at start and saved
  only while this process holds the lock `virtualwire_collector`: two
  collectors may read the same switches (a standby keeps its figures
  warm), one writes.
"""
import json
import logging

import ovs.db.idl

from virtualwire.ovsdb.idl import IdlClient, fetch_schema
from virtualwire.ovsdb import rawrpc
from virtualwire.store.intent import DB_NAME
from virtualwire.store.revocations import TABLE as REVOCATIONS
from virtualwire.store.revocations import RevocationStore
from virtualwire.store.runtime import RuntimeStore
from virtualwire.store.wire_replica import WireReplica

LOG = logging.getLogger(__name__)
LOCK = 'virtualwire_collector'


class CollectorIntent:
    def __init__(self, remote, on_wires):
        schema = fetch_schema(remote, DB_NAME)
        helper = ovs.db.idl.SchemaHelper(schema_json=schema)
        # The IDL is here for the lock (and one small table to monitor);
        # the wires come through our own replica.
        helper.register_table('Leadership')
        # Certificates taken back (schema 1.13.0 on): switches presenting
        # one are hung up (`switch_trust`).
        self.revocations = None
        if REVOCATIONS in schema['tables']:
            helper.register_table(REVOCATIONS)
        self.client = IdlClient(remote, helper, name='intent-db')
        self.client.idl._session.reconnect.set_backoff(1000, 1000)
        self.replica = WireReplica(self.client, self._changed)
        self.on_wires = on_wires            # on_wires([(cid, ident)])
        self.runtime = RuntimeStore(self.client)
        if REVOCATIONS in self.client.idl.tables:
            self.revocations = RevocationStore(self.client)
        self._first = True

    def start(self, timeout=10.0):
        self.client.wait_connected(timeout)
        with self.client.lock:
            self.client.idl.set_lock(LOCK)
        self.client.start()
        self.replica.start()
        self.runtime.start()
        return self

    def _changed(self, replica):
        with replica.lock:
            events = replica.table.take_events()
        if events:
            self.on_wires([(cid, w.created_at if w is not None else None)
                           for _, cid, w in events])

    @property
    def has_lock(self):
        return bool(self.client.idl.has_lock)

    def host_names(self):
        """{dpid: host name} of every host row."""
        [res] = rawrpc.transact(self.client.remote, DB_NAME, [
            {'op': 'select', 'table': 'Host', 'where': [],
             'columns': ['name', 'snapshot']}])
        out = {}
        for r in res.get('rows', []):
            try:
                out[int(json.loads(r['snapshot'])['dpid'])] = r['name']
            except (ValueError, KeyError, TypeError):
                LOG.warning('host row %s unreadable', r.get('name'))
        return out

    def saved_counters(self):
        return self.runtime.counters()

    def save(self, snap):
        """Queue a save of the counter base if we hold the lock; returns
        the ticket, or None (a standby collector writes nothing)."""
        if not self.has_lock:
            return None
        return self.runtime.save_counters(snap)
