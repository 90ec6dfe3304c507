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
from typing import Dict, FrozenSet, Optional, Set

from virtualwire.core import ids
from virtualwire.core.model import Location
from virtualwire.core.switches import ProviderSwitch, parse_end
from virtualwire.pipeline.flow import Flow, make_flow
from virtualwire.pipeline.tables import (SWITCH_FWD, SWITCH_IN, SWITCH_MAC,
                                         SWITCH_OUT)

GROUP = ('01:00:00:00:00:00', '01:00:00:00:00:00')   # the I/G bit


def switch_flows(sw: ProviderSwitch,
                 mesh: FrozenSet[int] = frozenset()) -> Set[Flow]:
    """The flows of switch `sw`'s tables on its host; `mesh`: indexes of
    its ports that join it to its other parts."""
    n = sw.number
    ports = range(1, len(sw.ports) + 1)
    out = {make_flow(SWITCH_IN, 'bad-source', {'reg4': n, 'eth_src': GROUP},
                     [], ids.switch_cookie(n, 0, ids.SW_BAD_SOURCE)),
           make_flow(SWITCH_FWD, 'known', {'reg4': n},
                     [('resubmit', SWITCH_OUT.id)], ids.switch_cookie(n))}
    for k in ports:
        learn = ('learn_mac', ids.switch_cookie(n, k, ids.SW_LEARNED),
                 sw.mac_limit, sw.idle_timeout)
        mark = [('set_field', 'reg7', 1)] if k in mesh else []
        out.add(make_flow(
            SWITCH_IN, 'port', {'reg4': n, 'reg5': k},
            [learn] + mark + [('set_field', 'reg6', 0),
                              ('resubmit', SWITCH_MAC.id),
                              ('resubmit', SWITCH_FWD.id)],
            ids.switch_cookie(n, k, ids.SW_ENTERED)))
        others = [j for j in ports
                  if j != k and not (k in mesh and j in mesh)]
        out.add(make_flow(
            SWITCH_FWD, 'flood', {'reg4': n, 'reg5': k, 'reg6': 0},
            [a for j in others for a in (('set_field', 'reg6', j),
                                         ('resubmit', SWITCH_OUT.id))],
            ids.switch_cookie(n, k, ids.SW_FLOODED)))
        out.add(make_flow(SWITCH_FWD, 'hairpin',
                          {'reg4': n, 'reg5': k, 'reg6': k}, [],
                          ids.switch_cookie(n, k)))
        if k in mesh:
            out.add(make_flow(SWITCH_FWD, 'hairpin',
                              {'reg4': n, 'reg7': 1, 'reg6': k}, [],
                              ids.switch_cookie(n, k)))
    return out


def learned(flow: Flow) -> bool:
    """A MAC a switch learned itself (its learn action's flow): the
    switch's state, not the controller's, so never in a desired table
    and never deleted by a sync's diff; it goes by its idle timeout."""
    return flow.table == SWITCH_MAC.id and \
        flow.cookie & ids.COOKIE_MARK_MASK == ids.SWITCH_COOKIE_MARK and \
        bool(ids.roles_of_cookie(flow.cookie) & ids.SW_LEARNED)


def switch_location(end, switches: Dict[str, ProviderSwitch],
                    hosts) -> Optional[Location]:
    """Where a switch end is: its switch's host, the port's index (None if
    it is not a switch end, or its switch, port or host is not there)."""
    try:
        parsed = parse_end(end)
    except ids.InvalidId:
        return None
    if parsed is None:
        return None
    sw = switches.get(parsed[0])
    if sw is None or sw.host is None or sw.host not in hosts:
        return None
    k = sw.index(parsed[1])
    return None if k is None else \
        Location(sw.host, k, 'switchport', switch=sw.number)


def placed_switch_flows(switches: Dict[str, ProviderSwitch],
                        hosts) -> Dict[str, Set[Flow]]:
    """{host: flows} of every switch whose host is known."""
    out: Dict[str, Set[Flow]] = {}
    for sw in switches.values():
        if sw.host is not None and sw.host in hosts:
            out.setdefault(sw.host, set()).update(switch_flows(sw))
    return out


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
