"""Kinds of wire end. A kind knows which frames entering a host belong to
an end (its ingress match), what to do to them before they go down the
wire (`strip`), and how to hand a frame to it (its delivery actions):
a vNIC (found by iface-id), a gateway's whole physical port (every frame,
tagged or not, is the wire's), or one VLAN on a gateway's trunk port
(frames tagged with it enter untagged; the wire's frames leave tagged)."""
from typing import Dict, List, Tuple

from virtualwire.core.model import Location


class EndKind:
    name = ''

    def ingress_match(self, loc: Location) -> Dict[str, object]:
        raise NotImplementedError

    def deliver(self, loc: Location) -> List[Tuple]:
        raise NotImplementedError

    def strip(self, loc: Location) -> List[Tuple]:
        """Actions on a frame that entered at this end, before any send."""
        return []


class VnicEnd(EndKind):
    """A VM's NIC: a port of its own, every frame is the wire's."""
    name = 'vnic'

    def ingress_match(self, loc):
        return {'in_port': loc.ofport}

    def deliver(self, loc):
        return [('output', loc.ofport)]


class PortEnd(VnicEnd):
    """A gateway's physical port as a whole: like a vNIC, every frame."""
    name = 'port'


OFPVID_PRESENT = 0x1000
ETH_TYPE_8021Q = 0x8100


class VlanEnd(EndKind):
    """One VLAN of a gateway's trunk port."""
    name = 'vlan'

    def ingress_match(self, loc):
        return {'in_port': loc.ofport,
                'vlan_vid': OFPVID_PRESENT | (loc.vlan or 0)}

    def strip(self, loc):
        return [('pop_vlan',)]

    def deliver(self, loc):
        return [('push_vlan', ETH_TYPE_8021Q),
                ('set_field', 'vlan_vid', OFPVID_PRESENT | (loc.vlan or 0)),
                ('output', loc.ofport)]


KINDS: Dict[str, EndKind] = {k.name: k for k in (VnicEnd(), PortEnd(),
                                                  VlanEnd())}


def kind_of(loc: Location) -> EndKind:
    return KINDS[loc.kind]
