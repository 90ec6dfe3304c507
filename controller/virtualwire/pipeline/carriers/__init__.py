"""Carriers: how a wire's frame travels between two hosts.

A carrier knows its encapsulation type (the `Encap.type` a host offers),
the actions that send a frame to a peer, the match that accepts one from a
peer (and only from that peer), how a 32-bit connector id maps onto its
key, and its per-frame overhead (MTU accounting). Hosts list encaps;
`choose` picks the first carrier both ends offer, in preference order:
in-site carriers between hosts of one site, link carriers between
extenders of two sites (`pipeline.paths` decides which hosts a frame
crosses).
"""
from typing import Optional, Tuple

from virtualwire.core.model import EXTENDER, Encap, Host
from virtualwire.pipeline.carriers.base import Carrier
from virtualwire.pipeline.carriers.geneve import Geneve
from virtualwire.pipeline.carriers.gre import Gre
from virtualwire.pipeline.carriers.link import ExtenderLink

# Preference order: the first both hosts offer carries the hop (a site
# chooses its carrier by what its hosts offer: vw-host-setup --carrier;
# a host offering both, while a site changes over, is reached by Geneve
# from hosts that have it, by GRE from the others).
CARRIERS: Tuple[Carrier, ...] = (Geneve(), Gre())
LINK_CARRIERS: Tuple[Carrier, ...] = (ExtenderLink(),)
BY_TYPE = {c.type: c for c in CARRIERS + LINK_CARRIERS}
TYPES = tuple(BY_TYPE)


def choose(a: Optional[Host], b: Optional[Host]
           ) -> Optional[Tuple[Carrier, Encap, Encap]]:
    """(carrier, a's encap, b's encap) for a hop from a to b, or None if
    they share no usable carrier: within a site an in-site carrier; between
    sites only extenders, over a link both report up."""
    if a is None or b is None:
        return None
    if a.site == b.site:
        offered = CARRIERS
    elif a.role == b.role == EXTENDER and a.link_up(b.name) and \
            b.link_up(a.name):
        offered = LINK_CARRIERS
    else:
        return None
    for c in offered:
        ea, eb = a.encap(c.type), b.encap(c.type)
        if ea is not None and eb is not None and ea.usable and eb.usable:
            return c, ea, eb
    return None
