"""Every flow a provider switch needs, on every host it touches (pure): a
central switch's tables on its host, or, for a split switch (the paper's
3.5), each part's tables (`pipeline.switch.layout`) and the wires that
join the parts (`pipeline.switch.mesh_links`), computed as any wire is
(`pipeline.wire.wire_flows`: carriers, and the extenders on a path
between sites). A mesh wire's flows carry the switch's cookie, not a
wire's: they are the switch's, counted with it, never a user's wire.
"""
import dataclasses
from typing import Dict, Set

from virtualwire.core import ids
from virtualwire.core.model import Wire
from virtualwire.core.switches import ProviderSwitch
from virtualwire.pipeline.flow import Flow
from virtualwire.pipeline.switch import (layout, mesh_links, switch_flows,
                                         switch_location)
from virtualwire.pipeline.wire import wire_flows


def switch_host_flows(sw: ProviderSwitch, hosts) -> Dict[str, Set[Flow]]:
    """{host: flows} of switch `sw` on the hosts known now (`hosts`:
    name -> Host)."""
    if not sw.split:
        return {sw.host: set(switch_flows(sw))} \
            if sw.host is not None and sw.host in hosts else {}
    sites = {name: h.site for name, h in hosts.items()}
    out = {h: set(part.flows(sw)) for h, part in layout(sw, sites).items()
           if h in hosts}
    cookie = ids.switch_cookie(sw.number)
    one = {sw.name: sw}
    for cid, a, b in mesh_links(sw, sites):
        loc = {e: switch_location(e, one, hosts) for e in (a, b)}
        if None in loc.values():
            continue                 # a part's host is not there now
        for h, flows in wire_flows(Wire(cid, a, b), hosts, loc).items():
            out.setdefault(h, set()).update(
                dataclasses.replace(f, cookie=cookie) for f in flows)
    return out


def placed_switch_flows(switches: Dict[str, ProviderSwitch],
                        hosts) -> Dict[str, Set[Flow]]:
    """{host: flows} of every switch, where its hosts are known."""
    out: Dict[str, Set[Flow]] = {}
    for sw in switches.values():
        for h, flows in switch_host_flows(sw, hosts).items():
            out.setdefault(h, set()).update(flows)
    return out
