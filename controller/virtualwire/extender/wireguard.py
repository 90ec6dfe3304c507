"""One extender link as a wireguard-go device with a kernel VXLAN device
over it: names, the `wg` commands that configure it, and what `wg show
dump` says. Pure (no I/O).

Why WireGuard: measured against OpenVPN like for like on this machine
(bench/bench_extender.py, docs/benchmarks.rst), userspace wireguard-go
carrying VXLAN at the link's 1600-byte MTU gave 1.86x OpenVPN's tap. The
kernel here has no WireGuard module; wireguard-go is the same protocol.

Why VXLAN over it: WireGuard is L3 (a tun), and OVS's userspace datapath
can neither put Ethernet into a tun nor route its own tunnels through
one (lab notes 13); a kernel VXLAN device over the tun is an Ethernet
port OVS can plug into br-xl, where the link carrier's GRE frames go as
before. One wireguard-go device per link: each link has its own UDP port
(its own NAT mapping) and changes key on its own during a rotation.

Authentication and encryption are WireGuard's: a peer is its public key,
handed out by the controller; data is ChaCha20-Poly1305 with a replay
window, so forged or replayed datagrams are dropped (and counted nowhere:
the peer's receive counter grows only for authentic ones).
"""
import hashlib
from dataclasses import dataclass
from typing import Dict, List, Optional

KEEPALIVE = 1               # s: holds NAT mappings, proves the peer is there
DEAD_AFTER = 5.0            # s with nothing from the peer: the link is down
SESSION_LIFE = 180.0        # s: WireGuard's REJECT_AFTER_TIME
# The tun carries VXLAN datagrams; the VXLAN device carries the link
# carrier's GRE frames: a full 1518-byte guest frame (with an 802.1Q tag)
# + 42 bytes of GRE fits its 1600. The kernel fragments the VXLAN
# datagrams to WG_MTU before encryption (the VXLAN device does not set DF
# over IPv4), so nothing depends on the public path passing fragments.
WG_MTU, LINK_MTU = 1420, 1600
VXLAN_PORT = 4789


@dataclass(frozen=True)
class LinkSpec:
    peer: str                   # the peer extender's host name
    peer_key: str               # its WireGuard public key
    remote: str                 # its public address as the outside sees it
    remote_port: int
    local_port: int
    peer_link_ip: str           # its address on the link network (br-xl)
    inner: str                  # our address inside the tunnel
    peer_inner: str             # its address inside the tunnel
    vni: int                    # the VXLAN id of this link
    pinned: bool = True         # the peer uses our current key

    @property
    def dev(self) -> str:
        """The VXLAN device, the link's port on br-xl."""
        return ('xl-' + self.peer)[:15]         # IFNAMSIZ

    def wg_dev(self, me: str) -> str:
        return wg_name(me, self.peer)


def wg_name(me: str, peer: str) -> str:
    """The WireGuard device of extender `me`'s link to `peer`.
    wireguard-go's control socket is /var/run/wireguard/<name>.sock,
    shared by every namespace of a machine: the name is unique per
    (extender, peer)."""
    return 'wg' + hashlib.sha256(('%s/%s' % (me, peer)).encode()
                                 ).hexdigest()[:10]


def peer_args(spec: LinkSpec, old_key: Optional[str] = None) -> List[str]:
    """`wg set DEV ...` arguments that (re)configure the peer; an old key
    of it is removed in the same call."""
    out = ['peer', spec.peer_key, 'endpoint',
           '%s:%d' % (spec.remote, spec.remote_port),
           'allowed-ips', spec.peer_inner + '/32',
           'persistent-keepalive', str(KEEPALIVE)]
    if old_key and old_key != spec.peer_key:
        out += ['peer', old_key, 'remove']
    return out


def device_args(spec: LinkSpec, key_file: str) -> List[str]:
    return ['listen-port', str(spec.local_port), 'private-key', key_file] + \
        peer_args(spec)


@dataclass(frozen=True)
class LinkState:
    state: str = 'down'                 # up, connecting, down
    since: float = 0.0                  # when it entered that state
    endpoint: str = ''                  # the peer as we see it, ip:port
    rx_bytes: int = 0                   # authentic bytes received
    tx_bytes: int = 0
    heard: float = 0.0                  # when rx_bytes last grew
    handshake: float = 0.0              # latest handshake (epoch s)
    peer_key: str = ''                  # the peer key the device uses

    @property
    def up(self) -> bool:
        return self.state == 'up'


def parse_dump(text: str) -> Dict[str, Dict[str, object]]:
    """`wg show DEV dump` -> {peer public key: {endpoint, handshake,
    rx_bytes, tx_bytes}} (the first line is the device itself)."""
    out: Dict[str, Dict[str, object]] = {}
    for line in text.strip().split('\n')[1:]:
        f = line.split('\t')
        if len(f) < 7:
            continue
        out[f[0]] = {'endpoint': '' if f[2] == '(none)' else f[2],
                     'handshake': float(f[4]), 'rx_bytes': int(f[5]),
                     'tx_bytes': int(f[6])}
    return out


def judge(prev: LinkState, peer: Optional[Dict[str, object]], key: str,
          now: float) -> LinkState:
    """A link's state from one reading of its peer: up while a session is
    young enough to use and the peer was heard (its keepalives come every
    KEEPALIVE s) within DEAD_AFTER s."""
    if peer is None:
        return LinkState(since=prev.since if prev.state == 'down' else now)
    rx = int(peer['rx_bytes'])                          # type: ignore
    hs = float(peer['handshake'])                       # type: ignore
    heard = now if rx != prev.rx_bytes or not prev.heard else prev.heard
    if hs and now - hs < SESSION_LIFE and now - heard < DEAD_AFTER:
        state = 'up'
    else:
        state = 'connecting' if not hs else 'down'
    return LinkState(state=state,
                     since=prev.since if state == prev.state else now,
                     endpoint=str(peer['endpoint']), rx_bytes=rx,
                     tx_bytes=int(peer['tx_bytes']),    # type: ignore
                     heard=heard, handshake=hs, peer_key=key)
