"""Tenant topology files (containerlab-style):

    name: demo
    nodes:
      client: {host: h1, nics: {eth0: 192.0.2.1/24}}
      server: {host: h2, nics: {eth0: 192.0.2.2/24}}
    links:
      - endpoints: ["client:eth0", "server:eth0"]

Each link becomes a wire between the two vNICs; a vNIC's id is
"<topology>-<node>-<nic>" (what libvirt would carry as its interfaceid).
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import yaml

from virtualwire.core import ids


class TopologyError(ValueError):
    pass


@dataclass
class Node:
    name: str
    host: str
    nics: Dict[str, Optional[str]]        # nic -> CIDR or None


@dataclass
class Topology:
    name: str
    nodes: Dict[str, Node]
    links: List[Tuple[str, str]]          # (node:nic, node:nic)

    def vnic_id(self, endpoint):
        node, nic = endpoint.split(':', 1)
        return '%s-%s-%s' % (self.name, node, nic)

    def hosts(self):
        return sorted({n.host for n in self.nodes.values()})


def parse(text, source='<topology>'):
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise TopologyError('%s: not valid YAML: %s' % (source, e))
    if not isinstance(doc, dict):
        raise TopologyError('%s: expected a mapping with name, nodes, links'
                            % source)
    name = str(doc.get('name', ''))
    if not name:
        raise TopologyError('%s: "name" is required' % source)
    nodes = {}
    for nname, spec in (doc.get('nodes') or {}).items():
        if not isinstance(spec, dict) or 'host' not in spec:
            raise TopologyError('%s: node %s needs a "host"' % (source, nname))
        nics = spec.get('nics') or {'eth0': None}
        nodes[nname] = Node(nname, str(spec['host']),
                            {str(k): v for k, v in nics.items()})
    topo = Topology(name, nodes, [])
    used = {}
    for i, link in enumerate(doc.get('links') or []):
        eps = link.get('endpoints') if isinstance(link, dict) else None
        if not isinstance(eps, list) or len(eps) != 2:
            raise TopologyError('%s: link %d needs exactly two endpoints'
                                % (source, i + 1))
        for ep in eps:
            node, _, nic = str(ep).partition(':')
            if node not in nodes or nic not in nodes[node].nics:
                raise TopologyError('%s: link %d: unknown endpoint %r'
                                    % (source, i + 1, ep))
            if ep in used:
                raise TopologyError('%s: %s is on links %d and %d: a vNIC '
                                    'holds one wire' % (source, ep,
                                                        used[ep], i + 1))
            used[ep] = i + 1
            ids.check_vnic_id(topo.vnic_id(ep))
        topo.links.append((str(eps[0]), str(eps[1])))
    return topo


def load(path):
    with open(path) as f:
        return parse(f.read(), path)


DEMO = """\
# Embedded default for `vwlab demo`: one wire across hosts, one collapsed.
name: demo
nodes:
  client: {host: h1, nics: {eth0: 192.0.2.1/24}}
  server: {host: h2, nics: {eth0: 192.0.2.2/24}}
  app:    {host: h3, nics: {eth0: 198.51.100.1/24}}
  db:     {host: h3, nics: {eth0: 198.51.100.2/24}}
links:
  - endpoints: ["client:eth0", "server:eth0"]
  - endpoints: ["app:eth0", "db:eth0"]
"""
