"""Geneve (UDP 6081) with the full 32-bit connector id in a TLV option
(`southbound.geneve_tlv`: class 0xffff, type 0x80, critical), for fabrics
that hash on UDP ports (ECMP: OVS sets each frame's UDP source port from
a hash of its inner headers, so a host pair's wires spread over paths) or
that drop GRE (IP protocol 47). The VNI carries the id's low 24 bits (a
capture shows which wire; nothing matches on it).

Ingress matches the sender's tunnel address and the option, so only the
host holding the far end can inject into a wire, as with GRE. 58 bytes
per frame (outer Ethernet 14, IP 20, UDP 8, Geneve 8, option 4 + 4).
"""
from virtualwire.pipeline.carriers.base import Carrier

FIELD = 'tun_metadata0'      # as `southbound.geneve_tlv` maps the option


class Geneve(Carrier):
    type = 'geneve'
    overhead = 14 + 20 + 8 + 8 + 8

    def key(self, connector_id):
        return connector_id

    def send(self, here, peer, connector_id):
        return [('set_field', 'tunnel_id', connector_id & 0xFFFFFF),
                ('set_field', FIELD, self.key(connector_id)),
                ('set_field', 'tun_ipv4_dst', peer.ip),
                ('output', here.ofport)]

    def ingress(self, here, peer, connector_id):
        return {'in_port': here.ofport, FIELD: self.key(connector_id),
                'tun_ipv4_src': peer.ip}
