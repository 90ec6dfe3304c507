"""Everything the flow computation needs, as one value: the input of the
from-scratch reference (`pipeline.wire.compute_flows`) and of checks."""
from dataclasses import dataclass, field
from typing import Dict

from virtualwire.core.model import Host, Location, Move, Wire
from virtualwire.core.switches import ProviderSwitch
from virtualwire.core.placement import place


@dataclass
class World:
    """Everything the flow computation needs, as one value (for the
    reference computation and views): intent plus where vNICs are."""
    wires: Dict[int, Wire] = field(default_factory=dict)
    hosts: Dict[str, Host] = field(default_factory=dict)
    moves: Dict[str, Move] = field(default_factory=dict)
    switches: Dict[str, ProviderSwitch] = field(default_factory=dict)

    def claims(self) -> Dict[str, Dict[str, int]]:
        """vNIC id -> {host name: ofport} for every host it is plugged on."""
        out: Dict[str, Dict[str, int]] = {}
        for name in sorted(self.hosts):
            for v in self.hosts[name].vnics:
                if v.ofport and v.ofport > 0:
                    out.setdefault(v.vnic_id, {})[name] = v.ofport
        return out

    def _placed(self):
        for v, c in self.claims().items():
            yield v, place(c, self.moves.get(v))

    def locations(self) -> Dict[str, Location]:
        """vNIC -> where its traffic is delivered."""
        return {v: here for v, (here, _) in self._placed() if here is not None}

    def shadows(self) -> Dict[str, Location]:
        """vNIC -> its destination while a move is not yet activated."""
        return {v: sh for v, (_, sh) in self._placed() if sh is not None}

    def wire_of_vnic(self) -> Dict[str, int]:
        m = {}
        for w in self.wires.values():
            m[w.end_a] = w.connector_id
            m[w.end_b] = w.connector_id
        return m
