import os

import pytest

from vwlab import topology

TOPO_DIR = os.path.join(os.path.dirname(__file__), '..', '..', 'topologies')


def test_embedded_demo_has_a_cross_host_and_a_collapsed_link():
    t = topology.parse(topology.DEMO)
    hosts = [(t.nodes[k.a.split(':')[0]].host,
              t.nodes[k.b.split(':')[0]].host) for k in t.links]
    assert any(x != y for x, y in hosts) and any(x == y for x, y in hosts)
    assert topology.vnic_id(t, 'client:eth0') == 'demo-client-eth0'


@pytest.mark.parametrize('name', sorted(os.listdir(TOPO_DIR)))
def test_shipped_topologies_parse(name):
    t = topology.load(os.path.join(TOPO_DIR, name))
    assert t.links


@pytest.mark.parametrize('text,words', [
    ('nodes: {}', "<topology>:1: the file: 'name' is a required property"),
    ('[1, 2]', '<topology>:1: expected a mapping'),
    ('name: x\nnodes: {a: {nics: {eth0: null}}}', ':2: node a needs a "host"'),
    ('name: x\nnodes: {a: {host: h1}}\nlinks: [{endpoints: ["a:eth0"]}]',
     ':3: links.0.endpoints: .* is too short'),
    ('name: x\nnodes: {a: {host: h1}}\nlinks: [{endpoints: ["a:eth0", "b:eth0"]}]',
     ":3: link 1: no node 'b'"),
    ('name: x\nnodes: {a: {host: h1, nics: {eth0: null, eth1: null}}, '
     'b: {host: h2}}\nlinks: [{endpoints: ["a:eth0", "b:eth0"]}, '
     '{endpoints: ["a:eth1", "b:eth0"]}]', 'a NIC holds one wire'),
    ('name: x\n  bad: [', ':2: not valid YAML'),
])
def test_bad_topologies_say_what_is_wrong(text, words):
    with pytest.raises(topology.TopologyError, match=words):
        topology.parse(text)
