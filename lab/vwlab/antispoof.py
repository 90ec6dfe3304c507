"""Source-address checks on the lab's underlay, as data-center switches
do them (port security / uRPF): a host's port may only send IPv4 and ARP
from that host's own underlay address.

Why it matters: a wire's receiving host matches the sender's tunnel
address, which stops a compromised host from injecting into a wire under
its own address; spoofing a peer's address is stopped only here, by the
fabric. One nftables bridge table per underlay namespace.
"""
import re

from vwlab.shell import sh

TABLE = 'vwguard'


def guard(ns, port, ips):
    """Only `ips` (addresses or prefixes) may source IPv4 and ARP from
    bridge port `port`."""
    ip = '{ %s }' % ', '.join(ips) if isinstance(ips, list) else ips
    sh(['nft', 'add table bridge %s' % TABLE], ns=ns)
    sh(['nft', 'add chain bridge %s ports { type filter hook forward '
        'priority 0 ; policy accept ; }' % TABLE], ns=ns)
    sh(['nft', 'add rule bridge %s ports iifname "%s" ether type ip ip saddr '
        '!= %s counter drop comment "%s"' % (TABLE, port, ip, port)], ns=ns)
    sh(['nft', 'add rule bridge %s ports iifname "%s" ether type arp arp '
        'saddr ip != %s counter drop comment "%s"' % (TABLE, port, ip,
                                                      port)], ns=ns)


def dropped(ns):
    """{port: packets the checks dropped} in one underlay namespace."""
    out = sh(['nft', 'list chain bridge %s ports' % TABLE], ns=ns,
             check=False)
    counts = {}
    for m in re.finditer(r'counter packets (\d+) bytes \d+ drop comment '
                         r'"([^"]+)"', out):
        counts[m.group(2)] = counts.get(m.group(2), 0) + int(m.group(1))
    return counts
