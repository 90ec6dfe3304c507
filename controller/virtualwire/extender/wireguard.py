"""One extender link as a userspace WireGuard device with a kernel VXLAN
device over it: names, the daemon's and the `wg` commands that configure
it, and what `wg show dump` says. Pure (no I/O).

Why WireGuard, and why boringtun: measured on this machine in the
product's path (bench/bench_extender.py, docs/benchmarks.rst). The
kernel here has no WireGuard module; boringtun (Cloudflare's, Rust) and
wireguard-go speak the same protocol and the same control API. Behind
the link bridge boringtun carried a cross-cloud wire as fast as the
OpenVPN tap did and the bare link 1.38x faster; Debian's wireguard-go
(2022) carried half as much.

Why VXLAN over it: WireGuard is L3 (a tun), and OVS's userspace datapath
can neither put Ethernet into a tun nor route its own tunnels through
one (lab notes 13); a kernel VXLAN device over the tun is an Ethernet
port OVS can plug into br-xl, where the link carrier's GRE frames go as
before. One WireGuard device per link: each link has its own UDP port
(its own NAT mapping) and changes key on its own during a rotation.

Authentication and encryption are WireGuard's: a peer is its public key,
handed out by the controller; data is ChaCha20-Poly1305 with a replay
window, so forged or replayed datagrams are dropped (and counted nowhere:
the peer's receive counter grows only for authentic ones).
"""
import hashlib
import os
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
    via: str = ''               # the relay carrying its datagrams, if any

    @property
    def dev(self) -> str:
        """The VXLAN device, the link's port on br-xl: xl-PEER while that
        fits IFNAMSIZ (15), else xh- and a digest of the name (cutting it
        made two peers sharing their first 12 characters one device)."""
        if len(self.peer) <= 12:
            return 'xl-' + self.peer
        return 'xh-' + hashlib.sha256(self.peer.encode()).hexdigest()[:12]

    def wg_dev(self, me: str) -> str:
        return wg_name(me, self.peer)


def wg_name(me: str, peer: str) -> str:
    """The WireGuard device of extender `me`'s link to `peer`.
    The daemons' control socket is /var/run/wireguard/<name>.sock,
    shared by every namespace of a machine: the name is unique per
    (extender, peer)."""
    return 'wg' + hashlib.sha256(('%s/%s' % (me, peer)).encode()
                                 ).hexdigest()[:10]


def is_boringtun(binary: str) -> bool:
    return os.path.basename(binary).startswith('boringtun')


def daemon_argv(binary: str, dev: str) -> List[str]:
    """The userspace WireGuard daemon for device `dev`, in the foreground
    (the agent watches it and restarts it), on one OS thread: on 2 cores
    shared with userspace switches more threads cost more in handoffs than
    they win (bench_extender). boringtun-cli or wireguard-go (which takes
    its settings from the environment: daemon_env)."""
    if is_boringtun(binary):
        # One socket for all peers, as WireGuard's own: boringtun's
        # per-peer connected sockets kept a link down after the peer's
        # NAT gave it a new public port (test_clouds, the relay test).
        return [binary, '--foreground', '--disable-drop-privileges',
                '--threads', '1', '--disable-connected-udp', dev]
    return [binary, dev]


def daemon_env(environ) -> Dict[str, str]:
    return dict(environ, WG_PROCESS_FOREGROUND='1', LOG_LEVEL='error',
                GOMAXPROCS='1')


def peer_args(spec: LinkSpec) -> List[str]:
    """`wg set DEV ...` arguments that add the peer. To change it, the old
    entry is removed first, in a call of its own: boringtun can neither
    modify a peer in place nor add one after a removal in the same call
    (it then has no peer at all); a new session costs one handshake."""
    return ['peer', spec.peer_key, 'endpoint',
            '%s:%d' % (spec.remote, spec.remote_port),
            'allowed-ips', spec.peer_inner + '/32',
            'persistent-keepalive', str(KEEPALIVE)]


def remove_args(key: str) -> List[str]:
    return ['peer', key, 'remove']


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
          now: float, ages: bool = False) -> LinkState:
    """A link's state from one reading of its peer: up while a session is
    young enough to use and the peer was heard (its keepalives come every
    KEEPALIVE s) within DEAD_AFTER s. `ages`: the daemon reports the
    handshake's age in whole seconds (boringtun), not its Unix time as the
    UAPI says; 0 then also means "under a second ago" once data came."""
    if peer is None:
        return LinkState(since=prev.since if prev.state == 'down' else now)
    rx = int(peer['rx_bytes'])                          # type: ignore
    hs = float(peer['handshake'])                       # type: ignore
    if ages:
        hs = now - hs if hs or rx else 0.0
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
