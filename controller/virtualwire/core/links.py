"""Extender links as the controller hands them out: pure rules.

The controller is the rendezvous (WAVNet, Tailscale): each extender's agent
reports what it knows of itself (its certificate fingerprint, the public
endpoint the outside sees for each link port, how its NAT maps ports) and
gets back the links it should keep, each naming the peer's pinned
fingerprint and public endpoint. Both sides then send to each other at
once, which opens both NATs (hole punching); two NATs that map every
destination to a new port (symmetric) cannot be punched, and the wires
between those sites go through a relay extender (`pipeline.paths`).
"""
import ipaddress
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from virtualwire.core import errors
from virtualwire.core.model import EXTENDER, ExtenderLink, Host

NAT_KINDS = ('public', 'endpoint-independent', 'symmetric', 'unknown')
# An extender's bridge external_ids vw-link-<peer> = up | down: written by
# its agent (extender.switch), read by the controller (host_ovsdb).
LINK_KEY = 'vw-link-'
# Extender links' UDP ports: OpenVPN's registered port, then upwards.
LINK_BASE_PORT = 1194
_FPR = re.compile(r'^([0-9A-F]{2}:){31}[0-9A-F]{2}$')
LINK_STATS = ('state', 'since', 'endpoint', 'rx_bytes', 'tx_bytes', 'rtt_ms',
              'restarts')


@dataclass(frozen=True)
class ExtenderReport:
    """What an extender's agent last said about itself."""
    name: str
    fingerprint: str
    nat: str = 'unknown'
    endpoints: Dict[int, str] = field(default_factory=dict)  # port -> ip:port
    links: Dict[str, Dict] = field(default_factory=dict)     # peer -> stats
    at: float = 0.0                   # controller clock when received
    fp_since: float = 0.0             # when this fingerprint was first seen


def _endpoint(text, what):
    host, _, port = str(text).rpartition(':')
    try:
        ipaddress.IPv4Address(host)
        ok = 0 < int(port) < 65536
    except ValueError:
        ok = False
    if not ok:
        raise errors.Malformed('%s: %r is not IPv4:port' % (what, text))
    return '%s:%d' % (host, int(port))


def parse_report(name: str, doc: dict, at: float) -> ExtenderReport:
    """An agent's report, checked; errors.Malformed says what is wrong."""
    unknown = sorted(set(doc) - {'fingerprint', 'nat', 'endpoints', 'links'})
    if unknown:
        raise errors.Malformed('unknown field(s): %s' % ', '.join(unknown))
    fpr = doc.get('fingerprint')
    if not isinstance(fpr, str) or not _FPR.match(fpr):
        raise errors.Malformed('fingerprint must be a SHA-256 fingerprint, '
                               '32 hex bytes AB:CD:...')
    nat = doc.get('nat', 'unknown')
    if nat not in NAT_KINDS:
        raise errors.Malformed('nat must be one of %s' % ', '.join(NAT_KINDS))
    eps = doc.get('endpoints', {})
    if not isinstance(eps, dict):
        raise errors.Malformed('endpoints must be {local port: "ip:port"}')
    endpoints = {}
    for k, v in eps.items():
        if not str(k).isdigit() or not 0 < int(k) < 65536:
            raise errors.Malformed('endpoints: %r is not a port' % k)
        endpoints[int(k)] = _endpoint(v, 'endpoints[%s]' % k)
    links = doc.get('links', {})
    if not isinstance(links, dict) or not all(
            isinstance(v, dict) for v in links.values()):
        raise errors.Malformed('links must be {peer: {stats}}')
    return ExtenderReport(name, fpr, nat, endpoints,
                          {str(p): {k: v[k] for k in LINK_STATS if k in v}
                           for p, v in links.items()}, at)


def link_ports(existing: List[ExtenderLink], a: str, b: str,
               base: int = LINK_BASE_PORT):
    """(a's port, b's port) for a new link a-b: each side the lowest UDP
    port from `base` up that none of its links uses (one NAT mapping per
    link)."""
    used: Dict[str, set] = {}
    for k in existing:
        used.setdefault(k.a, set()).add(k.a_port)
        used.setdefault(k.b, set()).add(k.b_port)
    out = []
    for n in (a, b):
        port = base
        while port in used.get(n, set()):
            port += 1
        out.append(port)
    return out[0], out[1]


def check_link(a: str, b: str, hosts: Dict[str, Host]):
    """Why extenders a and b cannot be linked (errors), or nothing."""
    if not isinstance(a, str) or not isinstance(b, str) or not a or not b:
        raise errors.Malformed('a and b must be extender host names')
    if a == b:
        raise errors.Invalid('an extender cannot be linked to itself')
    for n in (a, b):
        h = hosts.get(n)
        if h is None:
            raise errors.NotFound('no host named %s' % n)
        if h.role != EXTENDER:
            raise errors.Invalid('%s is not an extender (vw-host-setup '
                                 '--role extender)' % n)
    if hosts[a].site == hosts[b].site:
        raise errors.Invalid('%s and %s are both in site %s: hosts of one '
                             'site reach each other directly'
                             % (a, b, hosts[a].site))


def link_specs(me: str, links: List[ExtenderLink], hosts: Dict[str, Host],
               reports: Dict[str, ExtenderReport]) -> List[dict]:
    """The links extender `me` should keep now: those whose peer has
    reported its fingerprint and the public endpoint of its port for the
    link, and has a link address."""
    out = []
    for k in links:
        if me not in (k.a, k.b):
            continue
        peer = k.peer_of(me)
        rep, host = reports.get(peer), hosts.get(peer)
        enc = host.encap('xl') if host else None
        endpoint = rep.endpoints.get(k.port_of(peer)) if rep else None
        if rep is None or enc is None or not endpoint:
            continue
        ip, _, port = endpoint.rpartition(':')
        mine = reports.get(me)
        out.append({'peer': peer, 'peer_fingerprint': rep.fingerprint,
                    # The peer has asked since our current key was known,
                    # so it pins it now: a TLS client starts (after a key
                    # rotation: restarts) only then, or its handshake
                    # would fail and wait out OpenVPN's hand-window.
                    'pinned': bool(mine and rep.at >= mine.fp_since),
                    'remote': ip, 'remote_port': int(port),
                    'local_port': k.port_of(me),
                    'tls': 'server' if me < peer else 'client',
                    'peer_link_ip': enc.ip})
    return out


def punchable(a: Optional[ExtenderReport], b: Optional[ExtenderReport]):
    """False when both sides' NATs are symmetric: the direct link cannot
    come up, only a relay can carry their wires (lab notes 13)."""
    return not (a and b and a.nat == b.nat == 'symmetric')
