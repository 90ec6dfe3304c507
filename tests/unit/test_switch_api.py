"""Provider switches through the REST layer and the controller, on the
fake fabric (issue 41): a switch is made, vNICs on three hosts are wired
to its ports, and frames go where a switch sends them; a switch joins
only its tenant's vNICs; a tenant makes and sees only its own and never
names or sees a host; bad requests say what is wrong and change
nothing."""
import json

import pytest
import webob

from virtualwire.api.rest import RestApi
from virtualwire.pipeline.tables import SWITCH_IN, SWITCH_MAC
from virtualwire.testing.fakeswitch import Packet
from virtualwire.testing.harness import Harness

BROADCAST = 'ff:ff:ff:ff:ff:ff'
# vNIC: (host, ofport)
VNICS = {'a': ('h1', 1), 'b': ('h1', 2), 'c': ('h2', 3), 'd': ('h3', 4)}


def mac(v):
    return '02:00:00:00:00:%02x' % (ord(v) - ord('a') + 1)


@pytest.fixture
def api():
    h = Harness()
    for name in ('h1', 'h2', 'h3'):
        h.host(name, *[(v, p) for v, (n, p) in VNICS.items() if n == name])
    h.host('h1', ('a', 1), ('b', 2), ('x', 9))
    for v in VNICS:
        h.intent.ownership.assign(v, 'shop')
    h.intent.ownership.assign('x', 'rival')
    tokens = {'t': None}
    for tenant in ('shop', 'rival'):
        tokens[tenant] = h.intent.credentials.issue('tenant', tenant)[0]
    rest = RestApi(h.loop, h.ctl, h.intent, h.runtime, 't')

    def call(method, path, body=None, as_=None, settle=True):
        req = webob.Request.blank(path, method=method)
        req.headers['Authorization'] = 'Bearer %s' % (
            tokens[as_] if as_ else 't')
        if body is not None:
            req.body = json.dumps(body).encode()
        resp = req.get_response(rest)
        if settle:
            h.settle()
        return resp.status_int, (resp.json if resp.body else None)
    call.h = h
    return call


def switch_flows_on(h, host):
    return [f for f in h.fabric.switches[host].flows()
            if f.table == SWITCH_IN.id]


def send(h, v, dst, src=None):
    host, port = VNICS[v]
    return sorted((n, p) for n, p, _ in h.fabric.send(
        host, port, forged=Packet(port, eth_src=src or mac(v), eth_dst=dst)))


def show(api, name):
    """GET the switch with its figures: the switch answers the read, so
    the loop and the switches run on threads of their own, as in
    production."""
    stop = api.h.run_threads()
    try:
        st, view = api('GET', '/v1/switches/%s' % name, settle=False)
    finally:
        stop()
    assert st == 200 and 'figures_error' not in view, view
    return view


def wired(api):
    st, sw = api('POST', '/v1/switches', {'name': 'web', 'ports': 4,
                                          'tenant': 'shop', 'host': 'h1'})
    assert st == 201, sw
    for i, v in enumerate('abcd', 1):
        st, w = api('POST', '/v1/wires', {'a': v, 'b': 'sw:web/p%d' % i})
        assert st == 201, w
    return sw


def test_vnics_on_three_hosts_switch_through_a_provider_switch(api):
    sw = wired(api)
    assert sw['host'] == 'h1' and sw['number'] == 1 and sw['placed']
    assert switch_flows_on(api.h, 'h1') and \
        not switch_flows_on(api.h, 'h2')
    # A broadcast reaches every other vNIC once, never its sender.
    assert send(api.h, 'c', BROADCAST) == [('h1', 1), ('h1', 2), ('h3', 4)]
    # a was unknown: flooded; once a has spoken, only a gets c's frames.
    assert send(api.h, 'a', mac('c')) == [('h2', 3)]
    assert send(api.h, 'd', mac('a')) == [('h1', 1)]
    view = show(api, 'web')
    assert [(p['name'], p['peer'], p['peer_host']) for p in view['ports']] \
        == [('p1', 'a', 'h1'), ('p2', 'b', 'h1'), ('p3', 'c', 'h2'),
            ('p4', 'd', 'h3')]


def test_a_switch_joins_only_its_tenants_vnics(api):
    wired(api)
    api('DELETE', '/v1/wires/%d' % api.h.intent.taken_by(['a'])['a'])
    before = api.h.intent.wires()
    st, err = api('POST', '/v1/wires', {'a': 'x', 'b': 'sw:web/p1'})
    assert st == 403 and 'not a vNIC of tenant shop' in \
        err['error']['message'], err
    # The rival tenant cannot even see the switch's port.
    st, err = api('POST', '/v1/wires', {'a': 'x', 'b': 'sw:web/p1'},
                  as_='rival')
    assert st == 404, err
    st, _ = api('GET', '/v1/switches/web', as_='rival')
    assert st == 404
    assert api.h.intent.wires() == before


def test_a_tenant_makes_its_own_switch_where_its_vnics_are(api):
    st, err = api('POST', '/v1/switches', {'name': 'lan', 'ports': 2,
                                           'host': 'h2'}, as_='shop')
    assert st == 403 and 'host' in err['error']['message'], err
    st, sw = api('POST', '/v1/switches', {'name': 'lan', 'ports': ['up',
                                                                   'down']},
                 as_='shop')
    assert st == 201, sw
    assert 'host' not in sw and sw['tenant'] == 'shop'
    # Two of shop's four vNICs are on h1.
    assert api.h.intent.switches.get('lan').host == 'h1'
    st, seen = api('GET', '/v1/switches', as_='rival')
    assert st == 200 and seen == {'switches': []}
    st, mine = api('GET', '/v1/switches', as_='shop')
    assert [s['name'] for s in mine['switches']] == ['lan']


@pytest.mark.parametrize('body,status,words', [
    ({'name': 'Web', 'ports': 2, 'tenant': 'shop'}, 422, 'switch name'),
    ({'name': 'web', 'ports': 0, 'tenant': 'shop'}, 422, 'ports: 1-254'),
    ({'name': 'web', 'ports': ['a', 'a'], 'tenant': 'shop'}, 422,
     'names a port twice'),
    ({'name': 'web', 'ports': 2}, 400, 'missing field: tenant'),
    ({'name': 'web', 'ports': 2, 'tenant': 'shop', 'colour': 1}, 400,
     'unknown field(s): colour'),
    ({'name': 'web', 'ports': 2, 'tenant': 'shop', 'mac_limit': 0}, 422,
     'mac_limit'),
    ({'name': 'web', 'ports': 2, 'tenant': 'nobody'}, 422,
     'no vNIC of this tenant'),
])
def test_bad_switches_are_refused_and_change_nothing(api, body, status,
                                                     words):
    st, err = api('POST', '/v1/switches', body)
    assert st == status and words in err['error']['message'], err
    assert api.h.intent.switches.switches() == {}


def test_bad_ends_and_deletes_say_what_is_wrong(api):
    wired(api)
    st, err = api('POST', '/v1/switches', {'name': 'web', 'ports': 1,
                                           'tenant': 'shop', 'host': 'h2'})
    assert st == 409 and 'exists' in err['error']['message']
    for end, words in (('sw:web/p9', 'has no port p9'),
                       ('sw:nope/p1', 'no switch named nope'),
                       ('sw:WEB/p1', 'a switch end is')):
        st, err = api('POST', '/v1/wires', {'a': 'x', 'b': end})
        assert words in err['error']['message'], (end, err)
    st, err = api('DELETE', '/v1/switches/web')
    assert st == 409 and '4 wire(s)' in err['error']['message'], err
    assert switch_flows_on(api.h, 'h1')
    for v in 'abcd':
        api('DELETE', '/v1/wires/%d' % api.h.intent.taken_by([v])[v])
    assert api('DELETE', '/v1/switches/web')[0] == 204
    assert not switch_flows_on(api.h, 'h1')
    assert api('GET', '/v1/switches/web')[0] == 404


def test_a_switch_placed_elsewhere_takes_its_wires_along(api):
    wired(api)
    st, view = api('PUT', '/v1/switches/web/host', {'host': 'h3'})
    assert st == 200 and view['host'] == 'h3', view
    assert switch_flows_on(api.h, 'h3')
    assert send(api.h, 'c', BROADCAST) == [('h1', 1), ('h1', 2), ('h3', 4)]
    api.h.tick(1.0)              # the old host drained (switch_moves)
    assert not switch_flows_on(api.h, 'h1')
    st, err = api('PUT', '/v1/switches/web/host', {'host': 'h3'},
                  as_='shop')
    assert st == 403, err


def test_show_counts_each_port_and_lists_its_macs(api):
    wired(api)
    send(api.h, 'c', BROADCAST)
    send(api.h, 'a', mac('c'))
    send(api.h, 'a', mac('c'))
    view = show(api, 'web')
    ports = {p['name']: p for p in view['ports']}
    assert ports['p3']['entered_packets'] == 1
    assert ports['p3']['flooded_packets'] == 1
    assert ports['p1']['entered_packets'] == 2
    assert ports['p1']['flooded_packets'] == 0       # c was learned
    assert ports['p1']['macs'] == [mac('a')]
    assert ports['p3']['macs'] == [mac('c')]
    assert ports['p2']['macs'] == []


def test_a_switch_that_leaves_a_host_takes_its_macs_with_it(api):
    wired(api)
    send(api.h, 'a', BROADCAST)

    def macs(host):
        return sorted((dict(f.match)['eth_dst'], f.actions) for f in
                      api.h.fabric.switches[host].flows()
                      if f.table == SWITCH_MAC.id)
    assert macs('h1') == [(mac('a'), (('set_field', 'reg6', 1),))]
    api('PUT', '/v1/switches/web/host', {'host': 'h2'})
    assert macs('h2') == macs('h1'), 'carried to its new host'
    api.h.tick(1.0)
    assert macs('h1') == [], 'none left behind once drained'
    # Carried, a's MAC is known: a frame to it goes to a alone.
    assert send(api.h, 'c', mac('a')) == [('h1', 1)]
