"""Provider switches in topology files (issue 41): a node of kind
provider-switch is made as the topology's tenant's switch, on the host
with most of the vNICs linked to it, before its wires; frames switch
between the linked vNICs; a second apply changes nothing; a switch the
file stops naming, or the topology destroyed, goes with its wires; one
that existed before is used and kept; a bad node is refused naming its
line, and changes nothing."""
import pytest

from test_topology_verbs import U, apply, rest, wires  # noqa: F401
from virtualwire.testing.fakeswitch import Packet

BROADCAST = 'ff:ff:ff:ff:ff:ff'
OFFICE = """\
name: office
nodes:
  client: {nics: {eth0: {vnic: c0}}}
  web1: {nics: {eth0: null, eth1: null}}
  db: {nics: {eth0: null}}
  lan:
    kind: provider-switch
    mac_limit: 64
    nics: {p1: null, p2: null, p3: null}
links:
  - endpoints: ["client:eth0", "lan:p1"]
  - endpoints: ["web1:eth0", "lan:p2"]
  - endpoints: ["db:eth0", "lan:p3"]
"""
AS_SHOP = '/v1/topologies/office?tenant=shop'


@pytest.fixture
def shop(rest):  # noqa: F811
    for v in ('c0', 'w10', 'w11', 'd0'):
        rest.h.intent.ownership.assign(v, 'shop')
    rest.h.intent.ownership.assign('o0', 'rival')
    return rest


def put(rest, text, dry=False, path=AS_SHOP):  # noqa: F811
    return rest('PUT', path, {'source': text, 'dry_run': dry})


def send(h, host, port, src, dst):
    return sorted((n, p) for n, p, _ in h.fabric.send(
        host, port, forged=Packet(port, eth_src=src, eth_dst=dst)))


def test_a_provider_switch_node_is_made_and_switches_its_links(shop):
    st, dry = put(shop, OFFICE, dry=True)
    assert st == 200 and dry['plan']['switches'] == {
        'create': ['lan'], 'keep': [], 'delete': []}, dry
    assert shop.h.intent.switches.switches() == {}, 'a dry run makes none'
    st, doc = put(shop, OFFICE)
    assert st == 201, doc
    sw = shop.h.intent.switches.get('lan')
    assert (sw.tenant, sw.host, sw.ports, sw.mac_limit) == \
        ('shop', 'h2', ('p1', 'p2', 'p3'), 64)
    assert set(wires(shop)) == {frozenset(('c0', 'sw:lan/p1')),
                                frozenset(('w10', 'sw:lan/p2')),
                                frozenset(('d0', 'sw:lan/p3'))}
    # client's broadcast reaches web1 and db (on h2) once each.
    assert send(shop.h, 'h1', 1, '02:00:00:00:00:01', BROADCAST) == \
        [('h2', 1), ('h2', 4)]
    # A second apply changes nothing.
    st, again = put(shop, OFFICE)
    assert st == 200 and not again['changed'], again
    # The view draws the switch where it runs (the operator's view).
    st, view = shop('GET', AS_SHOP)
    lan = next(n for n in view['nodes'] if n['name'] == 'lan')
    assert lan['kind'] == 'provider-switch' and lan['hosts'] == ['h2']
    assert lan['nics'][0]['vnic'] == 'sw:lan/p1'
    st, svg = shop('GET', '/v1/topologies/office/graph?tenant=shop',
                   raw=True)
    assert st == 200 and b'data-kind="provider-switch"' in svg.body


def test_a_switch_the_file_drops_or_a_destroy_goes_with_its_wires(shop):
    assert put(shop, OFFICE)[0] == 201
    without = OFFICE.split('  lan:')[0] + 'links: []\n'
    st, doc = put(shop, without)
    assert st == 200 and doc['plan']['switches']['delete'] == ['lan'], doc
    assert shop.h.intent.switches.switches() == {} and wires(shop) == {}
    assert put(shop, OFFICE)[0] == 200
    st, doc = shop('DELETE', AS_SHOP)
    assert st == 200 and len(doc['deleted']) == 3, doc
    assert shop.h.intent.switches.switches() == {}


def test_a_switch_made_before_is_used_and_kept(shop):
    st, _ = shop('POST', '/v1/switches', {'name': 'lan', 'ports': 4,
                                          'tenant': 'shop', 'host': 'h1',
                                          'mac_limit': 64})
    assert st == 201
    st, doc = put(shop, OFFICE)
    assert st == 201 and doc['plan']['switches']['keep'] == ['lan'], doc
    assert shop('DELETE', AS_SHOP)[0] == 200
    assert shop.h.intent.switches.get('lan').host == 'h1', 'not the file\'s'


@pytest.mark.parametrize('edit,path,words', [
    (lambda t: t, '/v1/topologies/office',
     'a provider switch belongs to a tenant'),
    (lambda t: t.replace('    mac_limit: 64\n',
                         '    vm: some-vm\n'), AS_SHOP,
     'a provider-switch is no VM'),
    (lambda t: t.replace('p3: null', 'p3: 10.0.0.1/24'), AS_SHOP,
     "a provider switch's NIC is a port: null"),
    (lambda t: t.replace('    kind: provider-switch\n',
                         '    kind: provider-switch\n    switch: Lan\n'),
     AS_SHOP, "nodes.lan.switch: 'Lan' does not match"),
    (lambda t: t.replace('links:', '  lan2: {kind: provider-switch, '
                         'switch: lan, nics: {q: null}}\nlinks:'), AS_SHOP,
     'nodes lan and lan2 are both switch lan'),
    (lambda t: t.replace('  db: {nics: {eth0: null}}',
                         '  db: {mac_limit: 3, nics: {eth0: null}}'),
     AS_SHOP, 'only for kind provider-switch'),
])
def test_a_bad_switch_node_is_refused_naming_its_line(shop, edit, path,
                                                      words):
    st, err = put(shop, edit(OFFICE), path=path)
    assert st == 422 and words in err['error']['message'], err
    assert err['error']['line'], err
    assert shop.h.intent.switches.switches() == {} and wires(shop) == {}


@pytest.mark.parametrize('existing,words', [
    ({'tenant': 'rival', 'ports': 3}, 'switch name lan is taken'),
    ({'tenant': 'shop', 'ports': 2}, 'switch lan has no port p3'),
    ({'tenant': 'shop', 'ports': 3, 'mac_limit': 9}, 'has mac_limit 9'),
])
def test_an_existing_switch_that_does_not_fit_is_refused(shop, existing,
                                                         words):
    st, _ = shop('POST', '/v1/switches', dict(existing, name='lan',
                                              host='h1'))
    assert st == 201
    st, err = put(shop, OFFICE)
    assert st == 422 and words in err['error']['message'], err
    assert wires(shop) == {}


def test_the_readmes_example_is_a_valid_file():
    import os
    import textwrap
    from virtualwire.core.topology_file import parse
    readme = open(os.path.join(os.path.dirname(__file__), '..', '..',
                               'README.rst')).read()
    # The literal block after the provider switch's paragraph.
    block = readme.split('      name: office\n', 1)[1].split('\n* ')[0]
    block = '      name: office\n' + block
    tf = parse(textwrap.dedent(block), 'README')
    assert tf.nodes['lan'].provided and tf.nodes['lan'].switch == 'lan'
    assert len(tf.links) == 3


def test_a_split_node_gets_a_part_where_each_linked_vm_runs(shop):
    split = OFFICE.replace('    mac_limit: 64\n', '    split: true\n')
    st, doc = put(shop, split)
    assert st == 201, doc
    sw = shop.h.intent.switches.get('lan')
    assert sw.host == 'h2' and sw.parts == (('p1', 'h1'),), sw
    # client (h1) reaches web1 and db (h2) through the two parts.
    assert send(shop.h, 'h1', 1, '02:00:00:00:00:01', BROADCAST) == \
        [('h2', 1), ('h2', 4)]
    st, doc = put(shop, OFFICE.replace('    mac_limit: 64\n', ''))
    assert st == 200 and shop.h.intent.switches.get('lan').parts == ()


def test_the_view_and_graph_draw_a_split_switchs_parts(shop):
    """The operator sees each port on its part's host; the tenant sees
    that its switch is split and which ports share a part, never where."""
    split = OFFICE.replace('    mac_limit: 64\n', '    split: true\n')
    assert put(shop, split)[0] == 201
    st, view = shop('GET', AS_SHOP)
    lan = next(n for n in view['nodes'] if n['name'] == 'lan')
    assert lan['parts'] == ['h1', 'h2'] and lan['hosts'] == ['h1', 'h2']
    assert [(n['name'], n['part']) for n in lan['nics']] == [
        ('p1', 'h1'), ('p2', 'h2'), ('p3', 'h2')], lan
    st, resp = shop('GET', '/v1/topologies/office/graph?tenant=shop',
                    raw=True)
    svg = resp.body.decode()
    assert 'split: 2 parts, one mesh' in svg
    assert 'data-nic="lan:p1" data-vnic="sw:lan/p1" data-part="h1"' in svg
    token = shop.h.intent.credentials.issue('tenant', 'shop')[0]
    st, mine = shop('GET', '/v1/topologies/office', token=token)
    assert st == 200, mine
    lan = next(n for n in mine['nodes'] if n['name'] == 'lan')
    assert lan['parts'] == ['part 1', 'part 2'], lan
    assert [n['part'] for n in lan['nics']] == ['part 1', 'part 2',
                                                'part 2']
    st, resp = shop('GET', '/v1/topologies/office/graph', token=token,
                    raw=True)
    drawn = resp.body.decode()
    assert 'data-part="part 1"' in drawn and '"h1"' not in drawn \
        and '"h2"' not in drawn, drawn


def named(parts):
    return OFFICE.replace('    mac_limit: 64\n', '    split: %s\n' % parts)


def test_named_parts_keep_their_ports_together_where_most_vms_run(shop):
    """p1's VM (client) runs on h1, p2's and p3's on h2 (the switch's
    own host): a part {p1, p2} goes to h1 (a tie, by name) with both its
    ports; a part holding all three stays on h2: not split."""
    assert put(shop, named('{front: [p1, p2], back: [p3]}'))[0] == 201
    sw = shop.h.intent.switches.get('lan')
    assert sw.host == 'h2' and sw.parts == (('p1', 'h1'), ('p2', 'h1')), sw
    # web1 (on h2) still reaches db through its port's part on h1.
    assert send(shop.h, 'h2', 1, '02:00:00:00:00:02', BROADCAST) == \
        [('h1', 1), ('h2', 4)]
    assert put(shop, named('{all: [p1, p2, p3]}'))[0] == 200
    assert shop.h.intent.switches.get('lan').parts == ()


@pytest.mark.parametrize('parts,words', [
    ('{front: [p1, p9]}', 'node lan, split, part front: no port p9'),
    ('{front: [p1], back: [p1, p2]}',
     'node lan, split, part back: port p1 is already in part front'),
    ('{front: []}', 'nodes.lan.split'),
    ('maybe', 'nodes.lan.split'),
])
def test_bad_named_parts_are_refused_naming_the_line(shop, parts, words):
    st, doc = put(shop, named(parts))
    assert st == 422 and words in doc['error']['message'], doc
    assert doc['error']['line'] == 8, doc       # the split: line
    assert shop.h.intent.switches.switches() == {}
