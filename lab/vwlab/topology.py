"""Topology files in the lab: the product's own reader
(`virtualwire.core.topology_file`: the published schema, refusals naming
the line) plus what only the lab needs, where to create each VM:

    name: demo
    nodes:
      client: {host: h1, nics: {eth0: 192.0.2.1/24}}
      server: {host: h2, nics: {eth0: 192.0.2.2/24}}
    links:
      - endpoints: ["client:eth0", "server:eth0"]

`vwlab demo` creates each node's VM on its host (a NIC's string is its
address), reports it as libvirt's hook would (`vwlab.guest_report`), then
applies the same file through the controller's REST, as a user would.
A lab vNIC's id is "<topology>-<node>-<nic>".
"""
from virtualwire.core.topology_file import FileError, TopologyFile
from virtualwire.core.topology_file import parse as parse_file

TopologyError = FileError


def parse(text, source='<topology>') -> TopologyFile:
    topo = parse_file(text, source)
    for node in topo.nodes.values():
        if not node.host:
            raise FileError('node %s needs a "host" (the lab host to create '
                            'its VM on)' % node.name, node.line, source)
    return topo


def load(path) -> TopologyFile:
    with open(path) as f:
        return parse(f.read(), path)


def create_vms(lab, topo, placement=None):
    """Each node's VM (named its `vm`, else the node's name) on its host
    (`placement[node]`, else the file's `host`), one NIC per NIC of the
    file in order (eth0, eth1, ...; aliased ua-NAME), its address set;
    each reported to the controller as libvirt's hook would. Returns
    {node: Vm}."""
    from vwlab import guest_report
    vms = {}
    for node in topo.nodes.values():
        host = lab.host((placement or {}).get(node.name) or node.host)
        nics = [(vnic_id(topo, '%s:%s' % (node.name, nic)), n.ip)
                for nic, n in node.nics.items()]
        vm = host.add_vm(node.vm or node.name, nics)
        for (vnic, _ip), nic in zip(nics, node.nics):
            vm.nics[vnic]['alias'] = 'ua-' + nic
        guest_report.report(host, vm)
        vms[node.name] = vm
    return vms


def vnic_id(topo, endpoint):
    node, nic = endpoint.split(':', 1)
    return '%s-%s-%s' % (topo.name, node, nic)


def hosts(topo):
    return sorted({n.host for n in topo.nodes.values()})


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
