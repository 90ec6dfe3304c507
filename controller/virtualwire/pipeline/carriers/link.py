"""The extender link carrier: GRE with key=flow between two sites'
extenders, over their encrypted link (a TLS-authenticated OpenVPN tap,
one L2 segment per link, joined on the extender's link bridge).

It is GRE on the wire, like the in-site carrier, so the full 32-bit
connector id crosses every hop; it is its own carrier because its
addresses live on the link network, not on a site's underlay, and a hop
over it is allowed only between extenders of different sites whose link
is up. Ingress matches the peer extender's link address: a wire's frames
are accepted only from the extender that should send them.
"""
from virtualwire.pipeline.carriers.gre import Gre

# Outer Ethernet of the tap frame (14) plus OpenVPN's UDP/IPv4 (28) and
# data channel (opcode/peer-id 4, packet id 4, AES-GCM tag 16).
LINK_OVERHEAD = 14 + 28 + 4 + 4 + 16


class ExtenderLink(Gre):
    type = 'xl'
    overhead = Gre.overhead + LINK_OVERHEAD
