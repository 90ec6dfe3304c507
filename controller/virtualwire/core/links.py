"""Extender links as the controller hands them out: pure rules.

The controller is the rendezvous (WAVNet, Tailscale): each extender's agent
reports what it knows of itself (its WireGuard public key, the public
endpoint the outside sees for each link port, how its NAT maps ports) and
gets back the links it should keep, each naming the peer's public key and
public endpoint, and the link's addresses inside the tunnel. Both sides then send to each other at
once, which opens both NATs (hole punching); two NATs that map every
destination to a new port (symmetric) cannot be punched: the link's
WireGuard datagrams then go through a relay extender (one linked to both,
with a public address), which forwards them between two UDP ports without
holding either side's key (Tailscale's DERP): it sees ciphertext only,
and the link stays end to end.
"""
import base64
import binascii
import ipaddress
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from virtualwire.core import errors
from virtualwire.core.model import EXTENDER, ExtenderLink, Host

NAT_KINDS = ('public', 'endpoint-independent', 'symmetric', 'unknown')
# An extender's bridge external_ids vw-link-<peer> = up | down: written by
# its agent (extender.switch), read by the controller (host_ovsdb).
LINK_KEY = 'vw-link-'
# Extender links' UDP ports: WireGuard's customary port, then upwards.
LINK_BASE_PORT = 51820
# A relay's two ports for the k-th link (intent order) it relays.
RELAY_BASE_PORT = 53820
# A relay must be reachable at the endpoint the rendezvous saw from any
# address: a public one, or a NAT that maps endpoint-independently.
RELAY_NATS = ('public', 'endpoint-independent')
LINK_STATS = ('state', 'since', 'endpoint', 'rx_bytes', 'tx_bytes', 'rtt_ms',
              'restarts', 'peer_key', 'handshake')
# Inside each link's tunnel an extender has one address, from the host part
# of its link address (HOST_BITS of it): the same on all its links, so a
# peer's address is unique on every extender (one route per link), and
# both ends compute it alone. Link networks must be /20 or smaller.
HOST_BITS = 12
INNER_NET = ipaddress.IPv4Network('169.254.16.0/20')   # link-local


def host_part(link_ip: str) -> int:
    return int(ipaddress.IPv4Address(link_ip)) & ((1 << HOST_BITS) - 1)


def tunnel_addresses(mine: str, peer: str):
    """(our address, the peer's, the VXLAN id) inside the link between
    extenders with link addresses `mine` and `peer`. The id is unique per
    pair of extenders (a kernel VXLAN id may not repeat on one host)."""
    a, b = host_part(mine), host_part(peer)
    vni = (min(a, b) << HOST_BITS) | max(a, b)
    base = int(INNER_NET.network_address)
    return (str(ipaddress.IPv4Address(base + a)),
            str(ipaddress.IPv4Address(base + b)), vni)


def valid_key(text) -> bool:
    """A WireGuard public key: 32 bytes, base64."""
    try:
        return isinstance(text, str) and len(text) == 44 and \
            len(base64.b64decode(text, validate=True)) == 32
    except (binascii.Error, ValueError):
        return False


@dataclass(frozen=True)
class ExtenderReport:
    """What an extender's agent last said about itself."""
    name: str
    public_key: str                   # WireGuard, base64
    nat: str = 'unknown'
    endpoints: Dict[int, str] = field(default_factory=dict)  # port -> ip:port
    links: Dict[str, Dict] = field(default_factory=dict)     # peer -> stats
    at: float = 0.0                   # controller clock when received


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
    unknown = sorted(set(doc) - {'public_key', 'nat', 'endpoints', 'links'})
    if unknown:
        raise errors.Malformed('unknown field(s): %s' % ', '.join(unknown))
    key = doc.get('public_key')
    if not valid_key(key):
        raise errors.Malformed('public_key must be a WireGuard public key '
                               '(32 bytes, base64)')
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
    return ExtenderReport(name, str(key), nat, endpoints,
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
    # Their addresses inside the tunnel come from their link addresses'
    # host parts: those must differ from every other extender's.
    owner: Dict[int, str] = {}
    for n, h in sorted(hosts.items()):
        enc = h.encap('xl') if h.role == EXTENDER else None
        if enc is None:
            if n in (a, b):
                raise errors.Invalid('%s has no link address (vw-host-setup '
                                     "--link-cidr)" % n)
            continue
        other = owner.setdefault(host_part(enc.ip), n)
        if other != n and {n, other} & {a, b}:
            raise errors.Invalid(
                '%s and %s have link addresses with the same low %d bits: '
                'the link network must be a /%d or smaller'
                % (other, n, HOST_BITS, 32 - HOST_BITS))


def relay_of(k: ExtenderLink, links: List[ExtenderLink],
             hosts: Dict[str, Host],
             reports: Dict[str, ExtenderReport]) -> Optional[str]:
    """The extender that relays link k, or None while the link can go
    direct. A relay is linked to both sides (the operator's say that it may
    carry their datagrams), in a third site, reachable (RELAY_NATS)."""
    if punchable(reports.get(k.a), reports.get(k.b)):
        return None
    near: Dict[str, set] = {}
    for x in links:
        near.setdefault(x.a, set()).add(x.b)
        near.setdefault(x.b, set()).add(x.a)
    ha, hb = hosts.get(k.a), hosts.get(k.b)
    for xr in sorted(near.get(k.a, set()) & near.get(k.b, set())):
        h, rep = hosts.get(xr), reports.get(xr)
        if h is not None and h.role == EXTENDER and ha and hb and \
                h.site not in (ha.site, hb.site) and rep and \
                rep.nat in RELAY_NATS:
            return xr
    return None


def relay_ports(k: ExtenderLink, links: List[ExtenderLink]):
    """{side: the relay's port for it} of link k (stable while the set
    of links is)."""
    i = sorted((x.a, x.b) for x in links).index((k.a, k.b))
    return {k.a: RELAY_BASE_PORT + 2 * i, k.b: RELAY_BASE_PORT + 2 * i + 1}


def _ip(endpoint: Optional[str]) -> Optional[str]:
    return endpoint.rpartition(':')[0] if endpoint else None


def relay_specs(me: str, links: List[ExtenderLink], hosts: Dict[str, Host],
                reports: Dict[str, ExtenderReport]) -> List[dict]:
    """The links extender `me` relays now: per link, its two ports and
    the public address each side's datagrams must come from (a datagram
    from elsewhere is dropped: it could otherwise steer the other side's
    ciphertext away, though never read it)."""
    out = []
    for k in links:
        if relay_of(k, links, hosts, reports) != me:
            continue
        ports = relay_ports(k, links)
        allow = {n: _ip(reports[n].endpoints.get(k.port_of(n)))
                 for n in (k.a, k.b)}
        if all(allow.values()):
            out.append({'a': k.a, 'b': k.b, 'port_a': ports[k.a],
                        'port_b': ports[k.b], 'allow_a': allow[k.a],
                        'allow_b': allow[k.b]})
    return out


def relayed_ports(me: str, links: List[ExtenderLink],
                  hosts: Dict[str, Host],
                  reports: Dict[str, ExtenderReport]) -> List[int]:
    """The ports extender `me` relays on (their public endpoints are
    learned at the rendezvous, as link ports' are)."""
    return sorted(p for k in links
                  if relay_of(k, links, hosts, reports) == me
                  for p in relay_ports(k, links).values())


def link_specs(me: str, links: List[ExtenderLink], hosts: Dict[str, Host],
               reports: Dict[str, ExtenderReport]) -> List[dict]:
    """The links extender `me` should keep now: those whose peer has
    reported its public key and the public endpoint of its port for the
    link, and both have a link address."""
    out = []
    mine = reports.get(me)
    here = hosts.get(me)
    my_enc = here.encap('xl') if here else None
    for k in links:
        if me not in (k.a, k.b):
            continue
        peer = k.peer_of(me)
        rep, host = reports.get(peer), hosts.get(peer)
        enc = host.encap('xl') if host else None
        endpoint = rep.endpoints.get(k.port_of(peer)) if rep else None
        via = relay_of(k, links, hosts, reports)
        if via is not None:
            # Our datagrams go to the relay's port for us; it hands them
            # to the peer (and the peer's to us) without reading them.
            endpoint = reports[via].endpoints.get(
                relay_ports(k, links)[me])
        if rep is None or enc is None or my_enc is None or not endpoint:
            continue
        ip, _, port = endpoint.rpartition(':')
        inner, peer_inner, vni = tunnel_addresses(my_enc.ip, enc.ip)
        out.append({'peer': peer, 'peer_key': rep.public_key,
                    # The peer already uses our current key for this link:
                    # after a key rotation we switch to the new key only
                    # then (switching first would leave our handshakes
                    # unanswered until WireGuard's 5 s retry).
                    'pinned': bool(mine and rep.links.get(me, {}).get(
                        'peer_key') == mine.public_key),
                    'remote': ip, 'remote_port': int(port),
                    'local_port': k.port_of(me),
                    'peer_link_ip': enc.ip, 'inner': inner,
                    'peer_inner': peer_inner, 'vni': vni,
                    'via': via or ''})
    return out


def punchable(a: Optional[ExtenderReport], b: Optional[ExtenderReport]):
    """False when both sides' NATs are symmetric: the direct link cannot
    come up, only a relay can carry their wires (lab notes 13)."""
    return not (a and b and a.nat == b.nat == 'symmetric')
