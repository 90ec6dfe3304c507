"""Topologies as intent over REST, on a controller driven in-process:
apply reconciles only the topology's wires in one write, a second apply
writes nothing and sends no flow, a bad file is refused naming its line
and changes nothing, destroy removes exactly its wires, the picture has
the file's nodes and links, and tenants stay apart."""
import json
import re

import pytest
import webob

from virtualwire.api.rest import RestApi
from virtualwire.testing.harness import Harness

TOKEN = 'secret'
U = {n: '%08x-0000-4000-8000-%012x' % (i, i) for i, n in enumerate(
    ('client', 'fw', 'web1', 'web2', 'db', 'other'), 1)}

THREE_TIER = """\
name: shop
nodes:
  client: {nics: {eth0: {vnic: c0}}}
  fw:
    kind: firewall
    nics:
      eth0: null
      eth1: {alias: ua-inside}
  web1: {nics: {eth0: null, eth1: null}}
  web2: {vm: %s, nics: {eth0: {mac: "52:54:00:00:03:00"}}}
  db: {nics: {eth0: null}}
links:
  - endpoints: ["client:eth0", "fw:eth0"]
  - endpoints: ["fw:eth1", "web1:eth0"]
  - endpoints: ["web1:eth1", "db:eth0"]
""" % U['web2']


def guest(name, host, *vnics, aliases=()):
    return {'name': name, 'host': host, 'nics': [
        {'index': i, 'vnic': v, 'mac': '52:54:00:00:%02x:%02x'
         % (list(U).index(name), i), 'alias': dict(aliases).get(v, '')}
        for i, v in enumerate(vnics)]}


@pytest.fixture
def rest():
    h = Harness()
    h.host('h1', ('c0', 1), ('f0', 2), ('f1', 3))
    h.host('h2', ('w10', 1), ('w11', 2), ('w20', 3), ('d0', 4), ('o0', 5))
    api = RestApi(h.loop, h.ctl, h.intent, h.runtime, TOKEN)

    def call(method, path, body=None, token=TOKEN, raw=False):
        req = webob.Request.blank(path, method=method)
        if token:
            req.headers['Authorization'] = 'Bearer ' + token
        if body is not None:
            req.body = json.dumps(body).encode()
        resp = req.get_response(api)
        h.settle()
        if raw:
            return resp.status_int, resp
        return resp.status_int, (resp.json if resp.body else None)
    call.h = h
    for args in (('client', 'h1', 'c0'), ('fw', 'h1', 'f0', 'f1'),
                 ('web1', 'h2', 'w10', 'w11'), ('web2', 'h2', 'w20'),
                 ('db', 'h2', 'd0'), ('other', 'h2', 'o0')):
        assert call('PUT', '/v1/guests/%s' % U[args[0]], guest(
            *args, aliases=[('f1', 'ua-inside')]))[0] == 200
    return call


def apply(rest, text, name='shop', dry=False, **kw):
    return rest('PUT', '/v1/topologies/%s' % name,
                {'source': text, 'dry_run': dry}, **kw)


def wires(rest):
    return {frozenset((w['a'], w['b'])): w['id']
            for w in rest('GET', '/v1/wires')[1]['wires']}


def test_apply_finds_every_nic_and_wires_the_links_in_one_write(rest):
    status, out = apply(rest, THREE_TIER)
    assert status == 201, out
    assert out['changed'] and len(out['plan']['create']) == 3
    assert set(wires(rest)) == {frozenset(p) for p in (
        ('c0', 'f0'), ('f1', 'w10'), ('w11', 'd0'))}
    assert rest.h.intent.topologies.writes == 1
    view = rest('GET', '/v1/topologies/shop')[1]
    assert {n['name']: [x['vnic'] for x in n['nics']] for n in
            view['nodes']} == {'client': ['c0'], 'fw': ['f0', 'f1'],
                               'web1': ['w10', 'w11'], 'web2': ['w20'],
                               'db': ['d0']}
    states = {k['link']: k['state'] for k in view['links']}
    assert states == {'client:eth0|fw:eth0': 'collapsed',
                      'fw:eth1|web1:eth0': 'tunnelled',
                      'db:eth0|web1:eth1': 'collapsed'}


def test_a_second_apply_writes_nothing_and_sends_no_flow(rest):
    apply(rest, THREE_TIER)
    before, writes = rest.h.flow_mods(), rest.h.intent.topologies.writes
    status, out = apply(rest, THREE_TIER)
    assert status == 200 and not out['changed']
    assert out['plan']['create'] == [] and out['plan']['delete'] == []
    assert len(out['plan']['keep']) == 3
    assert rest.h.flow_mods() == before
    assert rest.h.intent.topologies.writes == writes


def test_an_edit_changes_only_the_links_edited(rest):
    apply(rest, THREE_TIER)
    w0 = wires(rest)
    edited = THREE_TIER.replace(
        '  - endpoints: ["web1:eth1", "db:eth0"]\n',      # removed
        '  - endpoints: ["web2:eth0", "db:eth0"]\n'        # added
    ).replace('["fw:eth1", "web1:eth0"]', '["fw:eth1", "web1:eth1"]')
    status, out = apply(rest, edited, dry=True)
    assert status == 200 and out['dry_run'] and wires(rest) == w0
    assert sorted(c['link'] for c in out['plan']['create']) == [
        'db:eth0|web2:eth0', 'fw:eth1|web1:eth1']
    assert sorted(d['link'] for d in out['plan']['delete']) == [
        'db:eth0|web1:eth1', 'fw:eth1|web1:eth0']
    status, out = apply(rest, edited)
    assert status == 200 and out['changed']
    w1 = wires(rest)
    untouched = frozenset(('c0', 'f0'))
    assert w1[untouched] == w0[untouched]
    assert set(w1) == {untouched, frozenset(('f1', 'w11')),
                       frozenset(('w20', 'd0'))}


def test_a_node_renamed_in_the_file_keeps_its_wires(rest):
    apply(rest, THREE_TIER)
    w0 = wires(rest)
    renamed = THREE_TIER.replace('  client: {', '  shopper: {vm: %s, '
                                 % U['client']).replace('"client:', '"shopper:')
    status, out = apply(rest, renamed)
    assert status == 200 and out['plan']['create'] == [], out
    assert wires(rest) == w0


@pytest.mark.parametrize('edit,line,words', [
    (('  db: {nics: {eth0: null}}', '  db: {vm: nosuch, nics: {eth0: null}}'),
     11, "no VM 'nosuch' is known"),
    (('{vnic: c0}', '{vnic: zz9}'), 3, 'no vNIC zz9 is plugged'),
    (('{vnic: c0}', '{vnic: d0}'), 11, 'is vNIC d0, as client:eth0'),
    (('      eth1: {alias: ua-inside}', '      eth1: {alias: ua-nope}'), 8,
     'has no interface aliased ua-nope'),
    (('kind: firewall', 'kind: toaster'), 5, "'toaster' is not one of"),
    (('  - endpoints: ["client:eth0", "fw:eth0"]',
      '  - endpoints: ["client:eth0", "fw:eth9"]'), 13, 'has no NIC'),
    (('  - endpoints: ["web1:eth1", "db:eth0"]',
      '  - endpoints: ["web1:eth1", "fw:eth0"]'), 15,
     'fw:eth0 is also on the link of line 13'),
    (('nodes:', 'nodes:\n  colour: red'), 3, 'nodes.colour'),
])
def test_a_bad_file_is_refused_naming_the_line_and_changes_nothing(
        rest, edit, line, words):
    apply(rest, THREE_TIER)
    w0, view0 = wires(rest), rest('GET', '/v1/topologies/shop')[1]
    status, out = apply(rest, THREE_TIER.replace(*edit))
    assert status == 422, out
    assert out['error']['line'] == line, out
    assert re.search(words, out['error']['message']), out
    assert out['error']['message'].startswith('topology:%d: ' % line)
    assert wires(rest) == w0
    assert rest('GET', '/v1/topologies/shop')[1] == view0


def test_a_vnic_wired_outside_the_topology_is_not_taken(rest):
    status, outside = rest('POST', '/v1/wires', {'a': 'd0', 'b': 'o0'})
    assert status == 201
    status, out = apply(rest, THREE_TIER)
    assert status == 422 and out['error']['line'] == 15, out
    assert 'already wired' in out['error']['message']
    assert 'never touches another' in out['error']['message']
    assert set(wires(rest)) == {frozenset(('d0', 'o0'))}
    assert rest('GET', '/v1/topologies/shop')[0] == 404


def test_destroy_removes_exactly_the_topologys_wires(rest):
    rest('POST', '/v1/wires', {'a': 'w20', 'b': 'o0'})
    apply(rest, THREE_TIER)
    status, out = rest('DELETE', '/v1/topologies/shop')
    assert status == 200 and len(out['deleted']) == 3
    assert set(wires(rest)) == {frozenset(('w20', 'o0'))}
    assert rest('GET', '/v1/topologies/shop')[0] == 404
    assert rest('DELETE', '/v1/topologies/shop')[0] == 404


def test_a_wire_deleted_outside_is_made_again_by_the_next_apply(rest):
    apply(rest, THREE_TIER)
    cid = wires(rest)[frozenset(('c0', 'f0'))]
    rest('DELETE', '/v1/wires/%d' % cid)
    view = rest('GET', '/v1/topologies/shop')[1]
    assert view['states'].get('missing') == 1
    status, out = apply(rest, THREE_TIER)
    assert status == 200 and [c['link'] for c in out['plan']['create']] == [
        'client:eth0|fw:eth0']
    assert frozenset(('c0', 'f0')) in wires(rest)


def test_the_graph_draws_the_files_nodes_and_links(rest):
    apply(rest, THREE_TIER)
    status, resp = rest('GET', '/v1/topologies/shop/graph', raw=True)
    assert status == 200 and resp.content_type == 'image/svg+xml'
    text = resp.body.decode()
    assert sorted(re.findall(r'data-node="([^"]+)"', text)) == [
        'client', 'db', 'fw', 'web1', 'web2']
    assert sorted(re.findall(r'data-link="([^"]+)"', text)) == [
        'client:eth0|fw:eth0', 'db:eth0|web1:eth1', 'fw:eth1|web1:eth0']
    assert re.findall(r'data-state="([^"]+)"', text).count('collapsed') == 2
    import xml.etree.ElementTree as ET
    ET.fromstring(text)                       # well-formed


def test_a_tenant_applies_only_its_own_vnics_and_sees_only_its_own(rest):
    for v in ('c0', 'f0', 'f1', 'w10', 'w11', 'w20', 'd0'):
        rest('PUT', '/v1/vnics/%s/tenant' % v, {'tenant': 'acme'})
    rest('PUT', '/v1/vnics/o0/tenant', {'tenant': 'globex'})
    _s, cred = rest('POST', '/v1/credentials', {'role': 'tenant',
                                                'name': 'acme'})
    _s, other = rest('POST', '/v1/credentials', {'role': 'tenant',
                                                 'name': 'globex'})
    status, out = apply(rest, THREE_TIER, token=cred['token'])
    assert status == 201, out
    # Another tenant's VM and vNIC read as unknown, naming the line.
    bad = THREE_TIER.replace('  db: {nics: {eth0: null}}',
                             '  db: {vm: other, nics: {eth0: null}}')
    status, out = apply(rest, bad, token=cred['token'])
    assert status == 422 and "no VM 'other'" in out['error']['message']
    bad = THREE_TIER.replace('{vnic: c0}', '{vnic: o0}')
    status, out = apply(rest, bad, token=cred['token'])
    assert status == 422 and 'no vNIC o0' in out['error']['message']
    # globex sees no topology and cannot touch acme's.
    assert rest('GET', '/v1/topologies', token=other['token'])[1] == {
        'topologies': []}
    assert rest('GET', '/v1/topologies/shop', token=other['token'])[0] == 404
    assert rest('DELETE', '/v1/topologies/shop',
                token=other['token'])[0] == 404
    # The operator names acme's with ?tenant=.
    assert rest('GET', '/v1/topologies/shop')[0] == 404
    assert rest('GET', '/v1/topologies/shop?tenant=acme')[0] == 200
    assert len(wires(rest)) == 3


def test_a_vnic_given_to_another_tenant_leaves_the_old_ones_topology(rest):
    """Review point 11: once the operator gives one of a topology's vNICs
    to another tenant, the old tenant neither sees that wire through its
    topology nor deletes it with it."""
    for v in ('c0', 'f0', 'f1', 'w10', 'w11', 'w20', 'd0'):
        rest('PUT', '/v1/vnics/%s/tenant' % v, {'tenant': 'acme'})
    _s, cred = rest('POST', '/v1/credentials', {'role': 'tenant',
                                                'name': 'acme'})
    tok = cred['token']
    assert apply(rest, THREE_TIER, token=tok)[0] == 201
    db_wire = wires(rest)[frozenset(('w11', 'd0'))]
    rest('PUT', '/v1/vnics/d0/tenant', {'tenant': 'globex'})
    [line] = rest('GET', '/v1/topologies', token=tok)[1]['topologies']
    assert sum(line['states'].values()) == 2, line
    shown = json.dumps(rest('GET', '/v1/topologies/shop', token=tok)[1])
    assert 'd0' not in shown and str(db_wire) not in shown
    status, out = rest('DELETE', '/v1/topologies/shop', token=tok)
    assert status == 200 and len(out['deleted']) == 2, out
    assert list(wires(rest).values()) == [db_wire]     # globex's now


def test_a_hypervisor_reports_guests_only_on_itself(rest):
    _s, cred = rest('POST', '/v1/credentials', {'role': 'hypervisor',
                                                'name': 'h2'})
    u = '%08x-0000-4000-8000-%012x' % (99, 99)
    status, out = rest('PUT', '/v1/guests/%s' % u,
                       guest('client', 'h1', 'c0'), token=cred['token'])
    assert status == 403 and 'hypervisor h2' in out['error']['message']
    # On itself it may report, but a vNIC plugged on another host is not
    # taken on its word: a file naming that guest is refused.
    status, _ = rest('PUT', '/v1/guests/%s' % u,
                     guest('client', 'h2', 'c0') | {'name': 'decoy'},
                     token=cred['token'])
    assert status == 200
    status, out = apply(rest, 'name: t\nnodes:\n  decoy: {nics: {eth0: null}}'
                        '\n  fw: {}\nlinks:\n  - endpoints: [decoy:eth0, '
                        'fw:eth0]\n', name='t')
    assert status == 422 and 'not plugged on its host h2' in \
        out['error']['message'], out


def test_the_schema_is_published_without_a_token(rest):
    status, doc = rest('GET', '/v1/topology.schema.json', token=None)
    assert status == 200 and doc['title'] == 'VirtualWire topology'


def test_a_hypervisor_cannot_take_over_another_hosts_guest_record(rest):
    """Issue 39, point 5: h1's hypervisor rewrote h2's guest `db` (by its
    UUID) onto h1 with h1's vNICs: a tenant's file naming `db` then wired
    h1's guest in its place."""
    _s, cred = rest('POST', '/v1/credentials', {'role': 'hypervisor',
                                                'name': 'h1'})
    status, out = rest('PUT', '/v1/guests/%s' % U['db'],
                       guest('db', 'h1', 'c0'), token=cred['token'])
    assert status == 403 and out['error']['message'] == (
        'guest %s (db) is on h2, and no migration to h1 nor its vNICs '
        'plugged there say it moved: hypervisor h1 may not replace its '
        'record' % U['db'])
    [db] = [g for g in rest('GET', '/v1/guests')[1]['guests']
            if g['uuid'] == U['db']]
    assert db['host'] == 'h2' and [n['vnic'] for n in db['nics']] == ['d0']
    # Once the guest has moved to h1 (its vNIC plugged there), h1 reports
    # it; so it may once a migration of it to h1 is announced.
    h = rest.h
    h.host('h2', ('w10', 1), ('w11', 2), ('w20', 3), ('o0', 5))
    h.host('h1', ('c0', 1), ('f0', 2), ('f1', 3), ('d0', 4))
    status, _ = rest('PUT', '/v1/guests/%s' % U['db'],
                     guest('db', 'h1', 'd0'), token=cred['token'])
    assert status == 200
    status, _ = rest('POST', '/v1/migrations', {
        'vm': 'other', 'vm_uuid': U['other'], 'vnics': ['o0'],
        'destination': 'h1'}, token=cred['token'])
    assert status == 201
    status, _ = rest('PUT', '/v1/guests/%s' % U['other'],
                     guest('other', 'h1', 'o0'), token=cred['token'])
    assert status == 200


def test_a_topology_over_the_tenants_quota_is_refused_and_changes_nothing(
        rest, monkeypatch):
    from virtualwire.api import topology_parsing
    monkeypatch.setattr(topology_parsing, 'MAX_TOPOLOGIES', 1)
    assert apply(rest, THREE_TIER)[0] == 201
    before = wires(rest)
    more = 'name: more\nnodes:\n  other: {nics: {eth0: null}}\n  web2: {}' \
        '\nlinks:\n  - endpoints: [other:eth0, web2:eth0]\n'
    status, out = apply(rest, more, name='more')
    assert status == 429 and out['error']['message'] == \
        'tenant (operator) holds 1 topologies: at most 1'
    assert wires(rest) == before
    assert [t['name'] for t in rest('GET', '/v1/topologies')[1][
        'topologies']] == ['shop']
    # A dry run stores nothing: not refused.
    assert apply(rest, more, name='more', dry=True)[0] == 200
