"""Placement advice (pure): which VM moves would take the most traffic off
tunnels and extenders, from the collector's per-wire rates. Advice only:
`vwctl placement` prints it; nothing moves by itself.

A wire between two hosts of a site is tunnelled (it crosses the site's
network), between sites extended (it crosses the extenders' encrypted
link and the WAN), inside one host collapsed (it crosses nothing). A
candidate move takes one VM to the host of one of its wires' far ends.
Its effect is summed over all of that VM's wires, at their measured
rates: the busy wire it collapses, and any other wire it would now split
or lengthen. Moves are ranked by the traffic they take off extenders,
then off tunnels, net of what they add; only moves that help by more
than the rates' noise are shown (`helps`).
WAVNet groups hosts by measured latency for the same reason; the paper
discusses collapsing components to where they talk.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

COLLAPSED, TUNNELLED, EXTENDED = 0, 1, 2


@dataclass(frozen=True)
class WireUse:
    connector_id: str
    ends: Tuple[str, str]             # vNIC ids
    hosts: Tuple[Optional[str], Optional[str]]
    bits_per_second: float


@dataclass
class Move:
    vm: str                           # VM id (libvirt UUID)
    source: str
    target: str
    collapses: List[str] = field(default_factory=list)   # connector ids
    off_extenders: float = 0.0        # bits/s no longer across sites
    off_tunnels: float = 0.0          # ... no longer between hosts
    onto_extenders: float = 0.0
    onto_tunnels: float = 0.0

    @property
    def net(self) -> Tuple[float, float]:
        return (self.off_extenders - self.onto_extenders,
                self.off_tunnels - self.onto_tunnels)


def kind(a: Optional[str], b: Optional[str], site: Dict[str, str]) -> int:
    if a == b:
        return COLLAPSED
    return TUNNELLED if site.get(a or '') == site.get(b or '') else EXTENDED


def _effect(m: Move, before: int, after: int, bps: float):
    """Add one wire's change of kind to a move's tally."""
    if before == after:
        return
    if before == EXTENDED:
        m.off_extenders += bps
    elif before == TUNNELLED:
        m.off_tunnels += bps
    if after == EXTENDED:
        m.onto_extenders += bps
    elif after == TUNNELLED:
        m.onto_tunnels += bps


def helps(m: Move, min_bps: float) -> bool:
    """Off the WAN first, then off the site's network, by more than the
    rates' own noise: a gain must be at least min_bps and a tenth of what
    the move takes off (moving a VM between two busy peers takes one
    wire's rate off and puts the other's on: two readings of one stream
    that differ by a few packets are not a reason to migrate)."""
    def big(gain, gross):
        return gain >= max(min_bps, 0.1 * gross)

    def harmless(gain, gross):
        return gain > -max(min_bps, 0.1 * gross)
    net_ext, net_tun = m.net
    return big(net_ext, m.off_extenders) or (
        harmless(net_ext, m.off_extenders) and big(net_tun, m.off_tunnels))


def moves(wires: List[WireUse], vm_of: Dict[str, str],
          site: Dict[str, str], min_bps: float = 1000.0) -> List[Move]:
    """Every move of a VM to the host of one of its busy wires' far ends
    that takes traffic off tunnels or extenders, best first. `vm_of`:
    vNIC -> VM id (ends of no VM, gateways, do not move); `site`: host ->
    site."""
    by_vm: Dict[str, List[WireUse]] = {}
    for w in wires:
        for v in set(w.ends):
            if v in vm_of:
                by_vm.setdefault(vm_of[v], []).append(w)
    out: List[Move] = []
    for vm, mine in sorted(by_vm.items()):
        here = {h for w in mine for v, h in zip(w.ends, w.hosts)
                if vm_of.get(v) == vm and h}
        if len(here) != 1:
            continue                  # not running, or moving now
        source = here.pop()
        targets = {h for w in mine if w.bits_per_second >= min_bps
                   for v, h in zip(w.ends, w.hosts)
                   if vm_of.get(v) != vm and h and h != source}
        for target in sorted(targets):
            m = Move(vm, source, target)
            for w in mine:
                now = [h if vm_of.get(v) != vm else target
                       for v, h in zip(w.ends, w.hosts)]
                if None in w.hosts:
                    continue
                before = kind(w.hosts[0], w.hosts[1], site)
                after = kind(now[0], now[1], site)
                _effect(m, before, after, w.bits_per_second)
                if after == COLLAPSED and before != COLLAPSED:
                    m.collapses.append(w.connector_id)
            if helps(m, min_bps):
                out.append(m)
    out.sort(key=lambda m: (-m.net[0], -m.net[1], m.vm, m.target))
    return out
