"""Packet capture on a lab host: tcpdump on every interface of the host's
namespace, read back with scapy. Each captured UDP datagram says which
interface it crossed, in which direction and when, so a test can tell
where a lost datagram died: in the network, or in a guest that had it.

Tunnel frames (GRE with a key, VXLAN) are opened: the datagram reported is
the inner one with its tunnel key, so tunnelled copies of a stream show up
on the underlay too.
"""
import os
import re
import signal
import struct
import subprocess
from collections import namedtuple

from vwlab.overruns import Overruns

# SLL2 packet types (linux/if_packet.h): how the frame crossed the interface.
PACKET_OUTGOING = 4

Datagram = namedtuple('Datagram', 'time host iface outgoing src dst sport '
                      'dport payload key')


# A frame on an interface, whatever it carries (from the SLL2 header alone).
Frame = namedtuple('Frame', 'time host iface outgoing')


class CaptureError(Exception):
    pass


def interface_names(ns):
    """{ifindex: name} of the namespace's interfaces now."""
    out = subprocess.run(['ip', 'netns', 'exec', ns, 'ip', '-o', 'link'],
                         capture_output=True, text=True, check=True).stdout
    names = {}
    for line in out.splitlines():
        m = re.match(r'^(\d+): ([^:@\s]+)', line)
        if m:
            names[int(m.group(1))] = m.group(2)
    return names


class Capture:
    """with Capture(host.ns, host.name, path, 'udp') as cap: ...;
    cap.datagrams() afterwards. Interface names are read when the capture
    starts and when it stops, and whenever note_interfaces() is called:
    an interface that came and went in between shows as 'if<N>'."""

    def __init__(self, ns, host, path, bpf='udp', snaplen=256):
        self.ns, self.host, self.path = ns, host, path
        self.bpf, self.snaplen = bpf, snaplen
        self.names = {}
        self._proc = None

    def note_interfaces(self):
        self.names.update(interface_names(self.ns))

    def __enter__(self):
        self.note_interfaces()
        # -U: write each packet as it comes, so stopping loses nothing;
        # SLL2 keeps the interface index and direction of every packet.
        self._proc = subprocess.Popen(
            ['ip', 'netns', 'exec', self.ns, 'tcpdump', '-i', 'any', '-n',
             '-y', 'LINUX_SLL2', '-U', '-B', '32768', '-s', str(self.snaplen),
             '-w', self.path, self.bpf],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        said = []
        while not said or 'listening on' not in said[-1]:
            said.append(self._proc.stderr.readline())
            if not said[-1]:                    # exited before listening
                self._proc.wait()
                raise CaptureError('tcpdump in %s did not start: %s' % (
                    self.ns, ''.join(said).strip()))
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self._proc is None:
            return
        try:
            self.note_interfaces()
        finally:
            self._proc.send_signal(signal.SIGINT)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def datagrams(self, heads=None):
        """Every UDP datagram captured, tunnels opened, in capture order;
        only those whose payload starts with one of heads (bytes), if
        given."""
        if not os.path.exists(self.path):
            return []
        return read_pcap(self.path, self.host, self.names, heads)

    def frames_on(self, ifaces):
        """Every frame captured on the interfaces named `ifaces`."""
        names = {i: n for i, n in self.names.items() if n in ifaces}
        return [Frame(t, self.host, names[i], out)
                for t, _p, i, out in frames(self.path) if i in names]


# Where a payload starts in an SLL2 capture: after IPv4 (no options) + UDP,
# or after IPv4 + GRE with a key + Ethernet + IPv4 + UDP. Only for skipping
# fast what cannot match; what is kept is dissected properly.
_PAYLOAD_AT = (20 + 20 + 8, 20 + 20 + 8 + 14 + 20 + 8)


def read_pcap(path, host, names, heads=None):
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import GRE, CookedLinuxV2
    from scapy.layers.vxlan import VXLAN
    from scapy.utils import RawPcapReader
    out = []
    if heads is not None and not heads:
        return out                          # nothing to look for
    if heads is not None:
        size = {len(h) for h in heads}
        if len(size) != 1:
            raise ValueError('heads must all have the same length')
        size = size.pop()
        heads = set(heads)
    with RawPcapReader(path) as pcap:
        for raw, meta in pcap:
            if heads is not None and not any(
                    raw[at:at + size] in heads for at in _PAYLOAD_AT):
                continue
            pkt = CookedLinuxV2(raw)
            pkt.time = meta.sec + meta.usec / 1e6
            if CookedLinuxV2 not in pkt:
                continue
            sll, key, layer = pkt[CookedLinuxV2], None, pkt
            for tunnel in (GRE, VXLAN):
                if tunnel in pkt:
                    hdr = pkt[tunnel]
                    key = hdr.vni if tunnel is VXLAN else (
                        hdr.key if hdr.key_present else 0)
                    layer = hdr.payload
                    break
            if IP not in layer or UDP not in layer:
                continue
            ip, udp = layer[IP], layer[UDP]
            out.append(Datagram(
                float(pkt.time), host,
                names.get(sll.ifindex, 'if%d' % sll.ifindex),
                sll.pkttype == PACKET_OUTGOING, ip.src, ip.dst, udp.sport,
                udp.dport, bytes(udp.payload), key))
    return out


def guest_taps(host, domain, mac=None):
    """{(host name, tap)} of the NICs of a libvirt guest running on host
    (only the NIC with that MAC, if given)."""
    out = host.libvirt.virsh('domiflist', domain).stdout
    taps = set()
    for line in out.splitlines()[2:]:
        fields = line.split()
        if fields and fields[0] != '-' and (
                mac is None or fields[-1].lower() == mac.lower()):
            taps.add((host.name, fields[0]))
    return taps


class HostCaptures:
    """Captures on several lab hosts at once: the echo port's datagrams and
    every GRE frame (opened), written under directory; and the drops the
    kernel counted on the hosts' switches meanwhile (`overruns()`)."""
    BPF = 'udp port 7000 or ip proto 47'

    def __init__(self, hosts, directory, bpf=BPF):
        self.caps = [Capture(h.ns, h.name, os.path.join(
            str(directory), '%s.pcap' % h.name), bpf) for h in hosts]
        self._overruns = Overruns(hosts)

    def __enter__(self):
        try:
            self._overruns.note()
            for c in self.caps:
                c.__enter__()
        except Exception:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def note_interfaces(self):
        """Read interface names (and switch drop counts) now: call it while
        a migrated guest's old tap still exists."""
        for c in self.caps:
            c.note_interfaces()
        self._overruns.note()

    def stop(self):
        if any(c._proc is not None for c in self.caps):
            self._overruns.note()
        for c in self.caps:
            c.stop()

    def overruns(self):
        """{(host, iface): frames vswitchd's socket dropped} meanwhile."""
        return self._overruns.counted()

    def datagrams(self, heads=None):
        return [d for c in self.caps for d in c.datagrams(heads)]

    def frames_on(self, taps):
        """Every frame captured on taps {(host, iface)}: all of a stream,
        where `datagrams(heads)` reads back only some."""
        return [f for c in self.caps
                for f in c.frames_on({i for h, i in taps if h == c.host})]


# SLL2 header (tcpdump -i any -y LINUX_SLL2): protocol, reserved, ifindex,
# hatype, pkttype, address length, address.
SLL2 = struct.Struct('!HHIHBB8s')


def frames(path):
    """(time, ethertype, ifindex, outgoing) of every frame in an SLL2
    capture, read from the header alone (fast: no dissection)."""
    from scapy.utils import RawPcapReader
    if not os.path.exists(path):
        return
    with RawPcapReader(path) as pcap:
        for raw, meta in pcap:
            if len(raw) >= SLL2.size:
                proto, _r, ifindex, _h, pkttype, _l, _a = \
                    SLL2.unpack_from(raw)
                yield (meta.sec + meta.usec / 1e6, proto, ifindex,
                       pkttype == PACKET_OUTGOING)


def count_protocol(path, proto, ifindexes=None):
    """Frames of ethertype `proto` in an SLL2 capture (on `ifindexes`
    only, if given): e.g. how many RARPs crossed a host."""
    return sum(1 for _t, p, i, _o in frames(path)
               if p == proto and (ifindexes is None or i in ifindexes))


def ifindexes_of(capture, names):
    """Interface indexes (as the capture saw them) of interface names."""
    return {i for i, n in capture.names.items() if n in names}
