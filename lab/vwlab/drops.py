"""Dropping a wire's frames on purpose, on the underlay (as a faulty
fabric would), and knowing exactly how many: an nftables bridge rule with
a counter in the underlay namespace, for tests that check what the
controller says was lost."""
import re

from vwlab.shell import sh

TABLE = 'vwdrop'


class UnderlayDrop:
    """While active, GRE packets entering the underlay bridge from bridge
    port `port` (a host's uplink) are dropped and counted."""

    def __init__(self, ns, port):
        self.ns, self.port = ns, port
        self.dropped = None

    def __enter__(self):
        sh(['nft', 'add table bridge %s' % TABLE], ns=self.ns)
        sh(['nft', 'add chain bridge %s drops { type filter hook forward '
            'priority -10 ; policy accept ; }' % TABLE], ns=self.ns)
        sh(['nft', 'add rule bridge %s drops iifname "%s" ether type ip '
            'ip protocol gre counter drop' % (TABLE, self.port)], ns=self.ns)
        return self

    def count(self):
        out = sh(['nft', 'list chain bridge %s drops' % TABLE], ns=self.ns)
        m = re.search(r'counter packets (\d+)', out)
        return int(m.group(1)) if m else 0

    def __exit__(self, *exc):
        self.dropped = self.count()
        sh(['nft', 'delete table bridge %s' % TABLE], ns=self.ns)
