"""What the collector process reads from and writes to the intent database.

- Wires' identities (connector id, creation time), monitored: a wire
  deleted is forgotten, one recreated under the same id counts from zero.
  Only those two columns (the IDL keeps a Python object per row).
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

from virtualwire.southbound.ovsdb_idl import IdlClient, fetch_schema
from virtualwire.store import rawrpc
from virtualwire.store.intent import DB_NAME
from virtualwire.store.runtime import RuntimeStore

LOG = logging.getLogger(__name__)
LOCK = 'virtualwire_collector'


class _WireIdentities(ovs.db.idl.Idl):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.events = []

    def notify(self, event, row, updates=None):
        if row._table.name != 'Wire':
            return
        self.events.append((row.connector_id, None
                            if event == ovs.db.idl.ROW_DELETE
                            else row.created_at))


class CollectorIntent:
    def __init__(self, remote, on_wires):
        schema = fetch_schema(remote, DB_NAME)
        helper = ovs.db.idl.SchemaHelper(schema_json=schema)
        helper.register_columns('Wire', ['connector_id', 'created_at'])
        self.client = IdlClient(remote, helper, name='intent-db',
                                idl_class=_WireIdentities)
        self.client.idl._session.reconnect.set_backoff(1000, 1000)
        self.client.on_change = self._changed
        self.on_wires = on_wires            # on_wires([(cid, ident)])
        self.runtime = RuntimeStore(self.client)
        self._first = True

    def start(self, timeout=10.0):
        self.client.wait_connected(timeout)
        with self.client.lock:
            self.client.idl.set_lock(LOCK)
        self.client.start()
        self.runtime.start()
        return self

    def _changed(self, client):
        with client.lock:
            events, client.idl.events = client.idl.events, []
        if events:
            self.on_wires(events)

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
