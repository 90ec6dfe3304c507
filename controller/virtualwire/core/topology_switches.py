"""The provider switches a topology file names (`kind: provider-switch`):
made before its wires, as the topology's tenant's, on the host with most
of the vNICs linked to them; deleted once the file no longer names them,
or the topology is destroyed, and no wire is plugged into them.

A switch is the topology's when this topology made it: its record maps
the node to `sw:NAME`. A switch that existed before (made with `vwctl
switch create`, or by another topology of the tenant) is used, never
deleted. Its ports must include every port the node names, and its
limits must be what the file says (a switch is not reshaped under its
wires; delete it to change them).
"""
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Set

from virtualwire.core import ids
from virtualwire.core.switches import IDLE_TIMEOUT, MAC_LIMIT
from virtualwire.core.topology_file import FileError
from virtualwire.core.topology_plan import Resolved


def owned(record) -> Set[str]:
    """Names of the switches topology `record` made (None: none)."""
    if record is None:
        return set()
    return {v[len('sw:'):] for k, v in record.resolved.items()
            if ':' not in k and v.startswith('sw:')}


@dataclass
class SwitchPlan:
    """Nodes whose switch is made (`create`), used as it is (`keep`, with
    whether the topology made it), and the topology's switches the file
    no longer names (`delete`)."""
    create: List[str] = field(default_factory=list)
    keep: Dict[str, bool] = field(default_factory=dict)
    delete: List[str] = field(default_factory=list)

    def view(self, resolved: Resolved):
        names = resolved.switches()
        return {'create': [names[n] for n in self.create],
                'keep': [names[n] for n in self.keep],
                'delete': list(self.delete)}

    def mapping(self, resolved: Resolved) -> Dict[str, str]:
        """The record to keep: a switch used and not made here is not
        the topology's (its node is left out)."""
        foreign = {n for n, mine in self.keep.items() if not mine}
        return {k: v for k, v in resolved.mapping().items()
                if k not in foreign}


def plan(resolved: Resolved, tenant: str, switches, before) -> SwitchPlan:
    """`switches`: {name: ProviderSwitch} now; `before`: the topology's
    record as last applied, or None."""
    out = SwitchPlan()
    mine = owned(before)
    for node_name, name in resolved.switches().items():
        node = resolved.file.nodes[node_name]
        where = 'node %s' % node_name
        if not tenant:
            raise FileError('%s: a provider switch belongs to a tenant: '
                            'apply the topology as the tenant\'s (?tenant=T, '
                            'vwctl topology apply --tenant T)' % where,
                            node.line)
        sw = switches.get(name)
        if sw is None:
            out.create.append(node_name)
            continue
        if sw.tenant != tenant:
            raise FileError('%s: switch name %s is taken (names are '
                            'global): give the node another as switch: NAME'
                            % (where, name), node.line)
        missing = [p for p in node.nics if sw.index(p) is None]
        if missing:
            raise FileError('%s: switch %s has no port %s (its ports: %s)'
                            % (where, name, ', '.join(missing),
                               ', '.join(sw.ports)), node.line)
        for k, want in (('mac_limit', node.mac_limit),
                        ('idle_timeout', node.idle_timeout)):
            if want is not None and getattr(sw, k) != want:
                raise FileError('%s: switch %s has %s %d, the file says %d: '
                                'a switch is not reshaped under its wires '
                                '(delete it to change that)' % (
                                    where, name, k, getattr(sw, k), want),
                                node.line)
        out.keep[node_name] = name in mine
    named = set(resolved.switches().values())
    out.delete = sorted(mine - named)
    return out


def parts_for(resolved: Resolved, node_name, host,
              vnic_hosts: Dict[str, str]) -> Dict[str, str]:
    """{port: host} of a `split` node, for the ports not on the switch's
    `host`: with `split: true` each linked port on its vNIC's host
    (`vnic_hosts`); with named parts, every port of a part on the host
    where most of the part's linked vNICs run (ties: by name; a part
    none of whose vNICs runs stays on `host`). Two parts that land on
    one host are one part there."""
    name = resolved.switches()[node_name]
    split = resolved.file.nodes[node_name].split
    at: Dict[str, str] = {}          # port -> its linked vNIC's host
    for a, b, _line in resolved.links().values():
        for end, other in ((a, b), (b, a)):
            parsed = ids.parse_switch_end(end)
            there = vnic_hosts.get(other)
            if parsed and parsed[0] == name and there:
                at[parsed[1]] = there
    if not isinstance(split, dict):
        return {p: h for p, h in at.items() if h != host}
    out: Dict[str, str] = {}
    for ports in split.values():
        count = Counter(at[p] for p in ports if p in at)
        best = min(count, key=lambda h: (-count[h], h)) if count else host
        if best != host:
            out.update((p, best) for p in ports)
    return out


def mine(p: SwitchPlan) -> List[str]:
    """Nodes whose switch is the topology's (made now or before)."""
    return p.create + [n for n, made in p.keep.items() if made]


def linked_vnics(resolved: Resolved, node_name) -> List[str]:
    """The vNICs the file links to a switch node's ports."""
    out = []
    for a, b, _line in resolved.links().values():
        for end, other in ((a, b), (b, a)):
            parsed = ids.parse_switch_end(end)
            if parsed and parsed[0] == resolved.switches()[node_name] and \
                    ids.parse_switch_end(other) is None:
                out.append(other)
    return sorted(out)


def make(p: SwitchPlan, resolved: Resolved, tenant, store,
         suggest_host: Callable[[List[str]], Optional[str]]):
    """Create the plan's new switches (`store`: store.switches), each
    where `suggest_host(vNICs linked to it)` says."""
    for node_name in p.create:
        node = resolved.file.nodes[node_name]
        host = suggest_host(linked_vnics(resolved, node_name))
        store.create(node.switch, tenant, host, list(node.nics),
                     node.mac_limit or MAC_LIMIT,
                     node.idle_timeout or IDLE_TIMEOUT)


def remove(names, store, wires) -> List[str]:
    """Delete the switches among `names` no wire is plugged into now
    (`wires`: {cid: Wire}); returns those deleted."""
    plugged = {p[0] for w in wires.values() for e in w.ends()
               for p in [ids.parse_switch_end(e)] if p}
    gone = []
    for name in names:
        if name not in plugged and store.delete(name):
            gone.append(name)
    return gone
