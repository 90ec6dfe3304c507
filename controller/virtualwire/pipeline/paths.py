"""Which hosts a wire's frames cross from one end's host to the other's.

Hosts of one site share an underlay: a frame goes straight to the far
end's host (one in-site carrier hop). Between sites it goes to its site's
extender, across the encrypted link to the other site's extender, and on
to the far end's host (the paper's section 3.2):

    h1 -> x-a ==link==> x-b -> h4

A frame is never decrypted between the two sites' extenders: when their
NATs defeat hole punching, their link's encrypted datagrams go through a
relay extender that cannot read them (`core.links.relay_of`), and the path
is still x-a ==link==> x-b. A site may have several extenders; the first
(by name) with a working path is used, so another takes over when its
link goes down. Pure: hosts in, host names out.
"""
from typing import Dict, List, Optional, Tuple

from virtualwire.core.model import EXTENDER, Host
from virtualwire.pipeline import carriers

Path = Tuple[str, ...]


def extenders(hosts: Dict[str, Host], site: str) -> List[str]:
    return sorted(n for n, h in hosts.items()
                  if h.role == EXTENDER and h.site == site)


def _hop(hosts, a, b) -> bool:
    return a == b or carriers.choose(hosts.get(a), hosts.get(b)) is not None


def _join(*names) -> Path:
    """The hosts in order, a host named twice in a row once (an end on an
    extender itself)."""
    out: List[str] = []
    for n in names:
        if not out or out[-1] != n:
            out.append(n)
    return tuple(out)


def route(hosts: Dict[str, Host], a: str, b: str) -> Optional[Path]:
    """Hosts a frame from host a to host b crosses, a and b included;
    None if no usable path exists now."""
    ha, hb = hosts.get(a), hosts.get(b)
    if ha is None or hb is None:
        return None
    if a == b:
        return (a,)
    if ha.site == hb.site:
        return (a, b) if _hop(hosts, a, b) else None
    candidates: List[Tuple[str, ...]] = []
    for xa in extenders(hosts, ha.site):
        for xb in extenders(hosts, hb.site):
            candidates.append((a, xa, xb, b))
    for c in candidates:
        path = _join(*c)
        if all(_hop(hosts, x, y) for x, y in zip(path, path[1:])):
            return path
    return None


def hop(hosts: Dict[str, Host], here: str, peer: str):
    """(carrier, here's encap, peer's encap) of the hop between two
    neighbours on a path."""
    c = carriers.choose(hosts.get(here), hosts.get(peer))
    assert c is not None, 'no carrier %s -> %s' % (here, peer)
    return c
