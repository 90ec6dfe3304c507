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


@dataclass
class World:
    """Everything the flow computation needs: intent plus where vNICs are."""
    wires: Dict[int, Wire] = field(default_factory=dict)
    hosts: Dict[str, Host] = field(default_factory=dict)
    # vNIC -> the host that held it first, for vNICs plugged on two hosts
    # at once (a live migration: the destination's tap appears while the
    # guest still runs on the source).
    incumbents: Dict[str, str] = field(default_factory=dict)

    def locations(self) -> Dict[str, Location]:
        """vNIC id -> where it is plugged. A vNIC plugged on two hosts stays
        with its incumbent until it leaves it (then the newcomer has it);
        without a known incumbent, the first host by name."""
        loc = {}
        for name in sorted(self.hosts):
            h = self.hosts[name]
            for v in h.vnics:
                if v.ofport and v.ofport > 0:
                    if v.vnic_id not in loc or \
                            self.incumbents.get(v.vnic_id) == name:
                        loc[v.vnic_id] = Location(name, v.ofport)
        return loc

    def wire_of_vnic(self) -> Dict[str, int]:
        m = {}
        for w in self.wires.values():
            m[w.end_a] = w.connector_id
            m[w.end_b] = w.connector_id
        return m


def host_to_json(h: Host) -> str:
    import json
    from dataclasses import asdict
    return json.dumps(asdict(h), sort_keys=True)


def host_from_json(text: str) -> Host:
    import json
    d = json.loads(text)
    d['vnics'] = tuple(VnicPort(**v) for v in d.get('vnics', ()))
    return Host(**d)
