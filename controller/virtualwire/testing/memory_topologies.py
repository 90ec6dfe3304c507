"""`store.topologies.TopologyStore` in memory, over a `MemoryIntent`: the
same checks (the row unchanged since the plan, a vNIC holds one wire), the
wires changed through the intent's one batch so the controller sees them
as one change."""
import dataclasses
from typing import Dict, List, Optional, Tuple

from virtualwire.core import errors
from virtualwire.core.topology_plan import Guest, Plan
from virtualwire.store.topologies import Record


class MemoryTopologies:
    def __init__(self, intent):
        self.intent = intent
        self.rows: Dict[Tuple[str, str], Record] = {}
        self.guest_rows: Dict[str, Guest] = {}
        self.writes = 0              # transactions, for tests

    def records(self, tenant: Optional[str] = None) -> List[Record]:
        return sorted((r for r in self.rows.values()
                       if tenant is None or r.tenant == tenant),
                      key=lambda r: (r.tenant, r.name))

    def record(self, tenant, name):
        return self.rows.get((tenant, name))

    def _check(self, tenant, name, before):
        now = self.rows.get((tenant, name))
        if (now.generation if now else None) != \
                (before.generation if before else None):
            raise errors.Conflict('topology %s was changed by another apply '
                                  'meanwhile; nothing was changed: apply '
                                  'again' % name)

    def apply(self, tenant, name, source, plan: Plan, resolved, before, at):
        self._check(tenant, name, before)
        made = self.intent.apply_batch([(a, b) for _k, a, b in plan.create],
                                       [c for _k, c, _a, _b in plan.delete])
        links = dict(plan.keep)
        links.update((k, w.connector_id) for (k, _a, _b), w in
                     zip(plan.create, made))
        self.rows[(tenant, name)] = Record(
            tenant, name, source, links, dict(resolved), at,
            (before.generation if before else 0) + 1)
        self.writes += 1
        return links

    def destroy(self, before: Record):
        self._check(before.tenant, before.name, before)
        cids = sorted(c for c in set(before.wires.values())
                      if c in self.intent.rows)
        if cids:
            self.intent.apply_batch([], cids)
        del self.rows[(before.tenant, before.name)]
        self.writes += 1
        return cids

    def guests(self):
        return sorted(self.guest_rows.values(), key=lambda g: (g.name,
                                                               g.uuid))

    def guest(self, uuid):
        return self.guest_rows.get(uuid.lower())

    def report_guest(self, guest: Guest, at):
        self.guest_rows[guest.uuid] = dataclasses.replace(guest)
