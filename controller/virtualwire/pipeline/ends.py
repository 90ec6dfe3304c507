"""Kinds of wire end. A kind knows which frames entering a host belong to
an end (its ingress match), what to do to them before they go down the
wire (`strip`), and how to hand a frame to it (its delivery actions):
a vNIC (found by iface-id), a gateway's whole physical port (every frame,
tagged or not, is the wire's), one VLAN on a gateway's trunk port
(frames tagged with it enter untagged; the wire's frames leave tagged),
or a provider switch's port (frames enter and leave the switch's tables).
An end's frames are matched in `ingress_table`; `is_port` says the end is
an OpenFlow port (an output to it from itself must say IN_PORT)."""
from typing import Dict, List, Tuple

from virtualwire.core.model import Location
from virtualwire.pipeline import tables


class EndKind:
    name = ''
    ingress_table = tables.WIRE
    is_port = True

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


class SwitchPortEnd(EndKind):
    """A port of a provider switch (core.switches). A frame handed to it
    enters the switch: its number (reg4) and the port (reg5) loaded and
    in_port cleared, so that a flood may leave by the carrier port the
    frame came in on (OpenFlow drops an output to the in_port). A frame
    the switch sends out of the port is matched by the port (reg6)."""
    name = 'switchport'
    ingress_table = tables.SWITCH_OUT
    is_port = False

    def ingress_match(self, loc):
        return {'reg4': loc.switch, 'reg6': loc.ofport}

    def deliver(self, loc):
        return [('set_field', 'reg4', loc.switch),
                ('set_field', 'reg5', loc.ofport),
                # NXM's 16-bit in_port: OVS refuses 0 in OXM's 32-bit
                # one (OFPBAC_BAD_SET_ARGUMENT, measured on 3.1), as
                # OVN's loopback does it.
                ('set_field', 'in_port_nxm', 0),
                ('resubmit', tables.SWITCH_IN.id)]


KINDS: Dict[str, EndKind] = {k.name: k for k in (
    VnicEnd(), PortEnd(), VlanEnd(), SwitchPortEnd())}


def kind_of(loc: Location) -> EndKind:
    return KINDS[loc.kind]
