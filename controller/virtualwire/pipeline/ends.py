"""Kinds of wire end. A kind knows which frames entering a host belong to
an end (its ingress match) and how to hand a frame to it (its delivery
actions). Today every end is a vNIC found by iface-id; a gateway's
physical port, or a VLAN on a trunk port, is a new class here plus its
discovery in `southbound.host_ovsdb` (see docs/architecture.rst)."""
from typing import Dict, List, Tuple

from virtualwire.core.model import Location


class EndKind:
    name = ''

    def ingress_match(self, loc: Location) -> Dict[str, object]:
        raise NotImplementedError

    def deliver(self, loc: Location) -> List[Tuple]:
        raise NotImplementedError


class VnicEnd(EndKind):
    """A VM's NIC: a port of its own, every frame is the wire's."""
    name = 'vnic'

    def ingress_match(self, loc):
        return {'in_port': loc.ofport}

    def deliver(self, loc):
        return [('output', loc.ofport)]


KINDS: Dict[str, EndKind] = {k.name: k for k in (VnicEnd(),)}


def kind_of(loc: Location) -> EndKind:
    return KINDS[loc.kind]
