"""Flow computation: pure functions from (intent, host state) to flow tables.

Nothing here talks to a switch. A flow is a neutral, hashable value; the
OpenFlow edge (`ofmsg`) turns it into messages and back.

Pipeline on each host's integration bridge (table 0 only):

  prio 100  in_port=<vNIC a>                        -> output:<vNIC b>   (collapsed)
  prio 100  in_port=<vNIC a>                        -> tun_id=C, tun_dst=<peer>, output:<tunnel>
  prio 100  in_port=<tunnel>, tun_id=C, tun_src=<peer> -> output:<vNIC a>
  prio 0    (anything else)                         -> drop

Matching the tunnel source means only the host holding the far end can
inject frames into a wire. No L2/L3 field is matched, so every frame
(VLAN tags, ARP, LLDP, BPDUs, any ethertype) crosses unchanged.
"""
from dataclasses import dataclass
from typing import Dict, Iterable, List, Set, Tuple

from virtualwire import ids

PRIO_WIRE = 100
PRIO_DEFAULT = 0
TABLE_WIRE = 0


@dataclass(frozen=True, order=True)
class Flow:
    table: int
    priority: int
    match: Tuple[Tuple[str, object], ...]     # sorted (field, value) pairs
    actions: Tuple[Tuple, ...]                # ('output', port) | ('set_field', field, value)
    cookie: int = 0

    @property
    def key(self):
        """What OpenFlow considers the identity of a flow entry."""
        return (self.table, self.priority, self.match)

    @property
    def connector_id(self):
        return ids.connector_of_cookie(self.cookie)

    def __str__(self):
        m = ','.join('%s=%s' % kv for kv in self.match) or '*'
        a = ','.join(':'.join(str(x) for x in act) for act in self.actions) \
            or 'drop'
        return 'table=%d,prio=%d,cookie=%#x,%s actions=%s' % (
            self.table, self.priority, self.cookie, m, a)


def make_flow(priority, match, actions, cookie, table=TABLE_WIRE):
    return Flow(table, priority, tuple(sorted(match.items())),
                tuple(actions), cookie)


def default_flows():
    """The table-miss entry: drop, counted, with our infrastructure cookie."""
    return {make_flow(PRIO_DEFAULT, {}, [], ids.wire_cookie(0))}


# Wire states reported to users.
PENDING = 'pending'          # one or both vNICs not plugged anywhere
COLLAPSED = 'collapsed'      # both ends on one host: port-to-port flows
TUNNELLED = 'tunnelled'      # ends on two hosts: GRE with key = connector id
WAITING = 'waiting-host'     # both plugged, but a host lacks tunnel details


def wire_state(wire, hosts, locations):
    la, lb = locations.get(wire.end_a), locations.get(wire.end_b)
    if la is None or lb is None:
        return PENDING
    if la.host == lb.host:
        return COLLAPSED
    for loc in (la, lb):
        h = hosts.get(loc.host)
        if h is None or not h.tunnel_ip or not h.tunnel_ofport:
            return WAITING
    return TUNNELLED


def wire_flows(wire, hosts, locations) -> Dict[str, Set[Flow]]:
    """Flows one wire needs, per host name. Empty while pending."""
    state = wire_state(wire, hosts, locations)
    cookie = ids.wire_cookie(wire.connector_id)
    out: Dict[str, Set[Flow]] = {}
    if state == COLLAPSED:
        la, lb = locations[wire.end_a], locations[wire.end_b]
        out[la.host] = {
            make_flow(PRIO_WIRE, {'in_port': la.ofport},
                      [('output', lb.ofport)], cookie),
            make_flow(PRIO_WIRE, {'in_port': lb.ofport},
                      [('output', la.ofport)], cookie),
        }
    elif state == TUNNELLED:
        for here, there in ((wire.end_a, wire.end_b),
                            (wire.end_b, wire.end_a)):
            lh, lt = locations[here], locations[there]
            h, peer = hosts[lh.host], hosts[lt.host]
            out.setdefault(lh.host, set()).update({
                make_flow(PRIO_WIRE, {'in_port': lh.ofport},
                          [('set_field', 'tunnel_id', wire.connector_id),
                           ('set_field', 'tun_ipv4_dst', peer.tunnel_ip),
                           ('output', h.tunnel_ofport)], cookie),
                make_flow(PRIO_WIRE, {'in_port': h.tunnel_ofport,
                                      'tunnel_id': wire.connector_id,
                                      'tun_ipv4_src': peer.tunnel_ip},
                          [('output', lh.ofport)], cookie),
            })
    return out


def compute_flows(world) -> Dict[str, Set[Flow]]:
    """Desired flow table of every known host."""
    locations = world.locations()
    tables = {name: set(default_flows()) for name in world.hosts}
    for wire in world.wires.values():
        for host, flows in wire_flows(wire, world.hosts, locations).items():
            if host in tables:
                tables[host] |= flows
    return tables


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
    add, modify, delete = [], [], []
    for key, f in want.items():
        old = have.get(key)
        if old is None or old.cookie != f.cookie:
            add.append(f)
        elif old.actions != f.actions:
            modify.append(f)
    for key, f in have.items():
        if key not in want:
            delete.append(f)
    return FlowDiff(sorted(add), sorted(modify), sorted(delete))


def diff_keys(installed, table, keys) -> FlowDiff:
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


def apply_diff(installed, diff):
    """Update a key -> Flow map as a switch does when it applies `diff`."""
    for f in diff.delete:
        installed.pop(f.key, None)
    for f in diff.add + diff.modify:
        installed[f.key] = f


class IncrementalTables:
    """`compute_flows(world)` kept up to date with work proportional to what
    changed: each wire's flows are recomputed only when the wire or one of
    its ends' placement changes, and only the hosts whose table changed are
    reported dirty. Pure (no I/O); checked against compute_flows in tests.
    """

    def __init__(self):
        self.wires = {}            # cid -> Wire
        self.hosts = {}            # name -> Host
        self.claims = {}           # vnic -> {host name: ofport}
        self.by_vnic = {}          # vnic -> cid
        self.by_host = {}          # host name -> {cid} with an end there
        self.wire_out = {}         # cid -> {host: set(Flow)}
        self.wire_hosts = {}       # cid -> hosts its ends are on
        self.tables = {}           # host -> {key: Flow}
        self.dirty = {}            # host -> keys changed since pop_dirty

    # -- inputs ------------------------------------------------------------
    def set_wires(self, wires):
        for cid in [c for c in self.wires if c not in wires]:
            self.remove_wire(cid)
        for cid, w in wires.items():
            if self.wires.get(cid) != w:
                self.add_wire(w)

    def add_wire(self, wire):
        if wire.connector_id in self.wires:
            self.remove_wire(wire.connector_id)
        self.wires[wire.connector_id] = wire
        for v in wire.ends():
            self.by_vnic[v] = wire.connector_id
        self._recompute(wire.connector_id)

    def remove_wire(self, cid):
        wire = self.wires.pop(cid, None)
        if wire is None:
            return
        for v in wire.ends():
            if self.by_vnic.get(v) == cid:
                del self.by_vnic[v]
        self._place(cid, set())
        self._install(cid, {})

    def set_host(self, host):
        old = self.hosts.get(host.name)
        self.hosts[host.name] = host
        if host.name not in self.tables:
            self._new_table(host.name)
        touched = set()
        old_ports = {v.vnic_id: v.ofport for v in old.vnics} if old else {}
        new_ports = {v.vnic_id: v.ofport for v in host.vnics}
        for vnic in set(old_ports) | set(new_ports):
            if old_ports.get(vnic) == new_ports.get(vnic):
                continue
            claims = self.claims.setdefault(vnic, {})
            port = new_ports.get(vnic)
            if port is not None and port > 0:
                claims[host.name] = port
            else:
                claims.pop(host.name, None)
            if vnic in self.by_vnic:
                touched.add(self.by_vnic[vnic])
        if old is None or (old.tunnel_ip, old.tunnel_ofport) != \
                (host.tunnel_ip, host.tunnel_ofport):
            touched |= self.by_host.get(host.name, set())
        for cid in touched:
            self._recompute(cid)

    def incumbents(self):
        """vNIC -> incumbent host, for vNICs claimed by two hosts (the
        World.incumbents equivalent of this state)."""
        return {v: next(iter(c)) for v, c in self.claims.items()
                if len(c) > 1}

    def pop_dirty(self):
        """{host: flow keys changed} since the last call."""
        d, self.dirty = self.dirty, {}
        return d

    def table(self, host):
        return set(self.tables.get(host, {}).values()) or default_flows()

    def table_map(self, host):
        """The live key -> Flow map of a host (read under the owner's lock)."""
        if host not in self.tables:
            self._new_table(host)
        return self.tables[host]

    def _new_table(self, host):
        self.tables[host] = {f.key: f for f in default_flows()}
        self.dirty.setdefault(host, set()).update(self.tables[host])

    # -- internals ---------------------------------------------------------
    def location(self, vnic):
        claims = self.claims.get(vnic)
        if not claims:
            return None
        name = next(iter(claims))   # the incumbent: claims keep arrival order
        from virtualwire.model import Location
        return Location(name, claims[name])

    def _recompute(self, cid):
        wire = self.wires[cid]
        loc = {v: l for v in wire.ends()
               for l in [self.location(v)] if l is not None}
        self._place(cid, {l.host for l in loc.values()})
        self._install(cid, wire_flows(wire, self.hosts, loc))

    def _place(self, cid, hosts):
        for h in self.wire_hosts.get(cid, set()) - hosts:
            self.by_host.get(h, set()).discard(cid)
        for h in hosts:
            self.by_host.setdefault(h, set()).add(cid)
        if hosts:
            self.wire_hosts[cid] = hosts
        else:
            self.wire_hosts.pop(cid, None)

    def _install(self, cid, out):
        old = self.wire_out.get(cid, {})
        for host in set(old) | set(out):
            before, after = old.get(host, set()), out.get(host, set())
            if before == after:
                continue
            table = self.table_map(host)
            keys = self.dirty.setdefault(host, set())
            for f in before - after:
                if table.get(f.key) == f:
                    del table[f.key]
                keys.add(f.key)
            for f in after:
                table[f.key] = f
                keys.add(f.key)
        if out:
            self.wire_out[cid] = out
        else:
            self.wire_out.pop(cid, None)
