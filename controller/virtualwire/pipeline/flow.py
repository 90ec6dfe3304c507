"""A flow as a neutral, hashable value, and the keyed diff between what a
switch holds and what it should hold. The OpenFlow edge
(`southbound.openflow`) turns flows into messages and back."""
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Tuple

from virtualwire.core import ids
from virtualwire.pipeline import host_hold, tables


# Slotted, with its key made once: a controller holds four flows per wire
# and every table, diff and switch's copy keys them (a dict per flow and a
# new key tuple per lookup were 1.6 KB per wire, 160 MB at 100,000 wires).
@dataclass(frozen=True, order=True, slots=True)
class Flow:
    table: int
    priority: int
    match: Tuple[Tuple[str, object], ...]     # sorted (field, value) pairs
    # ('output', port) | ('set_field', field, value) |
    # ('learn', priority, cookie, match, port): add (priority, match) ->
    # output:port, in this table |
    # ('push_vlan', ethertype) | ('pop_vlan',)
    actions: Tuple[Tuple, ...]
    cookie: int = 0
    # What OpenFlow considers the identity of a flow entry.
    key: tuple = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, 'key',
                           (self.table, self.priority, self.match))

    @property
    def connector_id(self):
        return ids.connector_of_cookie(self.cookie)

    def __str__(self):
        m = ','.join('%s=%s' % kv for kv in self.match) or '*'
        a = ','.join(':'.join(str(x) for x in act) for act in self.actions) \
            or 'drop'
        return 'table=%d,prio=%d,cookie=%#x,%s actions=%s' % (
            self.table, self.priority, self.cookie, m, a)


# A flow's small parts recur: ('in_port', 5), ('output', 3) and
# ('set_field', 'tun_ipv4_dst', ip) on every wire of a host and across
# hosts. Held once each, they were 12 of a wire's 16 small tuples (70 MB
# at 100,000 wires). Those naming the wire's own key are not: they recur
# nowhere. The table is bounded (emptied when full: sharing is only a
# saving, never a meaning).
_PER_WIRE = frozenset({'tunnel_id', 'tun_metadata0', 'learn'})
_SHARED: Dict[tuple, tuple] = {}
_SHARED_MAX = 1 << 16


def shared(part):
    try:
        if part[0] in _PER_WIRE or part[1] in _PER_WIRE:
            return part
        out = _SHARED.get(part)
        if out is None:
            if len(_SHARED) >= _SHARED_MAX:
                _SHARED.clear()
            out = _SHARED[part] = part
        return out
    except (TypeError, IndexError):   # unhashable, or a lone ('pop_vlan',)
        return part


def make_flow(table, role, match, actions, cookie) -> Flow:
    """A flow of `table` (a `tables.Table`) at the priority of `role`,
    checked against the declared pipeline."""
    f = Flow(table.id, table.priority(role),
             tuple([shared(p) for p in sorted(match.items())]),
             tuple([shared(a) for a in actions]), cookie)
    tables.check(f)
    return f


def default_flows(carrier_ports=()):
    """The table-miss entries (drop, counted as frames from unwired ports)
    and, per carrier port, a drop counted as rejected carrier frames (no
    wire accepts them from that source): the per-host drop counters
    operators read (`metrics`)."""
    # The wire table's only: a switch table's miss is a lookup's answer
    # (unknown MAC, no wire on a port), not a frame from an unwired port.
    out = {make_flow(tables.WIRE, 'miss', {}, [],
                     ids.wire_cookie(0) | ids.ROLE_UNWIRED)}
    for port in sorted(set(carrier_ports)):
        out.add(make_flow(tables.WIRE, 'reject', {'in_port': port}, [],
                          ids.wire_cookie(0) | ids.ROLE_REJECTED))
    return out


def host_default_flows(host):
    """default_flows for a `core.model.Host`, from its usable encaps; and
    where it keeps held frames itself, its ring's answers to us and its
    copy log's markers back to it (`pipeline.host_hold`)."""
    if host is None:
        return default_flows()
    out = default_flows(e.ofport for e in host.encaps if e.usable)
    if host.hold_port is not None:
        out.add(make_flow(tables.WIRE, 'wire',
                          host_hold.answers(host.hold_port),
                          host_hold.ANSWER_ACTIONS,
                          ids.wire_cookie(0)))
        out.add(make_flow(tables.WIRE, 'wire',
                          host_hold.markers(host.hold_port),
                          host_hold.MARK_ACTIONS, ids.wire_cookie(0)))
    return out


@dataclass
class FlowDiff:
    add: List[Flow]
    modify: List[Flow]
    delete: List[Flow]

    def __bool__(self):
        return bool(self.add or self.modify or self.delete)

    def __len__(self):
        return len(self.add) + len(self.modify) + len(self.delete)


def diff_flows(installed: Iterable[Flow], desired: Iterable[Flow]) -> FlowDiff:
    """What to send so that `installed` becomes `desired`.

    Flows already right are left alone (counters keep counting, traffic is
    never touched). Same match but other actions is a modify, which keeps
    the entry's counters; a changed cookie needs an add (modify keeps the
    old cookie)."""
    have = {f.key: f for f in installed}
    want = {f.key: f for f in desired}
    return diff_keys(have, want, set(have) | set(want))


def diff_keys(installed: Dict, table: Dict, keys) -> FlowDiff:
    """diff_flows restricted to the flow keys that changed: `installed` and
    `table` map key -> Flow. Work is proportional to len(keys), not to the
    table size, so one more wire costs the same on a full switch."""
    add, modify, delete = [], [], []
    for key in keys:
        old, f = installed.get(key), table.get(key)
        if f is None:
            if old is not None:
                delete.append(old)
        elif old is None or old.cookie != f.cookie:
            add.append(f)
        elif old.actions != f.actions:
            modify.append(f)
    return FlowDiff(sorted(add), sorted(modify), sorted(delete))


def apply_diff(installed: Dict, diff: FlowDiff) -> None:
    """Update a key -> Flow map as a switch does when it applies `diff`."""
    for f in diff.delete:
        installed.pop(f.key, None)
    for f in diff.add + diff.modify:
        installed[f.key] = f


def of_wires(flows):
    """The flows in `flows` that belong to a wire (not infrastructure)."""
    return {f for f in flows if f.connector_id}
