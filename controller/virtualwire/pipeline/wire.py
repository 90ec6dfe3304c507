"""The flows one wire needs on each host: pure, from its ends' locations,
the hosts' encaps and the carriers (`pipeline.carriers`), per kind of end
(`pipeline.ends`), in the declared pipeline (`pipeline.tables`).

  in <end a on h1>                    -> <end b's delivery>            (collapsed)
  in <end a on h1>                    -> <carrier send to h2>           (h1)
  <carrier ingress from h1 on h2>     -> <end b's delivery>             (h2)

Matching the carrier's source means only the host holding the far end can
inject frames into a wire. No L2/L3 field is matched, so every frame (VLAN
tags, ARP, LLDP, BPDUs, any ethertype) crosses unchanged. While an end
live-migrates, `wire_flows` adds the flows that let the destination switch
activate itself on the guest's first frame there (a learn action).
"""
from typing import Dict, Set

from virtualwire.core import ids
from virtualwire.core.model import Location
from virtualwire.core.placement import place
from virtualwire.pipeline import carriers, ends
from virtualwire.pipeline.flow import Flow, default_flows, make_flow
from virtualwire.pipeline.tables import WIRE

OFPP_CONTROLLER = 0xfffffffd

# Wire states reported to users.
PENDING = 'pending'          # one or both ends not plugged anywhere
COLLAPSED = 'collapsed'      # both ends on one host: port-to-port flows
TUNNELLED = 'tunnelled'      # ends on two hosts, joined by a carrier
WAITING = 'waiting-host'     # both plugged, but the hosts share no carrier


def wire_state(wire, hosts, locations) -> str:
    la, lb = locations.get(wire.end_a), locations.get(wire.end_b)
    if la is None or lb is None:
        return PENDING
    if la.host == lb.host:
        return COLLAPSED
    if carriers.choose(hosts.get(la.host), hosts.get(lb.host)) is None:
        return WAITING
    return TUNNELLED


class _Builder:
    """Accumulates one wire's flows per host."""

    def __init__(self, wire, hosts):
        self.cid = wire.connector_id
        self.cookie = ids.wire_cookie(wire.connector_id)
        self.hosts = hosts
        self.out: Dict[str, Set[Flow]] = {}

    def add(self, host, role, match, actions):
        self.out.setdefault(host, set()).add(
            make_flow(WIRE, role, match, actions, self.cookie))

    def hop(self, sender: str, target: str):
        c = carriers.choose(self.hosts.get(sender), self.hosts.get(target))
        assert c is not None, 'no carrier %s -> %s' % (sender, target)
        return c

    def send(self, here: str, target: Location):
        """Actions on host `here` that carry a frame to `target`."""
        if target.host == here:
            return ends.kind_of(target).deliver(target)
        carrier, mine, peer = self.hop(here, target.host)
        return carrier.send(mine, peer, self.cid)

    def ingress(self, here: str, sender: str):
        """The match of this wire's frames arriving on `here` from host
        `sender` by carrier."""
        carrier, mine, peer = self.hop(here, sender)
        return carrier.ingress(mine, peer, self.cid)

    def direction(self, sender: Location, targets, gated=None):
        """Frames entering at `sender` go to every Location in `targets`
        (in that order). A target equal to `gated` gets its carrier
        ingress with no actions (drop) until activation."""
        acts = []
        for t in targets:
            if t.host == sender.host and t == gated:
                continue                     # learned at activation instead
            acts += self.send(sender.host, t)
        self.add(sender.host, 'wire', ends.kind_of(sender).ingress_match(
            sender), acts)
        for t in targets:
            if t.host != sender.host:
                self.add(t.host, 'wire', self.ingress(t.host, sender.host),
                         [] if t == gated else ends.kind_of(t).deliver(t))


def wire_flows(wire, hosts, locations, shadows=None) -> Dict[str, Set[Flow]]:
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
    If both ends move at once, or the hosts share no carrier, the wire
    keeps its plain flows (it switches when a source port leaves)."""
    state = wire_state(wire, hosts, locations)
    if state not in (COLLAPSED, TUNNELLED):
        return {}
    b = _Builder(wire, hosts)
    moving = [v for v in wire.ends() if shadows and v in shadows]
    if len(moving) == 1 and shadows is not None:
        v = moving[0]
        src, dst = locations[v], shadows[v]
        far = locations[wire.other_end(v)]
        names = {src.host, dst.host, far.host}
        if all(carriers.choose(hosts.get(x), hosts.get(y)) is not None
               for x in names for y in names if x != y):
            b.direction(far, [src, dst], gated=dst)
            b.direction(src, [far])
            b.direction(dst, [far])
            learned = (ends.kind_of(far).ingress_match(far)
                       if far.host == dst.host else
                       b.ingress(dst.host, far.host))
            b.add(dst.host, 'activate', ends.kind_of(dst).ingress_match(dst),
                  [('learn', WIRE.priority('wire'), b.cookie,
                    tuple(sorted(learned.items())))] +
                  b.send(dst.host, far) + [('output', OFPP_CONTROLLER)])
            return b.out
    la, lb = locations[wire.end_a], locations[wire.end_b]
    b.direction(la, [lb])
    b.direction(lb, [la])
    return b.out


def wire_locations(wire, claims, moves):
    """(locations, shadows) of a wire's ends from placement state."""
    loc: Dict[str, Location] = {}
    shadows: Dict[str, Location] = {}
    for v in wire.ends():
        here, shadow = place(claims.get(v), moves.get(v))
        if here is not None:
            loc[v] = here
        if shadow is not None:
            shadows[v] = shadow
    return loc, shadows


def compute_flows(world) -> Dict[str, Set[Flow]]:
    """Desired flow table of every known host, from scratch: the reference
    that `incremental.IncrementalTables` is checked against."""
    locations, shadows = world.locations(), world.shadows()
    tables = {name: set(default_flows()) for name in world.hosts}
    for wire in world.wires.values():
        for host, flows in wire_flows(wire, world.hosts, locations,
                                      shadows).items():
            if host in tables:
                tables[host] |= flows
    return tables


def activation_flows(table) -> Dict[tuple, Flow]:
    """{key of a learned flow: activation flow that learns it} in a host's
    desired table, to recognise activations the switch made while the
    controller was not listening."""
    out = {}
    for f in table.values():
        for a in f.actions:
            if a[0] == 'learn':
                out[(f.table, a[1], a[3])] = f
    return out

