"""Moving a topology's VMs together (pure): which members move, where to,
and in which order. `cli.ensemble` carries it out through libvirt.

Where: to a host, or to a site. To a site, every member goes to one
hypervisor of it (the one that already runs the most members, then by
name), so wires between members end collapsed, each inside one host.

Order: while an ensemble moves, a wire between a member that has moved
and one that has not yet crosses between the two places (tunnelled within
a site, through the extenders between clouds). Each next member is the
one whose move takes the most traffic off that crossing: its traffic
with members already moved (or moving) minus its traffic with members
still to move, from the collector's per-wire rates. Members that talk to
each other thus move one after the other, and a quiet member goes before
a busy pair that would otherwise be split for longer. Ties (no traffic
known): the file's order. CloudNet moved its four VMs together for the
same reason: to keep a split application's traffic off the WAN.
"""
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from virtualwire.core import errors


@dataclass(frozen=True)
class Member:
    node: str
    vm: str                  # libvirt domain UUID
    host: Optional[str]      # where it runs now (None: not running)


def members(view, only: Sequence[str] = ()) -> List[Member]:
    """The VMs of an inspected topology (`core.topology_view.inspect`),
    or those of `only` (node or VM names)."""
    out = []
    for n in view['nodes']:
        if only and n['name'] not in only and n['vm'] not in only:
            continue
        if not n['vm']:
            raise errors.Invalid('node %s has no VM known by UUID (its NICs '
                                 'were named by vnic or mac): it cannot be '
                                 'migrated by topology' % n['name'])
        if len(n['hosts']) > 1:
            raise errors.Conflict('node %s is on %s: it is being migrated '
                                  'already' % (n['name'],
                                               ', '.join(n['hosts'])))
        out.append(Member(n['name'], n['vm'], (n['hosts'] or [None])[0]))
    missing = set(only) - {m.node for m in out} - {m.vm for m in out}
    if missing:
        raise errors.NotFound('no node or VM %s in topology %s' % (
            ', '.join(sorted(missing)), view['name']))
    if not out:
        raise errors.Invalid('topology %s has no VM to move' % view['name'])
    return out


def destination(to: str, hosts: Iterable[dict], group: List[Member]) -> str:
    """The host `to` names (a host, or a site: its hypervisor already
    running the most members, then the first by name)."""
    hosts = [h for h in hosts if h.get('role', 'hypervisor') == 'hypervisor']
    if any(h['name'] == to for h in hosts):
        return to
    in_site = sorted(h['name'] for h in hosts if h.get('site') == to)
    if not in_site:
        raise errors.NotFound('no hypervisor or site %s (hosts: %s; sites: '
                              '%s)' % (to, ', '.join(sorted(
                                  h['name'] for h in hosts)), ', '.join(
                                  sorted({h.get('site', '') for h in hosts}))))
    return max(in_site, key=lambda h: (sum(m.host == h for m in group),
                                       -in_site.index(h)))


def link_rates(view) -> List[Tuple[str, str, float]]:
    """(node a, node b, bits/s) of each link of an inspected topology."""
    return [(k['a'].split(':')[0], k['b'].split(':')[0],
             k.get('bits_per_second') or 0.0) for k in view['links']]


def order(moving: Sequence[str], links: Sequence[Tuple[str, str, float]],
          placed: Iterable[str] = ()) -> List[str]:
    """`moving` (nodes, in file order) in the order to move them; `placed`:
    nodes already at the destination (they pull their peers)."""
    done = set(placed)
    todo = list(moving)
    out: List[str] = []
    while todo:
        def gain(n):
            g = 0.0
            for a, b, bps in links:
                if n not in (a, b) or a == b:
                    continue
                other = b if a == n else a
                if other in done:
                    g += bps
                elif other in todo:
                    g -= bps
            return g
        best = max(todo, key=lambda n: (gain(n), -todo.index(n)))
        out.append(best)
        done.add(best)
        todo.remove(best)
    return out


def split_traffic(links, where: Dict[str, Optional[str]]) -> float:
    """Bits/s of the links whose ends are on different hosts now."""
    return sum(bps for a, b, bps in links
               if where.get(a) and where.get(b) and where[a] != where[b])
