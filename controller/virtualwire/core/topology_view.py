"""What `inspect` shows of an applied topology (pure): its nodes with
their VMs and vNICs where they run now, its links with their wires'
state, hosts and rate. `core.topology_graph` draws the same view."""
from collections import Counter
from typing import Dict, Optional

from virtualwire.core import ids
from virtualwire.core.topology_file import TopologyFile


def switch_places(views, hidden: bool) -> Dict[str, dict]:
    """{switch: {'parts': [...], 'ports': {port: its part}}} from the
    provider switches' views, for `inspect`. A part is its host, or
    for a tenant (`hidden`) "part N": it sees that its switch is split
    and which ports share a part, never where."""
    out = {}
    for v in views:
        parts = list(v['parts']) if v.get('split') else []
        label = {h: 'part %d' % i if hidden else h
                 for i, h in enumerate(parts, 1)}
        out[v['name']] = {
            'parts': [label[h] for h in parts],
            'ports': {p['name']: label.get(p['part'] or v['host'],
                                           None if hidden else v['host'])
                      for p in v['ports']}}
    return out


def inspect(record, tf: TopologyFile, wires: Dict[int, dict],
            vnics: Dict[str, dict],
            switches: Optional[Dict[str, dict]] = None) -> dict:
    """`record`: store.topologies.Record; `wires`: {cid: wire view with
    rates} of its wires that exist; `vnics`: {id: vNIC view} plugged;
    `switches`: `switch_places`, as the caller may see them."""
    switches = switches or {}
    ends = {k: v for k, v in record.resolved.items() if ':' in k}
    nodes = []
    for node in tf.nodes.values():
        nics = []
        place = switches.get(node.switch or '', {}) if node.provided else {}
        for nic in node.nics.values():
            vnic = ends.get('%s:%s' % (node.name, nic.name))
            v = vnics.get(vnic) if vnic else None
            if node.provided:       # a port: where its part runs
                vnic = 'sw:%s/%s' % (node.switch, nic.name)
                v = {'host': place.get('ports', {}).get(nic.name),
                     'mac': None}
            nics.append({'name': nic.name, 'vnic': vnic,
                         'host': v['host'] if v else None,
                         'mac': v['mac'] if v else nic.mac,
                         'ip': nic.ip})
            if place.get('parts'):
                nics[-1]['part'] = nics[-1]['host']
        hosts = sorted({n['host'] for n in nics if n['host']})
        nodes.append({'name': node.name, 'kind': node.kind,
                      'vm': record.resolved.get(node.name) or node.vm,
                      'hosts': hosts, 'nics': nics,
                      'parts': place.get('parts', [])})
    links = []
    for link in tf.links:
        cid = record.wires.get(link.key)
        w: Optional[dict] = wires.get(cid) if cid else None
        links.append({
            'link': link.key, 'a': link.a, 'b': link.b,
            'connector_id': ids.fmt_connector(cid) if cid else None,
            'id': cid,
            'state': w['state'] if w else 'missing',
            'host_a': w['host_a'] if w else None,
            'host_b': w['host_b'] if w else None,
            'path': w['path'] if w else [],
            'moving': sorted(w['moving']) if w else [],
            'bits_per_second': w.get('bits_per_second') if w else None,
            'packets_per_second': w.get('packets_per_second') if w
            else None})
    return {'name': record.name, 'tenant': record.tenant or None,
            'description': tf.description,
            'applied_at': record.applied_at,
            'generation': record.generation,
            'nodes': nodes, 'links': links,
            'states': dict(Counter(k['state'] for k in links))}


def summary(record, tf: Optional[TopologyFile], wires: Dict[int, dict]):
    """One line of `GET /v1/topologies`."""
    states = Counter(wires[c]['state'] if c in wires else 'missing'
                     for c in record.wires.values())
    return {'name': record.name, 'tenant': record.tenant or None,
            'nodes': len(tf.nodes) if tf else None,
            'links': len(tf.links) if tf else len(record.wires),
            'states': dict(states), 'applied_at': record.applied_at,
            'generation': record.generation}
