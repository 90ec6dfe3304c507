"""What the provider-switch unit tests share: four vNICs of tenant `shop`
on three hosts of the fake fabric (a, b on h1; c on h2; d on h3), their
MACs, and a frame sent from one of them."""
from virtualwire.testing.fakeswitch import Packet
from virtualwire.testing.harness import Harness

BROADCAST = 'ff:ff:ff:ff:ff:ff'
# vNIC: (host, ofport)
VNICS = {'a': ('h1', 1), 'b': ('h1', 2), 'c': ('h2', 3), 'd': ('h3', 4)}


def mac(v):
    return '02:00:00:00:00:%02x' % (ord(v) - ord('a') + 1)


def hosts(h=None):
    """A Harness (or `h`) with the three hosts and shop's four vNICs."""
    h = h or Harness()
    for name in ('h1', 'h2', 'h3'):
        h.host(name, *[(v, p) for v, (n, p) in VNICS.items() if n == name])
    for v in VNICS:
        h.intent.ownership.assign(v, 'shop')
    return h


def send(h, v, dst, src=None):
    """Where a frame from vNIC v to `dst` is delivered: [(host, port)]."""
    host, port = VNICS[v]
    return sorted((n, p) for n, p, _ in h.fabric.send(
        host, port, forged=Packet(port, eth_src=src or mac(v),
                                  eth_dst=dst)))
