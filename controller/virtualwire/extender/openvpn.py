"""One extender link as an OpenVPN process: its command line, and what its
management interface says. Pure (no I/O).

Why OpenVPN: the kernel here has neither ESP nor WireGuard, and an L2
link is what the extender needs (the link carrier is GRE inside it, an
OVS port on br-xl); OpenVPN's tap is one, WireGuard's tun is not (lab
notes 13: GRE over an OpenVPN tap 249-277 Mbit/s, over wireguard-go via a
router 133-153, on this machine; bench/bench_extender.py measures ours).

Authentication: each extender has its own self-signed certificate; a link
accepts only the peer certificate whose SHA-256 fingerprint it was given
(`--peer-fingerprint`): no CA to run, and the fingerprint is the public
key the controller hands out. Data: AES-256-GCM (authenticated; replayed
or forged packets are dropped by OpenVPN's packet-id and tag checks).
"""
from dataclasses import dataclass
from typing import Dict, List, Optional

# Each side pings every second; 6 s without anything from the peer and the
# process restarts the session on its own (a dead NAT mapping, a peer that
# restarted).
PING, PING_RESTART = 1, 6
# The tap carries the link carrier's GRE frames: a full 1518-byte guest
# frame (with an 802.1Q tag) + 42 bytes of GRE = 1560 on the tap. OpenVPN
# cuts its UDP datagrams to FRAGMENT bytes itself, so nothing depends on
# the public path's MTU or on fragments crossing NATs.
TAP_MTU, FRAGMENT = 1600, 1300
HAND_WINDOW = 3
SOCKET_BUFFER = 4 << 20     # capped by net.core.rmem_max / wmem_max


@dataclass(frozen=True)
class LinkSpec:
    peer: str                   # the peer extender's host name
    peer_fingerprint: str       # SHA-256 of its certificate, AB:CD:...
    remote: str                 # its public address as the outside sees it
    remote_port: int
    local_port: int
    tls: str                    # 'server' or 'client' (one of each per link)
    peer_link_ip: str           # its address on the link network
    pinned: bool = True         # the peer pins our current certificate

    @property
    def dev(self) -> str:
        return tap_name(self.peer)


def tap_name(peer: str) -> str:
    return ('xl-' + peer)[:15]          # IFNAMSIZ


def argv(spec: LinkSpec, cert: str, key: str, mgmt: str, log: str,
         openvpn: str = 'openvpn') -> List[str]:
    return [
        openvpn, '--dev', spec.dev, '--dev-type', 'tap',
        '--tun-mtu', str(TAP_MTU), '--fragment', str(FRAGMENT),
        '--mssfix', '0',
        '--proto', 'udp4', '--lport', str(spec.local_port),
        # The default 208 KiB overflows (and drops wires' frames) whenever
        # the daemon misses the CPU for a few ms under a full link.
        '--rcvbuf', str(SOCKET_BUFFER), '--sndbuf', str(SOCKET_BUFFER),
        '--remote', spec.remote, str(spec.remote_port),
        # Both sides send to each other at once (hole punching); --float
        # lets a peer whose NAT gave it a new port carry on.
        '--float', '--tls-' + spec.tls,
        '--cert', cert, '--key', key,
        '--peer-fingerprint', spec.peer_fingerprint,
        '--dh', 'none', '--data-ciphers', 'AES-256-GCM',
        '--cipher', 'AES-256-GCM', '--auth', 'SHA256',
        '--tls-version-min', '1.3',
        '--ping', str(PING), '--ping-restart', str(PING_RESTART),
        '--persist-tun', '--persist-key',
        # A handshake that fails (the peer still pins an old key, during a
        # rotation) is retried after --hand-window: keep it short.
        '--connect-retry', '1', '1', '--hand-window', str(HAND_WINDOW),
        '--tls-timeout', '1',
        '--management', mgmt, 'unix',
        '--script-security', '1', '--verb', '3', '--log-append', log,
    ]


@dataclass(frozen=True)
class LinkState:
    state: str = 'DOWN'                 # OpenVPN's: CONNECTED, WAIT, ...
    since: float = 0.0                  # when it entered that state
    endpoint: str = ''                  # the peer as we see it, ip:port
    rx_bytes: int = 0                   # encrypted bytes over UDP
    tx_bytes: int = 0

    @property
    def up(self) -> bool:
        return self.state == 'CONNECTED'


def parse_state(text: str) -> Optional[Dict[str, object]]:
    """The last line of the management `state` reply:
    time,STATE,detail,tap ip,remote ip,remote port,local ip,local port..."""
    rows = [l for l in text.replace('\r', '').split('\n')
            if l and not l.startswith(('>', 'END')) and ',' in l]
    if not rows:
        return None
    f = rows[-1].split(',')
    out: Dict[str, object] = {'since': float(f[0]) if f[0].isdigit() else 0,
                              'state': f[1] if len(f) > 1 else ''}
    if len(f) > 5 and f[4]:
        out['endpoint'] = '%s:%s' % (f[4], f[5])
    return out


def parse_status(text: str) -> Dict[str, int]:
    """`status` reply of a p2p instance -> {'rx_bytes', 'tx_bytes'} of its
    UDP socket (what crossed the public network, encrypted)."""
    out = {}
    for line in text.replace('\r', '').split('\n'):
        k, _, v = line.partition(',')
        if k == 'TCP/UDP read bytes' and v.isdigit():
            out['rx_bytes'] = int(v)
        elif k == 'TCP/UDP write bytes' and v.isdigit():
            out['tx_bytes'] = int(v)
    return out
