"""The flows one wire needs on each host: pure, from its ends' locations,
the hosts' encaps, the path between them (`pipeline.paths`), the carriers
(`pipeline.carriers`), per kind of end (`pipeline.ends`), in the declared
pipeline (`pipeline.tables`).

  in <end a on h1>                    -> <end b's delivery>            (collapsed)
  in <end a on h1>                    -> <carrier send to h2>           (h1)
  <carrier ingress from h1 on h2>     -> <end b's delivery>             (h2)

Between sites every extender on the path gets one more flow per
direction: <ingress from the previous hop> -> <send to the next hop>.
Matching each hop's source means only the host that should send a wire's
frames can inject them. No L2/L3 field is matched, so every frame (VLAN
tags, ARP, LLDP, BPDUs, any ethertype) crosses unchanged. While an end
live-migrates, `wire_flows` adds the flows that let the destination switch
activate itself on the guest's first frame there (a learn action).
"""
import collections
from typing import Dict, List, Set, Tuple

from virtualwire.core import ids
from virtualwire.core.held_frames import COPY_LEN
from virtualwire.core.model import GATEWAY, Location
from virtualwire.core.placement import place
from virtualwire.pipeline import ends, guests, host_hold, paths
from virtualwire.pipeline.flow import Flow, host_default_flows, make_flow
from virtualwire.pipeline.switch import switch_location
from virtualwire.pipeline.tables import BY_ID, WIRE

OFPP_CONTROLLER = 0xfffffffd
OFPP_IN_PORT = 0xfffffff8   # OpenFlow drops an output to the port it came in on

# Wire states reported to users.
PENDING = 'pending'          # one or both ends not plugged anywhere
COLLAPSED = 'collapsed'      # both ends on one host: port-to-port flows
TUNNELLED = 'tunnelled'      # ends on two hosts of one site, one carrier hop
EXTENDED = 'extended'        # ends in two sites, through their extenders
WAITING = 'waiting-host'     # both plugged, but no usable path between them


def wire_path(wire, hosts, locations):
    """Hosts the wire's frames cross from end a's host to end b's, or None
    (pending, or no usable path)."""
    la, lb = locations.get(wire.end_a), locations.get(wire.end_b)
    if la is None or lb is None:
        return None
    return paths.route(hosts, la.host, lb.host)


def wire_state(wire, hosts, locations) -> str:
    la, lb = locations.get(wire.end_a), locations.get(wire.end_b)
    if la is None or lb is None:
        return PENDING
    if la.host == lb.host:
        return COLLAPSED
    path = paths.route(hosts, la.host, lb.host)
    if path is None:
        return WAITING
    return TUNNELLED if len(path) == 2 else EXTENDED


Units = List[Tuple[Tuple, ...]]

# What each flow's counter counts, by end letter (core.ids ROLE_*).
_ENTERS = {'a': ids.ROLE_ENTERS_A, 'b': ids.ROLE_ENTERS_B}
_DELIVERS = {'a': ids.ROLE_DELIVERS_A, 'b': ids.ROLE_DELIVERS_B}
_HELD = {'a': ids.ROLE_HELD_A, 'b': ids.ROLE_HELD_B}


class _Builder:
    """Accumulates one wire's flows per host. Flows with one match on one
    host are one flow: their action units (a send or a delivery each) are
    merged, each once, so two targets behind the same hop (a migration's
    source and destination in another site) cost that hop one send."""

    def __init__(self, wire, hosts, on_hosts=True, copies_on_hosts=False):
        self.cid = wire.connector_id
        self.on_hosts = on_hosts     # hosts with vw-hold keep held frames
        self.copies_on_hosts = copies_on_hosts   # and the source's copies
        self.cookie = ids.wire_cookie(wire.connector_id)
        self.hosts = hosts
        # (host, table id, role, match) -> action units, role bits
        self.units: Dict[Tuple[str, int, str, Tuple], Units] = {}
        self.counts: Dict[Tuple[str, int, str, Tuple], int] = {}
        self.letter = {wire.end_a: 'a', wire.end_b: 'b'}

    def add(self, host, role, match, units, counts=0, table=WIRE):
        key = (host, table.id, role, tuple(sorted(match.items())))
        have = self.units.setdefault(key, [])
        for u in units:
            if tuple(u) not in have:
                have.append(tuple(u))
        self.counts[key] = self.counts.get(key, 0) | counts

    def flows(self) -> Dict[str, Set[Flow]]:
        out: Dict[str, Set[Flow]] = {}
        for key, units in self.units.items():
            host, table, role, match = key
            out.setdefault(host, set()).add(make_flow(
                BY_ID[table], role, dict(match),
                [a for u in units for a in u],
                self.cookie | self.counts.get(key, 0)))
        return out

    def path(self, a, b):
        p = paths.route(self.hosts, a, b)
        assert p is not None, 'no path %s -> %s' % (a, b)
        return p

    def hop_send(self, here, nxt):
        carrier, mine, peer = paths.hop(self.hosts, here, nxt)
        return carrier.send(mine, peer, self.cid)

    def hop_ingress(self, here, prev):
        carrier, mine, peer = paths.hop(self.hosts, here, prev)
        return carrier.ingress(mine, peer, self.cid)

    def send(self, here: str, target: Location):
        """Actions on host `here` that start a frame towards `target`."""
        if target.host == here:
            return ends.kind_of(target).deliver(target)
        return self.hop_send(here, self.path(here, target.host)[1])

    def ingress(self, here: str, sender: str):
        """The match of this wire's frames that host `sender` sent, as they
        arrive on `here` (from the last hop of the path between them)."""
        return self.hop_ingress(here, self.path(sender, here)[-2])

    def direction(self, frm: str, sender: Location, targets, gated=None,
                  hold=False):
        """Frames entering at `sender` (a location of end id `frm`) go to
        every Location in `targets` (of the other end, in that order). A
        target equal to `gated` gets its ingress with no actions (drop,
        counted as held) until activation; with `hold`, its frames go to
        the controller instead (`core.held_frames`), or to the ring on
        their own host (`pipeline.host_hold`), and each delivery to the
        other targets (the move's source) sends the controller a short
        copy."""
        copied = [t for t in targets if t != gated] if hold else []
        ring = host_hold.held_on_host(self.hosts, gated, self.on_hosts) \
            if hold and gated is not None else None
        to_held = host_hold.to_ring(*ring) if ring else \
            [('output', OFPP_CONTROLLER)]
        for t in targets:
            self.from_ring(t)
        s = self.letter[frm]
        t_ = 'b' if s == 'a' else 'a'
        enters, delivers, held = (_ENTERS[s], _DELIVERS[t_], _HELD[t_])
        kind = ends.kind_of(sender)
        # The copy before the delivery: its packet-in is queued before
        # the guest's QEMU can read the frame, so a port-stats reply
        # (sent after the queued packet-ins) never counts a read whose
        # copy is still to come (core.held_frames' base). Kept apart from
        # the delivery below: a copy log's tag is its own, popped already.
        units = [(self.copy(t, copied, gated) if t.host == sender.host
                  else [], self.send(sender.host, t))
                 for t in targets
                 if not (t.host == sender.host and t == gated)]
        if hold and gated is not None and gated.host == sender.host:
            units.append(([], to_held))
        # Back out of the port it came in on (two VLANs of one trunk).
        if kind.is_port:
            units = [(c, [('output', OFPP_IN_PORT)
                          if a == ('output', sender.ofport) else a
                          for a in u]) for c, u in units]
        else:
            # Out of a switch port, perhaps one of a flood: a tag pushed
            # for this port's VLAN end must not reach the next port.
            units = [(c, u + [('pop_vlan',)] if any(
                a[0] == 'push_vlan' for a in u) else u) for c, u in units]
        sends = [c + u for c, u in units]
        self.add(sender.host, 'wire', kind.ingress_match(sender),
                 ([kind.strip(sender)] if kind.strip(sender) else []) + sends,
                 enters | (delivers if any(t.host == sender.host and
                                           t != gated for t in targets)
                           else 0), table=kind.ingress_table)
        for t in targets:
            if t.host == sender.host:
                continue
            p = self.path(sender.host, t.host)
            for prev, here, nxt in zip(p, p[1:], p[2:]):
                match = self.hop_ingress(here, prev)
                self.add(here, 'wire', match, [[
                    ('output', OFPP_IN_PORT)
                    if a == ('output', match['in_port']) else a
                    for a in self.hop_send(here, nxt)]])
            if t == gated:
                self.add(t.host, 'held', self.hop_ingress(t.host, p[-2]),
                         [to_held] if hold else [], held)
            else:
                self.add(t.host, 'wire', self.hop_ingress(t.host, p[-2]),
                         [self.copy(t, copied, gated) +
                          ends.kind_of(t).deliver(t)],
                         delivers)

    def from_ring(self, t):
        """What a ring on `t`'s host sends back for it goes to it, tag
        off. Kept while `t` is there, not only while it moves in: the
        ring may still be sending when the flows of the move are gone."""
        ring = host_hold.held_on_host(self.hosts, t, self.on_hosts)
        if ring:
            self.add(t.host, 'wire', host_hold.from_ring(*ring),
                     [[('pop_vlan',)] + ends.kind_of(t).deliver(t)])

    def copy(self, target, copied, gated):
        """The copy of a frame handed to a moving vNIC's source: into its
        host's copy log where both hosts keep frames, else a short one to
        the controller."""
        if target not in copied:
            return []
        log = host_hold.copies_on_host(self.hosts, target, gated,
                                       self.on_hosts) \
            if gated is not None and self.copies_on_hosts else None
        return host_hold.to_log(*log) if log else \
            [('output', OFPP_CONTROLLER, COPY_LEN)]


def wire_flows(wire, hosts, locations, shadows=None,
               hold=False, learn_held=False, hold_on_hosts=True,
               copies_on_hosts=False) -> Dict[str, Set[Flow]]:
    """Flows one wire needs, per host name. Empty while pending.

    `shadows` (vNIC -> Location) holds not yet activated destinations of
    moving vNICs. While one end of the wire is moving:
      - the far end sends every frame to both the source and the
        destination (no controller round trip at switchover);
      - the destination drops them (a paused guest's tap would queue them
        and deliver them late, as duplicates) until the guest's first
        frame of any kind arrives on its port (QEMU's RARP announce,
        a gratuitous ARP, an IPv6 NA, data: a paused guest sends
        nothing, so any frame means it runs there): a learn action then
        installs, in the switch itself, exactly the flow that delivers
        them, and a copy goes to the controller to clean up;
      - both source and destination send the guest's frames to the far end.
    With `hold`, the destination sends its copies to the controller, which
    keeps them (or, on a host with `vw-hold` and `hold_on_hosts`, to its
    own ring: `pipeline.host_hold`); the source switch copies (short) what it hands the guest;
    and the guest's first frame only reaches the controller, which
    delivers the frames the guest never read, then the flows
    (`control.holding`). With `learn_held` as well the destination still
    learns delivery on the guest's first frame: the controller normally
    activates the move before (at the source's STOP), and if it cannot
    (stopped, unreachable) the guest is reached without it, as without
    held frames. Not a destination that keeps the frames in its own
    ring: there only the controller's bundle, after the ring's answer,
    delivers directly, so nothing overtakes what the ring releases.
    If both ends move at once, or the hosts have no path, the wire
    keeps its plain flows (it switches when a source port leaves)."""
    state = wire_state(wire, hosts, locations)
    if state not in (COLLAPSED, TUNNELLED, EXTENDED):
        return {}
    b = _Builder(wire, hosts, hold_on_hosts, copies_on_hosts)
    moving = [v for v in wire.ends() if shadows and v in shadows]
    if len(moving) == 1 and shadows is not None:
        v = moving[0]
        src, dst = locations[v], shadows[v]
        far = locations[wire.other_end(v)]
        names = {src.host, dst.host, far.host}
        # The learned flow delivers out the destination port as it is: a
        # trunk VLAN beside the destination (which needs a tag pushed)
        # keeps the plain flows until the source leaves.
        learnable = not (far.host == dst.host and far.kind == 'vlan')
        if learnable and all(paths.route(hosts, x, y) is not None
                             for x in names for y in names if x != y):
            fe = wire.other_end(v)
            b.direction(fe, far, [src, dst], gated=dst, hold=hold)
            b.direction(v, src, [far])
            b.direction(v, dst, [far])
            mv, fl = b.letter[v], b.letter[fe]
            learn = []
            # With held frames the controller switches, unless told to
            # leave the switch's own learn as the fallback. Never where
            # the destination keeps them in its ring: a learn at RESUME
            # delivered newer frames before the ring's release (captures
            # of 4 bench moves, all 4; docs/live-migration.rst).
            ring = host_hold.held_on_host(hosts, dst, hold_on_hosts) \
                if hold else None
            if not hold or (learn_held and not ring):
                learned = (ends.kind_of(far).ingress_match(far)
                           if far.host == dst.host else
                           b.ingress(dst.host, far.host))
                # The learned flow counts what the plain flow at its match
                # will count once the controller catches up (same cookie:
                # no churn).
                counts = _DELIVERS[mv] | (_ENTERS[fl] if far.host ==
                                          dst.host else 0)
                learn = [('learn', WIRE.priority('wire'), b.cookie | counts,
                          tuple(sorted(learned.items())), dst.ofport)]
            # A ring hears that its guest runs: with no release after it
            # (the controller away), it lets frames through on its own.
            runs = host_hold.runs_signal(*ring) if ring else []
            b.add(dst.host, 'activate', ends.kind_of(dst).ingress_match(dst),
                  [learn + b.send(dst.host, far) +
                   [('output', OFPP_CONTROLLER)] + runs],
                  _ENTERS[mv])
            return b.flows()
    la, lb = locations[wire.end_a], locations[wire.end_b]
    b.direction(wire.end_a, la, [lb])
    b.direction(wire.end_b, lb, [la])
    return b.flows()


def gateway_location(end, hosts):
    """Where a gateway end is (None if it is a vNIC, or its gateway or port
    is not there now)."""
    try:
        parsed = ids.parse_gateway_end(end)
    except ids.InvalidId:
        return None
    if parsed is None:
        return None
    host, port, vlan = parsed
    h = hosts.get(host)
    p = h.gateway_port(port) if h is not None and h.role == GATEWAY else None
    if p is None or p.ofport <= 0:
        return None
    return Location(host, p.ofport, 'port' if vlan is None else 'vlan', vlan)


def fixed_location(end, hosts, switches=None):
    """Where an end that is not a vNIC is: a gateway's port, or a provider
    switch's port (`pipeline.switch`); None for a vNIC, or one not there
    now. These follow the hosts and switches, never a vNIC's placement."""
    return gateway_location(end, hosts) or (
        switch_location(end, switches, hosts) if switches else None)


def wire_locations(wire, claims, moves, hosts=None, switches=None):
    """(locations, shadows) of a wire's ends from placement state (vNICs),
    the hosts (gateway ends) and the switches (their ports)."""
    loc: Dict[str, Location] = {}
    shadows: Dict[str, Location] = {}
    for v in wire.ends():
        gw = fixed_location(v, hosts or {}, switches)
        if gw is not None:
            loc[v] = gw
            continue
        here, shadow = place(claims.get(v), moves.get(v))
        if here is not None:
            loc[v] = here
        if shadow is not None:
            shadows[v] = shadow
    return loc, shadows


def compute_flows(world) -> Dict[str, Set[Flow]]:
    """Desired flow table of every known host, from scratch: the reference
    that `incremental.IncrementalTables` is checked against."""
    # (pipeline.split computes a switch's mesh wires with wire_flows.)
    from virtualwire.pipeline.split import placed_switch_flows
    locations, shadows = world.locations(), world.shadows()
    tables = {name: set(host_default_flows(h))
              for name, h in world.hosts.items()}
    for name, flows in placed_switch_flows(world.switches,
                                           world.hosts).items():
        tables[name] |= flows
    for wire in world.wires.values():
        # The wire's fixed ends over everyone's locations, not a copy of
        # them per wire (quadratic: 100,000 wires took the bench minutes).
        gws = {v: gw for v in wire.ends()
               if (gw := fixed_location(v, world.hosts, world.switches))
               is not None}
        here = collections.ChainMap(gws, locations) if gws else locations
        for host, flows in wire_flows(wire, world.hosts, here,
                                      shadows).items():
            if host in tables:
                tables[host] |= flows
    return {name: guests.merged_table(flows, world.hosts.get(name))
            for name, flows in tables.items()}


def activation_flows(table) -> Dict[tuple, Flow]:
    """{key of a learned flow: activation flow that learns it} in a host's
    desired table, to recognise activations the switch made while the
    controller was not listening."""
    out = {}
    for f in table.values():
        for a in f.actions:
            # Its own learn only: a guest's other vNICs' are theirs.
            if a[0] == 'learn' and a[2] & ids.COOKIE_WIRE_MASK == \
                    f.cookie & ids.COOKIE_WIRE_MASK:
                out[(f.table, a[1], a[3])] = f
    return out

