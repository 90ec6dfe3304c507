"""The extender link carrier: GRE with key=flow between two sites'
extenders, over their encrypted link (a VXLAN device over a WireGuard
tunnel, one L2 segment per link, joined on the extender's link bridge).

It is GRE on the wire, like the in-site carrier, so the full 32-bit
connector id crosses every hop; it is its own carrier because its
addresses live on the link network, not on a site's underlay, and a hop
over it is allowed only between extenders of different sites whose link
is up. Ingress matches the peer extender's link address: a wire's frames
are accepted only from the extender that should send them.
"""
from virtualwire.pipeline.carriers.gre import Gre

# What a frame on br-xl needs beyond its GRE header: nothing. The link's
# own headers (VXLAN 50; WireGuard 32 + UDP/IPv4 28) ride below the VXLAN
# device's 1600-byte MTU, whose datagrams the kernel fragments to the
# tunnel's MTU before encryption (extender.wireguard).
LINK_OVERHEAD = 0


class ExtenderLink(Gre):
    type = 'xl'
    overhead = Gre.overhead + LINK_OVERHEAD
