"""Dropping a wire's frames on purpose, on the underlay (as a faulty
fabric would), and knowing exactly how many: an nftables bridge rule with
a counter in the underlay namespace, for tests that check what the
controller says was lost.

The rule counts into a named counter that outlives it: the rule goes
first, then the counter is read, so no frame is dropped after the count
(reading first and deleting after missed 16 frames, ~32 ms at 500/s, in
a loaded CI run).
"""
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
        sh(['nft', 'add counter bridge %s dropped' % TABLE], ns=self.ns)
        sh(['nft', 'add chain bridge %s drops { type filter hook forward '
            'priority -10 ; policy accept ; }' % TABLE], ns=self.ns)
        sh(['nft', 'add rule bridge %s drops iifname "%s" ether type ip '
            'ip protocol gre counter name dropped drop' % (TABLE, self.port)],
           ns=self.ns)
        return self

    def count(self):
        out = sh(['nft', 'list counter bridge %s dropped' % TABLE],
                 ns=self.ns)
        m = re.search(r'packets (\d+)', out)
        if m is None:
            raise RuntimeError('no packet count in: %s' % out)
        return int(m.group(1))

    def __exit__(self, *exc):
        sh(['nft', 'flush chain bridge %s drops' % TABLE], ns=self.ns)
        self.dropped = self.count()
        sh(['nft', 'delete table bridge %s' % TABLE], ns=self.ns)
