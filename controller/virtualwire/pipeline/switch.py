"""A provider switch's own flows on its host: pure, from the switch
(`core.switches.ProviderSwitch`) and which of its ports join it to its
other parts (a split switch's mesh). The wires plugged into its ports
bring the rest (`pipeline.wire`, `pipeline.ends.SwitchPortEnd`): a frame
a wire delivers to port k enters SWITCH_IN with reg4 = the switch's
number and reg5 = k; a frame the switch sends out of port k (reg6 = k)
goes down that port's wire from SWITCH_OUT.

  SWITCH_IN   reg4=n,reg5=k   learn (eth_src -> port k), reg6 := 0,
                              look it up (SWITCH_MAC), forward (SWITCH_FWD)
              reg4=n,eth_src=group                drop (no frame comes
                                                  from a group address)
  SWITCH_MAC  reg4=n,eth_dst=M   reg6 := the port M was learned on
  SWITCH_FWD  reg4=n,reg5=k,reg6=0   flood: every other port (from a mesh
                                     port, every local one: split horizon)
              reg4=n,reg5=k,reg6=k   drop (never back out of its port)
              reg4=n,reg7=1,reg6=j   drop, j a mesh port (part to part
                                     to part would loop)
              reg4=n                 out of reg6's port (SWITCH_OUT)

A frame from a mesh port is marked (reg7 = 1) as it enters. Each port
learns through its own flow, so OVS's per-learn limit bounds each port's
MACs; a learned MAC moves to a new port on the first frame seen from it
there (the learn replaces the flow with the same match).
"""
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

from virtualwire.core import ids
from virtualwire.core.model import Location
from virtualwire.core.switches import PREFIX as SWITCH_END
from virtualwire.core.switches import ProviderSwitch
from virtualwire.pipeline.flow import Flow, make_flow
from virtualwire.pipeline.tables import (SWITCH_FWD, SWITCH_IN, SWITCH_MAC,
                                         SWITCH_OUT)

GROUP = ('01:00:00:00:00:00', '01:00:00:00:00:00')   # the I/G bit


def switch_flows(sw: ProviderSwitch,
                 mesh: FrozenSet[int] = frozenset(),
                 local: Optional[FrozenSet[int]] = None,
                 inter: FrozenSet[int] = frozenset(),
                 reps: Optional[FrozenSet[int]] = None) -> Set[Flow]:
    """The flows of switch `sw`'s tables on one host. A central switch
    has every port there. A part of a split switch (`layout`) has its
    `local` ports, `mesh` ports to the other parts of its site, `inter`
    ports to parts in other sites, of which `reps` (None: all) are the
    ones its own ports' floods go to (one part per other site). Where a
    frame entered says where a flood of it goes, so no frame loops:
    from a local port to every other port but the non-`reps` inter ones;
    from a mesh port to the local ports; from an inter port to the local
    and mesh ones. Unicast never goes mesh to mesh nor inter to inter."""
    n = sw.number
    if local is None:
        local = frozenset(range(1, len(sw.ports) + 1)) - mesh - inter
    reps = inter if reps is None else reps
    out = {make_flow(SWITCH_IN, 'bad-source', {'reg4': n, 'eth_src': GROUP},
                     [], ids.switch_cookie(n, 0, ids.SW_BAD_SOURCE)),
           make_flow(SWITCH_FWD, 'known', {'reg4': n},
                     [('resubmit', SWITCH_OUT.id)], ids.switch_cookie(n))}
    for k in sorted(local | mesh | inter):
        learn = ('learn_mac', ids.switch_cookie(n, k, ids.SW_LEARNED),
                 sw.mac_limit, sw.idle_timeout)
        cls = 1 if k in mesh else 2 if k in inter else 0
        mark = [('set_field', 'reg7', cls)] if cls else []
        out.add(make_flow(
            SWITCH_IN, 'port', {'reg4': n, 'reg5': k},
            [learn] + mark + [('set_field', 'reg6', 0),
                              ('resubmit', SWITCH_MAC.id),
                              ('resubmit', SWITCH_FWD.id)],
            ids.switch_cookie(n, k, ids.SW_ENTERED)))
        others = sorted(local - {k}) + (
            sorted(mesh | reps) if cls == 0 else
            sorted(mesh) if cls == 2 else [])
        out.add(make_flow(
            SWITCH_FWD, 'flood', {'reg4': n, 'reg5': k, 'reg6': 0},
            [a for j in others for a in (('set_field', 'reg6', j),
                                         ('resubmit', SWITCH_OUT.id))],
            ids.switch_cookie(n, k, ids.SW_FLOODED)))
        out.add(make_flow(SWITCH_FWD, 'hairpin',
                          {'reg4': n, 'reg5': k, 'reg6': k}, [],
                          ids.switch_cookie(n, k)))
        if cls:
            out.add(make_flow(SWITCH_FWD, 'hairpin',
                              {'reg4': n, 'reg7': cls, 'reg6': k}, [],
                              ids.switch_cookie(n, k)))
    return out


def learned(flow: Flow) -> bool:
    """A MAC a switch learned itself (its learn action's flow): the
    switch's state, not the controller's, so never in a desired table
    and never deleted by a sync's diff; it goes by its idle timeout."""
    return flow.table == SWITCH_MAC.id and \
        flow.cookie & ids.COOKIE_MARK_MASK == ids.SWITCH_COOKIE_MARK and \
        bool(ids.roles_of_cookie(flow.cookie) & ids.SW_LEARNED)


# A part's port towards another part: MESH_BASE + that part's position
# among the switch's sorted part hosts (above every user port's index).
MESH_BASE = 256


@dataclass(frozen=True)
class Part:
    """One host's part of a switch (`switch_flows`' arguments)."""
    host: str
    local: FrozenSet[int]
    mesh: FrozenSet[int] = frozenset()
    inter: FrozenSet[int] = frozenset()
    reps: FrozenSet[int] = frozenset()

    def flows(self, sw):
        return switch_flows(sw, self.mesh, self.local, self.inter,
                            self.reps)


def layout(sw: ProviderSwitch, sites: Dict[str, str]) -> Dict[str, Part]:
    """{host: Part} of switch `sw` (`sites`: host -> site). Parts of one
    site are joined in a full mesh; across sites, each part is joined to
    the first part (by name) of every other site, its representative,
    so a flood crosses to each other site once and fans out there."""
    hosts = sw.part_hosts()
    pos = {h: i for i, h in enumerate(hosts)}
    rep: Dict[str, str] = {}
    for h in hosts:
        rep.setdefault(sites.get(h, ''), h)
    out = {}
    for h in hosts:
        here = sites.get(h, '')
        mesh, inter, reps = set(), set(), set()
        for j in hosts:
            there = sites.get(j, '')
            if j == h:
                continue
            if there == here:
                mesh.add(MESH_BASE + pos[j])
            elif rep[there] == j or rep[here] == h:
                inter.add(MESH_BASE + pos[j])
                if rep[there] == j:
                    reps.add(MESH_BASE + pos[j])
        out[h] = Part(h, frozenset(i for i, p in enumerate(sw.ports, 1)
                                   if sw.part_of(p) == h),
                      frozenset(mesh), frozenset(inter), frozenset(reps))
    return out


def mesh_end(sw: ProviderSwitch, a: str, b: str) -> str:
    """The end of part a's port towards part b."""
    return '%s%s/~%s~%s' % (SWITCH_END, sw.name, a, b)


def mesh_links(sw: ProviderSwitch, sites) -> List[Tuple[int, str, str]]:
    """[(connector id, end on a, end on b)] of the wires joining the
    parts (ids from the reserved range, `ids.mesh_connector`)."""
    parts = layout(sw, sites)
    hosts = sw.part_hosts()
    pairs = [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1:]
             if MESH_BASE + hosts.index(b) in parts[a].mesh | parts[a].inter]
    return [(ids.mesh_connector(sw.number, i), mesh_end(sw, a, b),
             mesh_end(sw, b, a)) for i, (a, b) in enumerate(pairs)]


def switch_location(end, switches: Dict[str, ProviderSwitch],
                    hosts) -> Optional[Location]:
    """Where a switch end is: its part's host, the port's index (None if
    it is not a switch end, or its switch, port or host is not there). A
    mesh end (`mesh_end`) is a part's port towards another part."""
    if not isinstance(end, str) or not end.startswith(SWITCH_END):
        return None
    name, _, port = end[len(SWITCH_END):].partition('/')
    sw = switches.get(name)
    if sw is None:
        return None
    if port.startswith('~'):
        a, _, b = port[1:].partition('~')
        where = sw.part_hosts()
        if a not in where or b not in where or a not in hosts:
            return None
        return Location(a, MESH_BASE + where.index(b), 'switchport',
                        switch=sw.number)
    k = sw.index(port)
    host = sw.part_of(port)
    if k is None or host is None or host not in hosts:
        return None
    return Location(host, k, 'switchport', switch=sw.number)


def port_figures(sw: ProviderSwitch, readings) -> Dict[str, dict]:
    """Per port of `sw`: frames that entered the switch there, those of
    them flooded (an unknown, broadcast or multicast destination), and
    the MACs it learned there, from `readings` [(cookie, packets,
    eth_dst or None)] of the switch's flows (its cookie's number)."""
    out: Dict[str, dict] = {
        p: {'entered_packets': 0, 'flooded_packets': 0, 'macs': []}
        for p in sw.ports}
    for cookie, packets, eth_dst in readings:
        if cookie & ids.COOKIE_MARK_MASK != ids.SWITCH_COOKIE_MARK or \
                (cookie >> 16) & 0xFFFF != sw.number:
            continue
        k = cookie & 0xFFFF
        if not 1 <= k <= len(sw.ports):
            continue
        fig = out[sw.ports[k - 1]]
        roles = ids.roles_of_cookie(cookie)
        if roles & ids.SW_ENTERED:
            fig['entered_packets'] += packets
        if roles & ids.SW_FLOODED:
            fig['flooded_packets'] += packets
        if roles & ids.SW_LEARNED and eth_dst:
            fig['macs'].append(eth_dst)
    for fig in out.values():
        fig['macs'].sort()
    return out
