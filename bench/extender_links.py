"""The link daemons bench_extender.py sets side by side on the same
extenders: OpenVPN's tap edge to edge (the extender link before
WireGuard, as the agent ran it) and WireGuard's tun edge to edge (the
link daemon alone, no br-xl, no VXLAN). Each case counts the bytes each
carrier took in its window, so a result shows which one carried it.

Tried and not kept: the cross-cloud wire with the link's VXLAN routed
into the OpenVPN tap (a policy rule per extender), the whole path with
only the daemon changed. VXLAN datagrams over the tap's 1,500 bytes
were lost until the kernel had a path MTU for them, and all of them at
1,600 or 1,700 (pings of 1,300-1,472 bytes across the wire, 2026-12-03):
iperf3 stalled. Not found why."""
import os
import re
import subprocess
import time

from vwlab.shell import sh
from virtualwire.extender.wireguard import LINK_MTU, wg_name


def wait(fn, timeout=60, what='condition', every=0.02):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(every)
    raise RuntimeError('timed out waiting for %s' % what)


class Bare:
    """A namespace-level endpoint for iperf on an extender."""

    def __init__(self, x):
        self.ns, self.name = x.ns, x.name


OPENVPN_PORT = 1194
OVPN_IPS = ('10.96.0.1', '10.96.0.2')


def openvpn(lab):
    """The extender link before WireGuard, like for like: an OpenVPN tap
    between xa and xb through both NATs (each given the other's NAT
    address, same port: port-preserving NATs), TLS 1.3 with each side
    pinning the other's self-signed certificate, AES-256-GCM, the tap at
    the link's 1600 bytes cut to 1300-byte datagrams by --fragment, as the
    agent ran it. Returns [(case, client, server, dst)]."""
    xs = [lab.host('xa'), lab.host('xb')]
    fpr = {}
    for x in xs:
        crt, key = os.path.join(x.dir, 'ovpn.crt'), os.path.join(x.dir,
                                                                 'ovpn.key')
        sh(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt',
            'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj',
            '/CN=' + x.name, '-keyout', key, '-out', crt])
        fpr[x.name] = sh(['openssl', 'x509', '-in', crt, '-noout',
                          '-fingerprint', '-sha256']).strip().split('=')[1]
    for i, x in enumerate(xs):
        peer = xs[1 - i]
        sh(['openvpn', '--daemon', '--dev', 'ovpn0', '--dev-type', 'tap',
            '--tun-mtu', str(LINK_MTU), '--fragment', '1300', '--mssfix', '0',
            '--proto', 'udp4', '--lport', str(OPENVPN_PORT),
            '--rcvbuf', str(4 << 20), '--sndbuf', str(4 << 20),
            '--remote', lab.clouds.public_ip(peer.site), str(OPENVPN_PORT),
            '--float', '--tls-' + ('server' if i == 0 else 'client'),
            '--cert', os.path.join(x.dir, 'ovpn.crt'),
            '--key', os.path.join(x.dir, 'ovpn.key'),
            '--peer-fingerprint', fpr[peer.name], '--dh', 'none',
            '--data-ciphers', 'AES-256-GCM', '--tls-version-min', '1.3',
            '--ping', '1', '--writepid', os.path.join(x.dir, 'ovpn.pid'),
            '--log', os.path.join(x.dir, 'ovpn.log'),
            '--ifconfig-noexec', '--verb', '3'], ns=x.ns)
        wait(lambda: 'ovpn0' in sh(['ip', 'link'], ns=x.ns), 10, 'ovpn0')
        sh(['ip', 'addr', 'add', OVPN_IPS[i] + '/24', 'dev', 'ovpn0'],
           ns=x.ns)
        sh(['ip', 'link', 'set', 'ovpn0', 'up'], ns=x.ns)
    wait(lambda: subprocess.run(['ip', 'netns', 'exec', xs[0].ns, 'ping',
                                 '-c', '1', '-W', '0.5', OVPN_IPS[1]],
                                capture_output=True).returncode == 0, 60,
         'OpenVPN handshake')
    return [('OpenVPN tap 1600', Bare(xs[0]), Bare(xs[1]), OVPN_IPS[1])]


def tun_addresses(x, peer):
    """(the link's WireGuard device on extender x, x's address in the
    tunnel, the peer's), as the agent set them."""
    dev = wg_name(x.name, peer.name)
    out = sh(['ip', '-o', '-4', 'addr', 'show', 'dev', dev], ns=x.ns)
    m = re.search(r'inet ([\d.]+) peer ([\d.]+)', out)
    if not m:
        raise RuntimeError('%s: no tunnel address on %s: %r'
                           % (x.name, dev, out))
    return dev, m.group(1), m.group(2)


def wireguard_tun(xa, xb):
    """The link daemon alone: iperf between the two tunnel addresses."""
    return ('WireGuard tun', Bare(xa), Bare(xb), tun_addresses(xb, xa)[1])


def carriers(xa, xb):
    """{carrier: its device on xa}: what each case's bytes are read on."""
    return {'wireguard': tun_addresses(xa, xb)[0], 'openvpn': 'ovpn0'}


def sent_bytes(x, devs):
    """{carrier: bytes its device on x has sent}."""
    out = sh(['sh', '-c', ' '.join(
        'cat /sys/class/net/%s/statistics/tx_bytes;' % d
        for d in devs.values())], ns=x.ns).split()
    return {k: int(v) for k, v in zip(devs, out)}


def check_carrier(name, want, took, mbit, seconds):
    """Raise unless carrier `want` sent at least 90% of what iperf
    measured in the window (`took`: bytes per carrier)."""
    need = 0.9 * mbit * 1e6 / 8 * seconds
    if took.get(want, 0) < need:
        raise RuntimeError('%s: %s carried %d bytes, under the %d iperf '
                           'measured: the case did not take its path (%s)'
                           % (name, want, took.get(want, 0), need, took))
