"""Where a provider switch should run, from its ports' traffic (issue 41).

A switch on host H carries every frame of a port whose VM is elsewhere
across the underlay (into H, out of H); a port whose VM is on H is
joined locally (collapsed). So the host that saves most is the one whose
VMs' ports carry most bytes: the advice is that host, and a move only
when it would cut the bytes crossing the underlay by MARGIN or more (a
switch does not chase every wobble of its traffic, and a move costs a
drain). Pure: the rates are the collector's (its window), the view is
`provider_switches.view`.

What it does not weigh: a host's free capacity, where the tenant's
next VMs will land, or a split switch (its parts are already where its
ports are: `split --auto`).
"""
from typing import Dict, Mapping, Optional

MARGIN = 0.2          # a move must cut the underlay's bytes by a fifth


def advise(view, rates: Mapping[int, Optional[float]],
           margin: float = MARGIN) -> dict:
    """`view`: the switch's; `rates`: {wire id: bits per second both
    ways, None before the collector has a window}."""
    here = view['host']
    by_host: Dict[str, float] = {}
    unread = []
    for p in view['ports']:
        if p['wire'] is None or p['peer_host'] is None:
            continue
        bps = rates.get(p['wire'])
        if bps is None:
            unread.append(p['name'])
            continue
        by_host[p['peer_host']] = by_host.get(p['peer_host'], 0.0) + bps
    total = sum(by_host.values())
    out = {'switch': view['name'], 'host': here, 'advised': here,
           'move': False, 'by_host_bps': by_host, 'unread_ports': unread,
           'crossing_bps': {'now': total - by_host.get(here, 0.0)}}
    if view.get('split'):
        out.update(advised=None, reason='split: each part runs where its '
                   'ports are (split --auto re-homes them)')
        return out
    if not by_host:
        out['reason'] = 'no traffic measured on its ports yet' + (
            ' (%d not read yet)' % len(unread) if unread else '')
        return out
    # Most bytes; ties stay where it is, then by name.
    best = min(by_host, key=lambda h: (-by_host[h], h != here, h))
    now, then = out['crossing_bps']['now'], total - by_host[best]
    out['crossing_bps']['advised'] = then
    if best == here:
        out['reason'] = 'already on the host whose ports carry most'
    elif now <= 0 or (now - then) / now < margin:
        out['reason'] = 'a move to %s would cut the underlay\'s bytes by ' \
            '%.0f%%, under the %.0f%% worth a move' % (
                best, 100 * (now - then) / now if now else 0, 100 * margin)
    else:
        out.update(advised=best, move=True,
                   reason='its ports on %s carry %.0f%% of its traffic: '
                   'moving there cuts the underlay\'s bytes by %.0f%%' % (
                       best, 100 * by_host[best] / total,
                       100 * (now - then) / now))
    return out
