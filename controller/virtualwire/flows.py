"""Flow computation: pure functions from (intent, host state) to flow tables.

Nothing here talks to a switch. A flow is a neutral, hashable value; the
OpenFlow edge (`ofmsg`) turns it into messages and back.

Pipeline on each host's integration bridge (table 0 only):

  prio 100  in_port=<vNIC a>                        -> output:<vNIC b>   (collapsed)
  prio 100  in_port=<vNIC a>                        -> tun_id=C, tun_dst=<peer>, output:<tunnel>
  prio 100  in_port=<tunnel>, tun_id=C, tun_src=<peer> -> output:<vNIC a>
  prio 0    (anything else)                         -> drop

While a vNIC live-migrates, see `wire_flows` for the extra flows (send to
both, activate on RARP with a learn action: prio 110).

Matching the tunnel source means only the host holding the far end can
inject frames into a wire. No L2/L3 field is matched, so every frame
(VLAN tags, ARP, LLDP, BPDUs, any ethertype) crosses unchanged.
"""
from dataclasses import dataclass
from typing import Dict, Iterable, List, Set, Tuple

from virtualwire import ids
from virtualwire.model import Move, place

PRIO_ACTIVATE = 110          # a moving vNIC's RARP on its destination
PRIO_WIRE = 100
PRIO_DEFAULT = 0
TABLE_WIRE = 0
ETH_RARP = 0x8035
OFPP_CONTROLLER = 0xfffffffd


@dataclass(frozen=True, order=True)
class Flow:
    table: int
    priority: int
    match: Tuple[Tuple[str, object], ...]     # sorted (field, value) pairs
    # ('output', port) | ('set_field', field, value) |
    # ('learn', priority, cookie, match): add (priority, match) -> output
    # to the packet's in_port, in this table
    actions: Tuple[Tuple, ...]
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


def _send(here, target, hosts, cid):
    """Actions on host `here` that carry a wire's frame to `target`."""
    if target.host == here:
        return [('output', target.ofport)]
    return [('set_field', 'tunnel_id', cid),
            ('set_field', 'tun_ipv4_dst', hosts[target.host].tunnel_ip),
            ('output', hosts[here].tunnel_ofport)]


def _ingress_match(here, sender_host, hosts, cid):
    """What frames of wire `cid` sent from `sender_host` look like on
    `here`: a local port's frames are matched by in_port by the caller;
    tunnelled ones by tunnel port, key and the sender's tunnel address."""
    return {'in_port': hosts[here].tunnel_ofport, 'tunnel_id': cid,
            'tun_ipv4_src': hosts[sender_host].tunnel_ip}


def _direction(out, cid, cookie, hosts, sender, targets, gated=None):
    """Flows carrying frames entering at `sender` to every Location in
    `targets` (delivered in that order). A target in `gated` gets its
    tunnel ingress flow with no actions (drop) until activation."""
    acts = []
    for t in targets:
        if t.host == sender.host and gated is not None and t == gated:
            continue                     # learned at activation instead
        acts += _send(sender.host, t, hosts, cid)
    out.setdefault(sender.host, set()).add(
        make_flow(PRIO_WIRE, {'in_port': sender.ofport}, acts, cookie))
    for t in targets:
        if t.host != sender.host:
            out.setdefault(t.host, set()).add(make_flow(
                PRIO_WIRE, _ingress_match(t.host, sender.host, hosts, cid),
                [] if t == gated else [('output', t.ofport)], cookie))


def _has_tunnel(hosts, name):
    h = hosts.get(name)
    return h is not None and bool(h.tunnel_ip) and bool(h.tunnel_ofport)


def wire_flows(wire, hosts, locations, shadows=None) -> Dict[str, Set[Flow]]:
    """Flows one wire needs, per host name. Empty while pending.

    `shadows` (vNIC -> Location) holds not yet activated destinations of
    moving vNICs. While one end of the wire is moving:
      - the far end sends every frame to both the source and the
        destination (no controller round trip at switchover);
      - the destination drops them (a paused guest's tap would queue them
        and deliver them late, as duplicates) until the guest's RARP
        announce (ethertype 0x8035) arrives on its port: a learn action
        then installs, in the switch itself, exactly the flow that
        delivers them, and a copy goes to the controller to clean up;
      - both source and destination send the guest's frames to the far end.
    If both ends move at once, or a host lacks tunnel details, the wire
    keeps its plain flows (it switches when a source port leaves)."""
    state = wire_state(wire, hosts, locations)
    if state not in (COLLAPSED, TUNNELLED):
        return {}
    cid, cookie = wire.connector_id, ids.wire_cookie(wire.connector_id)
    moving = [v for v in wire.ends() if shadows and v in shadows]
    out: Dict[str, Set[Flow]] = {}
    if len(moving) == 1:
        v = moving[0]
        src, dst = locations[v], shadows[v]
        far = locations[wire.other_end(v)]
        if all(_has_tunnel(hosts, h) for h in {src.host, dst.host, far.host}):
            _direction(out, cid, cookie, hosts, far, [src, dst], gated=dst)
            _direction(out, cid, cookie, hosts, src, [far])
            _direction(out, cid, cookie, hosts, dst, [far])
            learned = ({'in_port': far.ofport} if far.host == dst.host else
                       _ingress_match(dst.host, far.host, hosts, cid))
            out[dst.host].add(make_flow(
                PRIO_ACTIVATE, {'in_port': dst.ofport, 'eth_type': ETH_RARP},
                [('learn', PRIO_WIRE, cookie,
                  tuple(sorted(learned.items())))] +
                _send(dst.host, far, hosts, cid) +
                [('output', OFPP_CONTROLLER)], cookie))
            return out
    la, lb = locations[wire.end_a], locations[wire.end_b]
    _direction(out, cid, cookie, hosts, la, [lb])
    _direction(out, cid, cookie, hosts, lb, [la])
    return out


def compute_flows(world) -> Dict[str, Set[Flow]]:
    """Desired flow table of every known host."""
    locations, shadows = world.locations(), world.shadows()
    tables = {name: set(default_flows()) for name in world.hosts}
    for wire in world.wires.values():
        for host, flows in wire_flows(wire, world.hosts, locations,
                                      shadows).items():
            if host in tables:
                tables[host] |= flows
    return tables


def activation_flows(table):
    """{key of a learned flow: RARP flow that learns it} in a host's
    desired table, to recognise activations the switch made while the
    controller was not listening."""
    out = {}
    for f in table.values():
        for a in f.actions:
            if a[0] == 'learn':
                out[(TABLE_WIRE, a[1], a[3])] = f
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
        self.claims = {}           # vnic -> {host name: ofport}, arrival order
        self.moves = {}            # vnic -> Move (live migrations)
        self.finished = []         # (vnic, Move, 'completed'|'aborted')
        self.inferred = []         # (vnic, Move) seen without announcement
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
                arriving = host.name not in claims
                claims[host.name] = port
                if arriving:
                    self._arrived(vnic, host.name)
            elif claims.pop(host.name, None) is not None:
                self._left(vnic, host.name)
            if vnic in self.by_vnic:
                touched.add(self.by_vnic[vnic])
        if old is None or (old.tunnel_ip, old.tunnel_ofport) != \
                (host.tunnel_ip, host.tunnel_ofport):
            touched |= self.by_host.get(host.name, set())
        for cid in touched:
            self._recompute(cid)

    # -- live migrations ---------------------------------------------------
    def _arrived(self, vnic, name):
        """A vNIC plugged on a second host is a live migration to it, even
        if no hook announced it (the hook may not reach us)."""
        claims, move = self.claims[vnic], self.moves.get(vnic)
        if move is not None and name in (move.source, move.destination):
            return
        others = [h for h in claims if h != name]
        if others:
            src = move.source if move is not None and \
                move.source in claims else others[0]
            self.moves[vnic] = Move(src, name)
            self.inferred.append((vnic, self.moves[vnic]))

    def _left(self, vnic, name):
        """The source leaving completes a move; the destination leaving
        aborts it (or the guest died there)."""
        move = self.moves.get(vnic)
        if move is not None and name == move.source:
            self._finish(vnic, 'completed')
        elif move is not None and name == move.destination:
            self._finish(vnic, 'aborted')

    def pop_inferred(self):
        """Moves inferred from claims since the last call (for records)."""
        out, self.inferred = self.inferred, []
        return out

    def _finish(self, vnic, outcome):
        self.finished.append((vnic, self.moves.pop(vnic), outcome))

    def start_move(self, vnic, source, destination):
        """A move announced (hook) or restored (after a restart) before or
        while its destination tap appears."""
        move = self.moves.get(vnic)
        if move is not None and (move.source, move.destination) == \
                (source, destination):
            return
        self.moves[vnic] = Move(source, destination)
        self._touch(vnic)

    def activate(self, vnic, host):
        """The guest announced itself on `host` (its RARP): deliver there
        from now on. Returns True if that activated a move."""
        move = self.moves.get(vnic)
        if move is None or move.activated or move.destination != host or \
                host not in self.claims.get(vnic, {}):
            return False
        self.moves[vnic] = Move(move.source, move.destination, True)
        self._touch(vnic)
        return True

    def cancel_move(self, vnic, outcome='aborted'):
        """Forget a move (timed out, or aborted while its destination port
        is still there): traffic goes back to the source alone."""
        if vnic in self.moves:
            self._finish(vnic, outcome)
            self._touch(vnic)

    def vnic_at(self, host, ofport):
        """The vNIC plugged on host's ofport, or None."""
        h = self.hosts.get(host)
        for v in (h.vnics if h else ()):
            if v.ofport == ofport:
                return v.vnic_id
        return None

    def pop_finished(self):
        f, self.finished = self.finished, []
        return f

    def _touch(self, vnic):
        if vnic in self.by_vnic:
            self._recompute(self.by_vnic[vnic])

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
        return place(self.claims.get(vnic), self.moves.get(vnic))[0]

    def _recompute(self, cid):
        wire = self.wires[cid]
        loc, shadows = {}, {}
        for v in wire.ends():
            here, shadow = place(self.claims.get(v), self.moves.get(v))
            if here is not None:
                loc[v] = here
            if shadow is not None:
                shadows[v] = shadow
        self._place(cid, {l.host for l in loc.values()} |
                    {l.host for l in shadows.values()})
        self._install(cid, wire_flows(wire, self.hosts, loc, shadows))

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
