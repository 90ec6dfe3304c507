"""One guest, one switch-over: a migrating guest's first frame on any of
its vNICs' destination ports proves that the whole guest runs there, so
each of its activation flows learns the delivering flows of all its moving
vNICs on that host, not only its own.

Why: OVS starts a revalidation pass at most every 5 ms
(ofproto-dpif-upcall.c, udpif_revalidator), and a learned flow reaches
the datapath at the next pass. QEMU announces on a guest's vNICs one
after the other; a vNIC whose own learn came just after its sibling's
kept dropping for up to 5 ms (docs/benchmarks.rst, migration). Learned
together, they switch over in the same pass.
"""
from dataclasses import replace
from typing import Dict

from virtualwire.pipeline.flow import Flow
from virtualwire.pipeline.tables import WIRE

ACTIVATE = WIRE.priority('activate')


def vm_of_port(host) -> Dict[int, str]:
    """{ofport: vm-id} of a host's vNIC ports that name their guest."""
    if host is None:
        return {}
    return {p.ofport: p.vm_id for p in host.vnics if p.vm_id}


def merge(flows: Dict[tuple, Flow], vms: Dict[int, str]) -> Dict[tuple, Flow]:
    """One host's activation flows ({key: Flow}) -> the same keys, each
    flow's learns followed by those of the other activation flows whose
    port belongs to the same guest (`vms`: ofport -> vm-id). A flow's own
    learn stays first: a restarted controller reads it back
    (`wire.activation_flows`)."""
    groups: Dict[str, list] = {}
    for k, f in flows.items():
        port = dict(f.match).get('in_port')
        vm = vms.get(port) if isinstance(port, int) else None
        if vm:
            groups.setdefault(vm, []).append(k)
    out = dict(flows)
    for keys in groups.values():
        if len(keys) < 2:
            continue
        learns = {k: [a for a in flows[k].actions if a[0] == 'learn']
                  for k in keys}
        for k in keys:
            others = sorted(a for o in keys if o != k for a in learns[o])
            rest = [a for a in flows[k].actions if a[0] != 'learn']
            out[k] = replace(flows[k],
                             actions=tuple(learns[k] + others + rest))
    return out


def merged_table(flows, host):
    """A host's whole desired table (a set of flows) with its guests'
    activation flows merged."""
    acts = {f.key: f for f in flows if f.priority == ACTIVATE}
    if len(acts) < 2:
        return set(flows)
    merged = merge(acts, vm_of_port(host))
    return (set(flows) - set(acts.values())) | set(merged.values())
