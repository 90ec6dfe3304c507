"""What a hypervisor can see of its guests without asking them: their
VirtualWire vNICs and taps (libvirt's domain XML), each tap's read count
(the kernel's), QEMU's migration stream (its sockets in /proc). Read by
vw-host-agent (host.agent)."""
import os
import socket
import struct
import xml.etree.ElementTree as ET

MIGRATION_PORTS = range(49152, 49216)   # libvirt's default migration ports


def vnics_of(xml_text):
    """The interfaceid of each openvswitch virtualport of a domain."""
    return sorted(taps_of(xml_text))


def taps_of(xml_text):
    """{interfaceid: tap device} of a domain's openvswitch virtualports
    (None for one not plugged yet)."""
    root = ET.fromstring(xml_text)
    out = {}
    for nic in root.findall('./devices/interface'):
        p = nic.find("./virtualport[@type='openvswitch']/parameters")
        if p is None or not p.get('interfaceid'):
            continue
        target = nic.find('./target')
        out[p.get('interfaceid')] = (target.get('dev') if target is not None
                                     else None)
    return out


def tap_stat(dev, name='tx_packets', sysfs='/sys/class/net'):
    """One of a tap's kernel counters (tx_packets: frames its QEMU read,
    counted as QEMU takes each), None if the tap is gone."""
    if not dev or '/' in dev:
        return None
    try:
        with open(os.path.join(sysfs, dev, 'statistics', name)) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def tap_reads(taps, sysfs='/sys/class/net'):
    """{interfaceid: the tap's transmit count} for each tap still there."""
    out = {}
    for vnic, dev in taps.items():
        n = tap_stat(dev, sysfs=sysfs)
        if n is not None:
            out[vnic] = n
    return out


def _hex_address(text):
    """'0100007F:1F90' (/proc/net/tcp) -> ('127.0.0.1', 8080); IPv6 too."""
    addr, port = text.split(':')
    raw = bytes.fromhex(addr)
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:
        ip = socket.inet_ntop(socket.AF_INET6, b''.join(
            struct.pack('<I', w) for w in struct.unpack('>4I', raw)))
    return ip, int(port, 16)


def stream_peer(pid, proc='/proc'):
    """The remote address of process `pid`'s migration stream: its one
    established outbound TCP connection to a libvirt migration port (or
    its only established connection), else None."""
    try:
        inodes = set()
        for fd in os.listdir('%s/%d/fd' % (proc, pid)):
            target = os.readlink('%s/%d/fd/%s' % (proc, pid, fd))
            if target.startswith('socket:['):
                inodes.add(target[8:-1])
    except OSError:
        return None
    peers = []
    for table in ('tcp', 'tcp6'):
        try:
            with open('%s/%d/net/%s' % (proc, pid, table)) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9 and cols[3] == '01' and cols[9] in inodes:
                ip, port = _hex_address(cols[2])
                if not ip.startswith('127.') and ip != '::1':
                    peers.append((ip, port))
    ours = {ip for ip, port in peers if port in MIGRATION_PORTS}
    if len(ours) == 1:
        return ours.pop()
    return peers[0][0] if len({ip for ip, _p in peers}) == 1 else None


def qemu_pid(name, run='/run/libvirt/qemu'):
    try:
        with open(os.path.join(run, name + '.pid')) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None
