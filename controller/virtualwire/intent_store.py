"""Durable intent: wires, kept in an OVSDB database with our own schema.

By default the controller runs a local ovsdb-server for it (see
`local_ovsdb`); a deployment can point `--intent-db` at a clustered
ovsdb-server instead, which gives it OVSDB's Raft-based HA for free.
"""
import datetime
import json
import logging
import os
import random

import ovs.db.idl

from virtualwire import ids
from virtualwire.model import Wire, host_from_json, host_to_json
from virtualwire.ovsdb_client import IdlClient, fetch_schema

LOG = logging.getLogger(__name__)
SCHEMA_PATH = os.path.join(os.path.dirname(__file__), 'schema',
                           'virtualwire.ovsschema')
DB_NAME = 'VirtualWire'


class StoreError(Exception):
    pass


class VnicTaken(StoreError):
    """The database refused a second wire on a vNIC."""


class _WireEvents(ovs.db.idl.Idl):
    """Records Wire row changes, so a writer learns what changed without
    re-reading the table (which would make bulk writes O(n^2))."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.events = []

    def notify(self, event, row, updates=None):
        if row._table.name != 'Wire':
            return
        if event == ovs.db.idl.ROW_DELETE:
            self.events.append(('delete', row.connector_id, None))
        else:
            self.events.append(('upsert', row.connector_id, _wire(row)))


class IntentStore:
    """on_change(events, n_wires) is called with the Wire changes seen
    (('upsert', cid, Wire) / ('delete', cid, None)) and the table's size."""

    def __init__(self, remote, on_change=None):
        helper = ovs.db.idl.SchemaHelper(
            schema_json=fetch_schema(remote, DB_NAME))
        helper.register_all()
        self.client = IdlClient(remote, helper, name='intent-db',
                                idl_class=_WireEvents)
        self.client.on_change = self._changed
        self._on_change = on_change
        self._rng = random.SystemRandom()

    def _changed(self, client):
        with client.lock:
            events, client.idl.events = client.idl.events, []
            n = len(client.idl.tables['Wire'].rows)
        if self._on_change:
            self._on_change(events, n)

    def start(self, timeout=10.0):
        if not self.client.wait_connected(timeout):
            raise StoreError('intent database %s did not answer within %ss'
                             % (self.client.remote, timeout))
        self.client.start()
        return self

    def stop(self):
        self.client.stop()

    def wires(self):
        with self.client.lock:
            return {r.connector_id: _wire(r)
                    for r in self.client.idl.tables['Wire'].rows.values()}

    def create_wire(self, end_a, end_b, connector_id=None):
        """Insert a wire and a Binding per end. The connector id is random
        (unguessable, no coordination between controllers) unless given.
        Binding.vnic is a unique index, so "a vNIC holds one wire" holds in
        the database itself, whoever writes. Raises VnicTaken."""
        for _ in range(16):
            cid = connector_id or self._rng.randint(ids.CONNECTOR_MIN,
                                                    ids.CONNECTOR_MAX)
            created = datetime.datetime.now(datetime.timezone.utc) \
                .isoformat(timespec='seconds')

            def build(txn, idl):
                row = txn.insert(idl.tables['Wire'])
                row.connector_id = cid
                row.end_a = end_a
                row.end_b = end_b
                row.created_at = created
                for v in (end_a, end_b):
                    b = txn.insert(idl.tables['Binding'])
                    b.vnic = v
                    b.connector_id = cid

            status, txn = self.client.transact(build)
            if status in (ovs.db.idl.Transaction.SUCCESS,
                          ovs.db.idl.Transaction.UNCHANGED):
                return Wire(cid, end_a, end_b, created)
            err = txn.get_error() or ''
            if 'constraint violation' in err and 'Binding' in err:
                raise VnicTaken('vNIC %s or %s is already wired'
                                % (end_a, end_b))
            if connector_id is not None or 'constraint' not in err:
                raise StoreError('storing wire failed: %s (%s)'
                                 % (status, err))
            LOG.info('connector id %#x collided, drawing another', cid)
        raise StoreError('could not allocate a connector id')

    def delete_wire(self, connector_id):
        def build(txn, idl):
            for table in ('Wire', 'Binding'):
                for r in list(idl.tables[table].rows.values()):
                    if r.connector_id == connector_id:
                        r.delete()

        status, txn = self.client.transact(build)
        if status not in (ovs.db.idl.Transaction.SUCCESS,
                          ovs.db.idl.Transaction.UNCHANGED):
            raise StoreError('deleting wire failed: %s (%s)'
                             % (status, txn.get_error()))


    # ---- last observed southbound state ----------------------------------
    def hosts(self):
        """Hosts as last seen: the view the controller starts from, so a
        restart never acts on a partial picture (see Engine.world)."""
        out = {}
        with self.client.lock:
            rows = list(self.client.idl.tables['Host'].rows.values())
            snaps = [(r.name, r.snapshot) for r in rows]
        for name, snap in snaps:
            try:
                out[name] = host_from_json(snap)
            except (ValueError, TypeError) as e:
                LOG.warning('ignoring unreadable host snapshot %s: %s',
                            name, e)
        return out

    def save_host(self, host):
        snap = host_to_json(host)
        now = datetime.datetime.now(datetime.timezone.utc) \
            .isoformat(timespec='seconds')

        def build(txn, idl):
            for r in idl.tables['Host'].rows.values():
                if r.name == host.name:
                    if r.snapshot != snap:
                        r.snapshot = snap
                        r.updated_at = now
                    return
            row = txn.insert(idl.tables['Host'])
            row.name = host.name
            row.snapshot = snap
            row.updated_at = now

        status, txn = self.client.transact(build)
        if status not in (ovs.db.idl.Transaction.SUCCESS,
                          ovs.db.idl.Transaction.UNCHANGED):
            raise StoreError('saving host %s failed: %s (%s)'
                             % (host.name, status, txn.get_error()))


    # ---- live migrations -------------------------------------------------
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

    def save_migration(self, rec, keep=()):
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


def _wire(row):
    return Wire(row.connector_id, row.end_a, row.end_b, row.created_at)
