"""A fake OpenFlow switch fabric, for checking flow logic without OVS.

Each FakeSwitch holds a table of `flows.Flow` values, applies FlowDiffs as a
switch would, and forwards a packet the way OVS would for the subset of
fields and actions the controller uses. A FakeFabric joins switches by
tunnel IP so a frame can be followed from one vNIC to wherever it lands.
"""
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from virtualwire.flows import OFPP_CONTROLLER, Flow


@dataclass(frozen=True)
class Packet:
    in_port: int
    payload: bytes = b'frame'
    tunnel_id: Optional[int] = None
    tun_ipv4_src: Optional[str] = None
    tun_ipv4_dst: Optional[str] = None
    eth_type: int = 0x0800


class FakeSwitch:
    def __init__(self, name, tunnel_ip=None, tunnel_ofport=None):
        self.name = name
        self.tunnel_ip = tunnel_ip
        self.tunnel_ofport = tunnel_ofport
        self.table = {}            # key -> Flow
        self.counters = {}         # key -> packets
        self.packet_ins = []       # packets sent to the controller

    def apply(self, diff):
        for f in diff.delete:
            self.table.pop(f.key, None)
            self.counters.pop(f.key, None)
        for f in diff.add:
            self.table[f.key] = f
            self.counters[f.key] = 0
        for f in diff.modify:
            if f.key in self.table:
                # OpenFlow MODIFY keeps the cookie and the counters.
                self.table[f.key] = replace(f, cookie=self.table[f.key].cookie)

    def flows(self):
        return set(self.table.values())

    def lookup(self, pkt):
        best = None
        for f in self.table.values():
            if all(getattr(pkt, k) == v for k, v in f.match):
                if best is None or f.priority > best.priority:
                    best = f
        return best

    def process(self, pkt) -> List[Tuple[str, int, Packet]]:
        """Returns [('local', ofport, pkt) | ('tunnel', ofport, pkt)]."""
        f = self.lookup(pkt)
        if f is None:
            return []
        self.counters[f.key] += 1
        out, cur = [], pkt
        for act in f.actions:
            if act[0] == 'set_field':
                cur = replace(cur, **{act[1]: act[2]})
            elif act[0] == 'learn':
                # OVS learn: add (or replace) prio+match -> output:in_port.
                learned = Flow(0, act[1], act[3], (('output', pkt.in_port),),
                               act[2])
                self.table[learned.key] = learned
                self.counters[learned.key] = 0
            elif act[0] == 'output' and act[1] == OFPP_CONTROLLER:
                self.packet_ins.append(pkt)
            elif act[0] == 'output':
                if act[1] == pkt.in_port:
                    continue        # OpenFlow never outputs to the in_port
                kind = 'tunnel' if act[1] == self.tunnel_ofport else 'local'
                out.append((kind, act[1], cur))
        return out


class FakeFabric:
    def __init__(self):
        self.switches: Dict[str, FakeSwitch] = {}

    def add(self, sw):
        self.switches[sw.name] = sw
        return sw

    def send(self, host, ofport, payload=b'frame', forged=None,
             eth_type=0x0800):
        """Inject a frame on host's port; returns [(host, ofport)] where it
        was delivered to a vNIC. `forged` = Packet sent straight to `host`
        from the underlay (a tunnel packet from anywhere)."""
        delivered = []
        pending = [(host, forged or Packet(ofport, payload,
                                           eth_type=eth_type))]
        hops = 0
        while pending and hops < 16:
            hops += 1
            name, pkt = pending.pop()
            for kind, port, p in self.switches[name].process(pkt):
                if kind == 'local':
                    delivered.append((name, port))
                    continue
                dst = next((s for s in self.switches.values()
                            if s.tunnel_ip == p.tun_ipv4_dst), None)
                if dst is None:
                    continue
                src_ip = self.switches[name].tunnel_ip
                pending.append((dst.name, Packet(
                    dst.tunnel_ofport, p.payload, p.tunnel_id, src_ip,
                    eth_type=p.eth_type)))
        return delivered
