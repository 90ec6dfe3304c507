"""Durable intent: wires (and the Binding that makes "a vNIC holds one
wire" a database constraint), kept in an OVSDB database with our own
schema. Runtime state (host snapshots, migrations) lives in the same
database but is `store.runtime`'s.

By default the controller runs a local ovsdb-server for it (see
`store.local`); a deployment can point `--intent-db` at a clustered
ovsdb-server instead, which gives it OVSDB's Raft-based HA for free.

The controller applies a wire change only when it comes back on the
change stream (`on_change`), so its own writes and another writer's take
the same path, once. `create_wire` and `delete_wire` push the stream
forward before returning, so a caller that then asks the control loop
sees its own write.
"""
import datetime
import logging
import os
import random

import ovs.db.idl

from virtualwire.core import ids, links
from virtualwire.core.model import ExtenderLink
from virtualwire.ovsdb.idl import IdlClient, fetch_schema
from virtualwire.store import txn as store_txn
from virtualwire.store import wire_writes
from virtualwire.store.placements import PlacementStore
from virtualwire.store.credentials import CredentialStore
from virtualwire.store.revocations import RevocationStore
from virtualwire.store.enrolment import EnrolmentStore
from virtualwire.store.ownership import OwnershipStore
from virtualwire.store.shared_settings import SettingsStore
from virtualwire.store.switches import SwitchStore
from virtualwire.store.topologies import TopologyStore
from virtualwire.store.wire_replica import WireReplica
from virtualwire.store.errors import LinkExists, StoreError, VnicTaken

__all__ = ['IntentStore', 'LinkExists', 'StoreError', 'VnicTaken',
           'SCHEMA_PATH']

LOG = logging.getLogger(__name__)
SCHEMA_PATH = os.path.join(os.path.dirname(__file__), 'schema',
                           'virtualwire.ovsschema')
DB_NAME = 'VirtualWire'
# Not read through the IDL: the collector's saved counters and the hosts'
# last observed state (our own writes, read back only at start: raw,
# store.rawrpc), Binding (written and checked raw: store.wire_writes) and
# Wire (store.wire_replica: a row a model Wire, not an IDL Row);
# Topology and Guest (store.topologies: a topology holds its file).
UNMONITORED = ('Counters', 'Binding', 'Host', 'HostVnic', 'Wire',
               'Topology', 'Guest')


class IntentStore:
    """on_change(events, n_wires) is called with the Wire changes seen
    (('upsert', cid, Wire) / ('delete', cid, None)) and the table's size."""

    def __init__(self, remote, on_change=None):
        schema = fetch_schema(remote, DB_NAME)
        helper = ovs.db.idl.SchemaHelper(schema_json=schema)
        # Every table but the collector's saved counters: one long string
        # the IDL's JSON parser would take seconds to read (store.rawrpc).
        for table in schema['tables']:
            if table not in UNMONITORED:
                helper.register_table(table)
        self.client = IdlClient(remote, helper, name='intent-db')
        # A cluster's members are few and near: after losing the leader,
        # look for the new one every second, not after the library's
        # back-off of up to 8 s (a write waits for our replica to see it:
        # test_intent_tls measured 3-15 s before this).
        self.client.idl._session.reconnect.set_backoff(1000, 1000)
        self.replica = WireReplica(self.client, self._changed)
        self.on_change = on_change
        self.credentials = CredentialStore(self.client)
        self.revocations = RevocationStore(self.client)
        self.ownership = OwnershipStore(self.client)
        self.enrolment = EnrolmentStore(self.client)
        self.settings = SettingsStore(self.client)
        self.placements = PlacementStore(self.client)
        self.switches = SwitchStore(self.client)
        self.topologies = TopologyStore(self)
        self._rng = random.SystemRandom()

    def _changed(self, replica):
        """Hand the changes seen so far to on_change, in commit order: the
        pump and a writer may both get here, so the hand-off happens under
        the replica's lock (on_change must not block: it posts an event)."""
        with replica.lock:
            events = replica.table.take_events()
            if self.on_change:
                self.on_change(events, len(replica.table.rows))

    def flush(self):
        self._changed(self.replica)

    def connected(self):
        """Whether a member answers now (readiness)."""
        return self.client.connected()

    def start(self, timeout=10.0):
        if not self.client.wait_connected(timeout):
            raise StoreError('intent database %s did not answer within %ss'
                             % (self.client.remote, timeout))
        self.client.start()
        self.replica.start()
        if not self.replica.wait_ready(timeout):
            raise StoreError('intent database %s did not send its wires '
                             'within %ss' % (self.client.remote, timeout))
        return self

    def stop(self):
        self.replica.stop()
        self.client.stop()

    def wires(self):
        with self.replica.lock:
            return dict(self.replica.table.rows)

    def create_wire(self, end_a, end_b, connector_id=None):
        """Insert a wire and a Binding per end. The connector id is random
        (unguessable, no coordination between controllers) unless given.
        Binding.vnic is a unique index, so "a vNIC holds one wire" holds in
        the database itself, whoever writes. Raises VnicTaken."""
        return wire_writes.write(self, [(end_a, end_b)], [],
                                 [connector_id] if connector_id else None)[0]

    def delete_wire(self, connector_id):
        self.apply_batch([], [connector_id])

    def apply_batch(self, pairs, cids):
        """Insert a wire per (a, b) and delete the wires `cids`, in one
        transaction: all or nothing (`store.wire_writes`). Returns the
        Wires made."""
        return wire_writes.write(self, pairs, cids)

    def taken_by(self, vnics):
        """{vNIC: connector} of those of `vnics` that are wired."""
        return wire_writes.taken_by(self.client.remote, vnics)

    def draw_ids(self, n, known):
        """n random connector ids none of `known` has (below the range
        split switches' meshes use)."""
        out: set = set()
        while len(out) < n:
            cid = self._rng.randint(ids.CONNECTOR_MIN,
                                    ids.MESH_CONNECTOR_BASE - 1)
            if cid not in known:
                out.add(cid)
        return list(out)

    # -- extender links -------------------------------------------------------
    def links(self):
        with self.client.lock:
            return sorted(_link(r) for r in
                          self.client.idl.tables['ExtenderLink'].rows.values())

    def create_link(self, a, b):
        """Insert the link a-b (names sorted); each side gets the lowest UDP
        port from base_port up that none of its links uses. Raises
        LinkExists."""
        a, b = sorted((a, b))
        created = datetime.datetime.now(datetime.timezone.utc) \
            .isoformat(timespec='seconds')
        made = []

        def build(txn, idl):
            rows = list(idl.tables['ExtenderLink'].rows.values())
            if any((r.a, r.b) == (a, b) for r in rows):
                return                  # nothing written: refused below
            row = txn.insert(idl.tables['ExtenderLink'])
            row.a, row.b, row.created_at = a, b, created
            row.a_port, row.b_port = links.link_ports(
                [_link(r) for r in rows], a, b)
            made.append(ExtenderLink(a, b, row.a_port, row.b_port, created))

        status, txn = self.client.transact(build)
        if not made or status not in (ovs.db.idl.Transaction.SUCCESS,
                                      ovs.db.idl.Transaction.UNCHANGED):
            if any((x.a, x.b) == (a, b) for x in self.links()):
                raise LinkExists('extenders %s and %s are already linked'
                                 % (a, b))
            raise StoreError('storing the link failed: %s (%s)'
                             % (status, txn.get_error()))
        return made[-1]

    def delete_link(self, a, b):
        """True if there was such a link."""
        a, b = sorted((a, b))
        return store_txn.delete_rows(self.client, 'ExtenderLink',
                                     lambda r: (r.a, r.b) == (a, b),
                                     'deleting the link')


def _link(row):
    return ExtenderLink(row.a, row.b, row.a_port, row.b_port, row.created_at)
