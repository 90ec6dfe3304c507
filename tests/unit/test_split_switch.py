"""A split provider switch (issue 41; the paper's 3.5) on the fake fabric:
the operator splits switch `web` (4 VMs on 3 hosts) so each port lives on
its VM's host, joined by a mesh of wires. What a user checks: a
broadcast reaches every other VM once and crosses to each other part
once; no frame loops; once learned, unicast crosses only the link to
its MAC's part; the VMs' wires are collapsed; joined again it is one
switch. Across sites, each part is joined to one part of every other
site (`layout`), so a flood crosses to each site once."""
import json

import pytest
import webob

from virtualwire.api.rest import RestApi
from virtualwire.core import ids
from virtualwire.core.switches import ProviderSwitch
from virtualwire.pipeline.switch import MESH_BASE, layout, mesh_links
from virtualwire.pipeline.tables import SWITCH_IN, WIRE
from switch_lan import BROADCAST, hosts, mac, send



@pytest.fixture
def api():
    h = hosts()
    shop = h.intent.credentials.issue('tenant', 'shop')[0]
    rest = RestApi(h.loop, h.ctl, h.intent, h.runtime, 't')

    def call(method, path, body=None, token='t'):
        req = webob.Request.blank(path, method=method)
        req.headers['Authorization'] = 'Bearer %s' % token
        if body is not None:
            req.body = json.dumps(body).encode()
        resp = req.get_response(rest)
        h.settle()
        return resp.status_int, (resp.json if resp.body else None)
    call.h, call.shop = h, shop
    assert call('POST', '/v1/switches', {'name': 'web', 'ports': 4,
                                         'tenant': 'shop',
                                         'host': 'h1'})[0] == 201
    for i, v in enumerate('abcd', 1):
        assert call('POST', '/v1/wires', {'a': v,
                                          'b': 'sw:web/p%d' % i})[0] == 201
    return call


def mesh_in(h):
    """{host: frames that arrived over the switch's mesh}."""
    cookie = ids.switch_cookie(1)
    return {n: sum(f.packets for f in sw.table.values()
                   if f.table_id == WIRE.id and f.cookie == cookie)
            for n, sw in sorted(h.fabric.switches.items())}


def parts_on(h):
    return sorted(n for n, sw in h.fabric.switches.items()
                  if any(f.table_id == SWITCH_IN.id
                         for f in sw.table.values()))


def test_a_split_switch_floods_once_per_part_and_never_loops(api):
    h = api.h
    st, view = api('PUT', '/v1/switches/web/parts', {'auto': True})
    assert st == 200 and view['split'], view
    assert view['parts'] == ['h1', 'h2', 'h3']
    assert [p['part'] for p in view['ports']] == ['h1', 'h1', 'h2', 'h3']
    assert parts_on(h) == ['h1', 'h2', 'h3']
    states = {w['b']: w['state'] for w in api('GET', '/v1/wires')[1][
        'wires']}
    assert set(states.values()) == {'collapsed'}, states
    before = mesh_in(h)
    assert send(h, 'a', BROADCAST) == [('h1', 2), ('h2', 3), ('h3', 4)]
    after = mesh_in(h)
    assert {n: after[n] - before[n] for n in after} == \
        {'h1': 0, 'h2': 1, 'h3': 1}, 'one copy to each other part'
    assert send(h, 'c', BROADCAST) == [('h1', 1), ('h1', 2), ('h3', 4)]
    send(h, 'b', BROADCAST)
    send(h, 'd', BROADCAST)
    # Learned: c to d crosses only the h2 - h3 link.
    before = mesh_in(h)
    assert send(h, 'c', mac('d')) == [('h3', 4)]
    after = mesh_in(h)
    assert {n: after[n] - before[n] for n in after} == \
        {'h1': 0, 'h2': 0, 'h3': 1}
    # Joined again: one switch on h1.
    st, view = api('PUT', '/v1/switches/web/parts', {'parts': {}})
    assert st == 200 and not view['split']
    h.tick(1.0)
    assert parts_on(h) == ['h1']
    assert send(h, 'd', BROADCAST) == [('h1', 1), ('h1', 2), ('h2', 3)]


def test_a_tenant_asks_for_parts_but_the_cloud_says_where(api):
    st, err = api('PUT', '/v1/switches/web/parts', {'parts': {'p3': 'h2'}},
                  token=api.shop)
    assert st == 403 and "cloud's choice" in err['error']['message'], err
    assert not api.h.intent.switches.get('web').split
    st, view = api('PUT', '/v1/switches/web/parts', {'auto': True},
                   token=api.shop)
    assert st == 200 and view['split'], view
    assert 'parts' not in view and 'part' not in view['ports'][0], view
    assert api.h.intent.switches.get('web').part_hosts() == (
        'h1', 'h2', 'h3')


def test_a_bad_split_says_what_is_wrong_and_changes_nothing(api):
    for body, status, words in (
            ({'parts': {'p9': 'h2'}}, 404, 'has no port p9'),
            ({'parts': {'p1': 'Bad Host'}}, 422, 'host must be'),
            ({'auto': False}, 400, 'body must be'),
            ({'parts': {}, 'auto': True}, 400, 'body must be')):
        st, err = api('PUT', '/v1/switches/web/parts', body)
        assert st == status and words in err['error']['message'], err
    assert not api.h.intent.switches.get('web').split


def sw(parts=()):
    return ProviderSwitch('lan', 't', 7, 'a1', ('p1', 'p2', 'p3', 'p4'),
                          parts=parts)


def test_across_sites_each_part_meets_one_part_of_every_other_site():
    s = sw((('p2', 'a2'), ('p3', 'b1'), ('p4', 'b2')))
    sites = {'a1': 'A', 'a2': 'A', 'b1': 'B', 'b2': 'B'}
    parts = layout(s, sites)
    pos = {h: MESH_BASE + i for i, h in enumerate(sorted(sites))}
    # a2 meets a1 in its site and b1 (B's first part) across.
    assert parts['a2'].mesh == {pos['a1']}
    assert parts['a2'].inter == parts['a2'].reps == {pos['b1']}
    # a1, A's first part, meets every part of B; floods go to b1 only.
    assert parts['a1'].inter == {pos['b1'], pos['b2']}
    assert parts['a1'].reps == {pos['b1']}
    links = {(a.split('~')[1], b.split('~')[1])
             for _cid, a, b in mesh_links(s, sites)}
    assert links == {('a1', 'a2'), ('b1', 'b2'), ('a1', 'b1'),
                     ('a1', 'b2'), ('a2', 'b1')}
    cids = [c for c, _a, _b in mesh_links(s, sites)]
    assert all(c >= ids.MESH_CONNECTOR_BASE for c in cids)
    assert len(set(cids)) == len(cids)
