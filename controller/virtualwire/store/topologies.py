"""Topologies and guests in the intent database (read and written raw,
`store.rawrpc`: a topology holds its file, a long string the IDL's
parser reads slowly).

Topology: one row per (tenant, name): the file as last applied, its links'
wires ({link key: connector id}), each node's VM, and a generation that
each apply bumps. An apply is one transaction: it waits until the row is
still at the generation the plan was made against (another apply in
between makes it fail, changing nothing: "apply again"), deletes and
inserts the wires (with their Bindings: a vNIC holds one wire, in the
database itself) and writes the row.

Guest: what a hypervisor's libvirt hook reported of a domain: its name,
host and interfaces, so a file can name a VM and its NICs as the user
knows them.
"""
import json
from dataclasses import dataclass
from typing import Dict, List, Optional

from virtualwire.core import errors
from virtualwire.core.topology_plan import Guest, GuestNic, Plan
from virtualwire.store import wire_writes
from virtualwire.ovsdb import rawrpc
from virtualwire.store.errors import StoreError

DB = 'VirtualWire'


@dataclass(frozen=True)
class Record:
    tenant: str
    name: str
    source: str
    wires: Dict[str, int]
    resolved: Dict[str, str]      # node -> VM uuid, "node:nic" -> vNIC
    applied_at: str
    generation: int


def _map(datum):
    """An OVSDB map as JSON ['map', [[k, v], ...]] -> dict."""
    return dict(datum[1]) if isinstance(datum, list) and datum and \
        datum[0] == 'map' else {}


def _record(row) -> Record:
    return Record(row['tenant'], row['name'], row['source'],
                  _map(row['wires']), _map(row['resolved']), row['applied_at'],
                  row['generation'])


def _where(tenant, name):
    return [['tenant', '==', tenant], ['name', '==', name]]


def _unchanged(tenant, name, generation):
    """The row is still as planned against (absent: generation None)."""
    return {'op': 'wait', 'timeout': 0, 'table': 'Topology',
            'where': _where(tenant, name), 'columns': ['generation'],
            'until': '==', 'rows': [] if generation is None
            else [{'generation': generation}]}


class TopologyStore:
    """The intent store's topologies and guests (`IntentStore.topologies`;
    `testing.memory_topologies` is its twin in memory)."""

    def __init__(self, store):
        self.store = store

    @property
    def remote(self):
        return self.store.client.remote

    def records(self, tenant: Optional[str] = None) -> List[Record]:
        """Every topology (of `tenant` if given), by tenant and name."""
        [res] = rawrpc.transact(self.remote, DB, [{
            'op': 'select', 'table': 'Topology',
            'where': [] if tenant is None else [['tenant', '==', tenant]]}])
        return sorted((_record(r) for r in res['rows']),
                      key=lambda r: (r.tenant, r.name))

    def record(self, tenant: str, name: str) -> Optional[Record]:
        [res] = rawrpc.transact(self.remote, DB, [{
            'op': 'select', 'table': 'Topology',
            'where': _where(tenant, name)}])
        return _record(res['rows'][0]) if res['rows'] else None

    def _transact(self, ops, what):
        try:
            rawrpc.transact(self.remote, DB, ops,
                            timeout=wire_writes.SEEN_TIMEOUT)
        except StoreError as e:
            if str(e).startswith('timed out'):
                raise errors.Conflict(
                    'topology %s was changed by another apply meanwhile; '
                    'nothing was changed: apply again' % what) from None
            raise

    def apply(self, tenant: str, name: str, source: str, plan: Plan,
              resolved: Dict[str, str], before: Optional[Record],
              at: str) -> Dict[str, int]:
        """Carry out `plan` in one transaction; returns the topology's
        links now ({key: cid}). Raises Conflict (changed meanwhile),
        VnicTaken (a vNIC wired meanwhile by another caller), StoreError."""
        store = self.store
        pairs = [(a, b) for _k, a, b in plan.create]
        cids = [c for _k, c, _a, _b in plan.delete]
        generation = before.generation if before else None
        for _ in range(16):
            with store.replica.lock:
                chosen = store.draw_ids(len(pairs), store.replica.table.rows)
            links = dict(plan.keep)
            links.update((k, c) for (k, _a, _b), c in zip(plan.create,
                                                          chosen))
            row = {'name': name, 'tenant': tenant, 'source': source,
                   'wires': ['map', sorted(links.items())],
                   'resolved': ['map', sorted(resolved.items())],
                   'applied_at': at, 'generation': (generation or 0) + 1}
            ops = [_unchanged(tenant, name, generation)]
            ops += wire_writes.ops_for(pairs, chosen, cids, at)
            ops.append({'op': 'insert', 'table': 'Topology', 'row': row}
                       if before is None else
                       {'op': 'update', 'table': 'Topology',
                        'where': _where(tenant, name), 'row': row})
            try:
                self._transact(ops, name)
            except StoreError:
                taken = wire_writes.taken_by(self.remote,
                                             [v for p in pairs for v in p])
                taken = {v: c for v, c in taken.items() if c not in cids}
                if taken:
                    raise wire_writes.refusal(taken) from None
                with store.replica.lock:
                    collided = set(chosen) & set(store.replica.table.rows)
                if not collided:
                    raise
                continue                 # another writer drew the same id
            wire_writes.await_replica(store, chosen, cids)
            store.flush()
            return links
        raise StoreError('could not allocate connector ids')

    def destroy(self, before: Record) -> List[int]:
        """Delete the topology's wires and its row, in one transaction;
        returns the connector ids deleted."""
        store = self.store
        with store.replica.lock:
            cids = sorted(c for c in set(before.wires.values())
                          if c in store.replica.table.rows)
        ops = [_unchanged(before.tenant, before.name, before.generation)]
        ops += wire_writes.ops_for([], [], cids, '')
        ops.append({'op': 'delete', 'table': 'Topology',
                    'where': _where(before.tenant, before.name)})
        self._transact(ops, before.name)
        wire_writes.await_replica(store, [], cids)
        store.flush()
        return cids

    # -- guests ---------------------------------------------------------------
    def guests(self) -> List[Guest]:
        [res] = rawrpc.transact(self.remote, DB, [{
            'op': 'select', 'table': 'Guest', 'where': []}])
        return sorted(_guests(res['rows']), key=lambda g: (g.name, g.uuid))

    def guest(self, uuid: str) -> Optional[Guest]:
        """One guest's record, or None."""
        [res] = rawrpc.transact(self.remote, DB, [{
            'op': 'select', 'table': 'Guest',
            'where': [['uuid', '==', uuid.lower()]]}])
        for g in _guests(res['rows']):
            return g
        return None

    def report_guest(self, guest: Guest, at: str):
        """The guest's row as its host's hook saw it (replacing the
        last)."""
        row = {'uuid': guest.uuid, 'name': guest.name, 'host': guest.host,
               'nics': json.dumps([n.__dict__ for n in guest.nics]),
               'reported_at': at}
        rawrpc.transact(self.remote, DB, [
            {'op': 'delete', 'table': 'Guest',
             'where': [['uuid', '==', guest.uuid]]},
            {'op': 'insert', 'table': 'Guest', 'row': row}])


def _guests(rows):
    for r in rows:
        try:
            nics = tuple(GuestNic(**n) for n in json.loads(r['nics']))
        except (ValueError, TypeError):
            nics = ()
        yield Guest(r['uuid'], r['name'], r['host'], nics)
