"""GRE with key=flow: the 32-bit GRE key is the whole connector id.

Ingress matches the sender's tunnel address, so only the host holding the
far end can inject into a wire. 42 bytes per frame (outer Ethernet 14, IP
20, GRE with key 8). VXLAN cannot carry 32 bits (its VNI has 24, and OVS
truncates silently); Geneve can, in a TLV option (`geneve`)."""
from virtualwire.pipeline.carriers.base import Carrier


class Gre(Carrier):
    type = 'gre'
    overhead = 14 + 20 + 8

    def key(self, connector_id):
        return connector_id

    def send(self, here, peer, connector_id):
        return [('set_field', 'tunnel_id', self.key(connector_id)),
                ('set_field', 'tun_ipv4_dst', peer.ip),
                ('output', here.ofport)]

    def ingress(self, here, peer, connector_id):
        return {'in_port': here.ofport, 'tunnel_id': self.key(connector_id),
                'tun_ipv4_src': peer.ip}
