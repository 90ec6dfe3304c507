"""The controller's view of the world: intent (wires) and observed host
state, as plain immutable values, so flow computation is a pure function of
them. Placement (where a vNIC's traffic goes) is `core.placement`."""
import functools
import ipaddress
import json
from dataclasses import asdict, dataclass
from typing import Dict, Optional, Tuple


@dataclass(frozen=True, slots=True)     # slotted: one per wire, 100,000s
class Wire:
    connector_id: int
    end_a: str          # vNIC id (libvirt interfaceid / OVS iface-id)
    end_b: str
    created_at: str = ''

    def ends(self) -> Tuple[str, str]:
        return (self.end_a, self.end_b)

    def other_end(self, vnic_id: str) -> str:
        return self.end_b if vnic_id == self.end_a else self.end_a


@dataclass(frozen=True, order=True)
class ExtenderLink:
    """Intent: extenders a and b (host names, a < b) keep an encrypted link;
    each binds its own UDP port for it (one NAT mapping per link)."""
    a: str
    b: str
    a_port: int
    b_port: int
    created_at: str = ''

    def peer_of(self, name: str) -> str:
        return self.b if name == self.a else self.a

    def port_of(self, name: str) -> int:
        return self.a_port if name == self.a else self.b_port


@dataclass(frozen=True, slots=True)     # slotted: one per vNIC, 100,000s
class VnicPort:
    """A vNIC as a host's OVSDB shows it (as libvirt plugs it)."""
    vnic_id: str
    port_name: str
    ofport: int
    mac: str = ''
    vm_id: str = ''
    status: str = ''


@dataclass(frozen=True)
class Encap:
    """One way a host can be reached (OVN's Encap): a carrier type, the
    host's address for it, and the bridge port that sends/receives it."""
    type: str                     # 'gre' today; a carrier in pipeline.carriers
    ip: str
    ofport: Optional[int] = None  # None until OVS assigned one
    options: Tuple[Tuple[str, str], ...] = ()

    @property
    def usable(self) -> bool:
        return bool(self.ip) and bool(self.ofport) and (self.ofport or 0) > 0


@dataclass(frozen=True)
class Link:
    """An extender's encrypted link to another site's extender, as the
    extender's OVSDB reports it (`peer` is that extender's host name)."""
    peer: str
    up: bool = False


HYPERVISOR = 'hypervisor'
EXTENDER = 'extender'       # carries wires between sites (paper 3.2)
GATEWAY = 'gateway'         # joins wires to physical networks (paper 3.3)


@dataclass(frozen=True)
class GatewayPort:
    """A gateway's physical port on its integration bridge (a wire end as
    a whole, or a trunk whose VLANs are ends)."""
    name: str
    ofport: int


@dataclass(frozen=True)
class Host:
    """One hypervisor's (or extender's) integration bridge, as read from
    its OVSDB."""
    name: str
    dpid: int
    encaps: Tuple[Encap, ...] = ()
    site: str = 'default'
    datapath_type: str = ''
    underlay_mtu: Optional[int] = None
    vnics: Tuple[VnicPort, ...] = ()
    role: str = HYPERVISOR
    links: Tuple[Link, ...] = ()
    ports: Tuple[GatewayPort, ...] = ()
    # An extender's WireGuard public key as its agent wrote it in its own
    # OVSDB (`core.extender_keys`: a report's key must match it).
    public_key: str = ''
    # The ofport of `vw-hold`, where vw-frame-hold keeps frames towards
    # guests migrating in (host.hold_ring); None: this host has none.
    hold_port: Optional[int] = None

    def gateway_port(self, name: str) -> Optional[GatewayPort]:
        return next((p for p in self.ports if p.name == name), None)

    def link_up(self, peer: str) -> bool:
        return any(k.peer == peer and k.up for k in self.links)

    @functools.cached_property
    def _vnic_index(self) -> Dict[str, VnicPort]:
        # Built once per Host (it is immutable): views look up every vNIC.
        return {v.vnic_id: v for v in self.vnics}

    def vnic_map(self) -> Dict[str, VnicPort]:
        return self._vnic_index

    @functools.cached_property
    def _encap_index(self) -> Dict[str, Encap]:
        # Built once per Host: every hop of every wire asks (35 times a
        # wire computed, 16% of computing one).
        out: Dict[str, Encap] = {}
        for e in self.encaps:
            out.setdefault(e.type, e)
        return out

    def encap(self, type_: str) -> Optional[Encap]:
        return self._encap_index.get(type_)

    @property
    def tunnel_ip(self) -> str:
        """The first encapsulation's address (what `vwctl hosts` shows)."""
        return self.encaps[0].ip if self.encaps else ''


@dataclass(frozen=True)
class Location:
    """Where a wire end is attached: a host's port, of a kind of end
    (`pipeline.ends`: 'vnic', a gateway's whole 'port', a 'vlan' on a
    gateway's trunk port, or a provider switch's 'switchport': then
    `ofport` is the port's index in switch number `switch`)."""
    host: str
    ofport: int
    kind: str = 'vnic'
    vlan: Optional[int] = None
    switch: int = 0


@dataclass(frozen=True)
class Move:
    """A vNIC on its way from one host to another (a live migration): its
    destination tap exists while the guest still runs on the source. Until
    `activated` (the guest's first frame seen on the destination) traffic
    for it is delivered on the source; afterwards on the destination."""
    source: str
    destination: str
    activated: bool = False


def carrier_address_problem(ip: str) -> Optional[str]:
    """Why a carrier's reported address cannot be a tunnel's outer
    address (None: it can). Carriers here are IPv4 (`tun_dst`); a host
    that reports anything else has no usable carrier of that kind."""
    try:
        a = ipaddress.ip_address(ip)
    except ValueError:
        return '%r is not an IP address' % ip
    if a.version != 4:
        return '%s is not IPv4' % ip
    if a.is_unspecified or a.is_multicast or a.is_reserved:
        return '%s is not a unicast address' % ip
    return None


def host_to_json(h: Host) -> str:
    return json.dumps(asdict(h), sort_keys=True)


def host_from_json(text: str) -> Host:
    d = json.loads(text)
    d['vnics'] = tuple(VnicPort(**v) for v in d.get('vnics', ()))
    d['links'] = tuple(Link(**k) for k in d.get('links', ()))
    d['ports'] = tuple(GatewayPort(**p) for p in d.get('ports', ()))
    if 'tunnel_ip' in d:            # snapshots written before Encap
        ip, port = d.pop('tunnel_ip'), d.pop('tunnel_ofport', None)
        d['encaps'] = [{'type': 'gre', 'ip': ip, 'ofport': port}] if ip \
            else []
    d['encaps'] = tuple(Encap(e['type'], e['ip'], e.get('ofport'),
                              tuple(tuple(o) for o in e.get('options', ())))
                        for e in d.get('encaps', ()))
    return Host(**d)
