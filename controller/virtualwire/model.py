"""The controller's view of the world: intent (wires) and observed host state.

Plain immutable values, so flow computation can be a pure function of them.
"""
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple


@dataclass(frozen=True)
class Wire:
    connector_id: int
    end_a: str          # vNIC id (libvirt interfaceid / OVS iface-id)
    end_b: str
    created_at: str = ''

    def ends(self):
        return (self.end_a, self.end_b)

    def other_end(self, vnic_id):
        return self.end_b if vnic_id == self.end_a else self.end_a


@dataclass(frozen=True)
class VnicPort:
    """A vNIC as a host's OVSDB shows it (as libvirt plugs it)."""
    vnic_id: str
    port_name: str
    ofport: int
    mac: str = ''
    vm_id: str = ''
    status: str = ''


@dataclass(frozen=True)
class Host:
    """One hypervisor's integration bridge, as read from its OVSDB."""
    name: str
    dpid: int
    tunnel_ip: str
    site: str = 'default'
    tunnel_ofport: Optional[int] = None
    datapath_type: str = ''
    underlay_mtu: Optional[int] = None
    vnics: Tuple[VnicPort, ...] = ()

    def vnic_map(self) -> Dict[str, VnicPort]:
        return {v.vnic_id: v for v in self.vnics}


@dataclass(frozen=True)
class Location:
    host: str
    ofport: int


@dataclass(frozen=True)
class Move:
    """A vNIC on its way from one host to another (a live migration): its
    destination tap exists while the guest still runs on the source. Until
    `activated` (the guest's RARP seen on the destination) traffic for it
    is delivered on the source; afterwards on the destination."""
    source: str
    destination: str
    activated: bool = False


@dataclass
class World:
    """Everything the flow computation needs: intent plus where vNICs are."""
    wires: Dict[int, Wire] = field(default_factory=dict)
    hosts: Dict[str, Host] = field(default_factory=dict)
    # vNIC -> Move, for vNICs being live-migrated.
    moves: Dict[str, Move] = field(default_factory=dict)

    def claims(self) -> Dict[str, Dict[str, int]]:
        """vNIC id -> {host name: ofport} for every host it is plugged on."""
        out = {}
        for name in sorted(self.hosts):
            for v in self.hosts[name].vnics:
                if v.ofport and v.ofport > 0:
                    out.setdefault(v.vnic_id, {})[name] = v.ofport
        return out

    def locations(self) -> Dict[str, Location]:
        """vNIC id -> where traffic for it is delivered: a moving vNIC's
        source until the move is activated, then its destination; a vNIC
        on two hosts without a move, the first host by name."""
        return {v: place(c, self.moves.get(v))[0]
                for v, c in self.claims().items()}

    def shadows(self) -> Dict[str, Location]:
        """vNIC id -> its not yet activated destination, for moving vNICs
        plugged on both ends of their move."""
        out = {}
        for v, c in self.claims().items():
            shadow = place(c, self.moves.get(v))[1]
            if shadow is not None:
                out[v] = shadow
        return out

    def wire_of_vnic(self) -> Dict[str, int]:
        m = {}
        for w in self.wires.values():
            m[w.end_a] = w.connector_id
            m[w.end_b] = w.connector_id
        return m


def place(claims, move):
    """(delivery Location, shadow Location or None) of a vNIC plugged on
    `claims` ({host: ofport}, in arrival order) with an optional Move."""
    if not claims:
        return None, None
    if move is not None and move.source in claims and \
            move.destination in claims:
        src = Location(move.source, claims[move.source])
        dst = Location(move.destination, claims[move.destination])
        return (dst, None) if move.activated else (src, dst)
    if move is not None and move.destination in claims and move.activated:
        return Location(move.destination, claims[move.destination]), None
    if move is not None and move.source in claims:
        return Location(move.source, claims[move.source]), None
    name = next(iter(claims))
    return Location(name, claims[name]), None


def host_to_json(h: Host) -> str:
    import json
    from dataclasses import asdict
    return json.dumps(asdict(h), sort_keys=True)


def host_from_json(text: str) -> Host:
    import json
    d = json.loads(text)
    d['vnics'] = tuple(VnicPort(**v) for v in d.get('vnics', ()))
    return Host(**d)
