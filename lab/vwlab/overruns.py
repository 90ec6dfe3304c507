"""Frames a starved userspace switch never read, counted by the kernel.

OVS's userspace datapath (netdev) reads each kernel interface through an
AF_PACKET socket. When ovs-vswitchd does not get the CPU for a while (two
TCG guests and a live migration on two cores), the socket's receive buffer
fills and the kernel drops what follows; tcpdump, reading the same
interface through its own socket, still sees those frames. The kernel
counts such drops per socket (`ss -m`: skmem d<N>), so a loss audit can
tell "the switch was starved and overran" (counted) from "the switch lost
it" (not counted).
"""
import re
import subprocess
from typing import Dict, Tuple

_SOCKET = re.compile(r'^p_raw\s.*?\*:(\S+)\s.*"ovs-vswitchd".*'
                     r'skmem:\([^)]*\bd(\d+)\)')


def parse_ss(text) -> Dict[str, int]:
    """{interface: drops} of ovs-vswitchd's packet sockets in `ss -0 -a -m
    -p` output (sockets of one interface are summed)."""
    out: Dict[str, int] = {}
    for line in text.splitlines():
        m = _SOCKET.match(line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out


def socket_drops(ns) -> Dict[str, int]:
    p = subprocess.run(['ip', 'netns', 'exec', ns, 'ss', '-0', '-a', '-m',
                        '-p'], capture_output=True, text=True, check=True)
    return parse_ss(p.stdout)


class Overruns:
    """with Overruns(hosts) as o: ... ; o.counted() -> {(host, iface):
    drops since entering}. note() samples again (call it before an
    interface goes away, e.g. after a migration left a host: its socket's
    count would be lost with it)."""

    def __init__(self, hosts):
        self.hosts = list(hosts)
        self.first: Dict[Tuple[str, str], int] = {}
        self.last: Dict[Tuple[str, str], int] = {}

    def note(self):
        for h in self.hosts:
            for iface, n in socket_drops(h.ns).items():
                key = (h.name, iface)
                self.first.setdefault(key, n)
                self.last[key] = n
        return self

    def __enter__(self):
        return self.note()

    def __exit__(self, *exc):
        self.note()

    def counted(self) -> Dict[Tuple[str, str], int]:
        return {k: n - self.first[k] for k, n in self.last.items()
                if n > self.first[k]}
