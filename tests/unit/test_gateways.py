"""Gateway ends on a fake fabric and through the REST layer: a gateway's
whole physical port, or one VLAN on its trunk port, wired to a vNIC;
frames are tagged and untagged at the trunk, VLANs stay apart, and bad
ends are refused with what is wrong, changing nothing."""
import json

import pytest
import webob

from virtualwire.api.rest import RestApi
from virtualwire.core import ids
from virtualwire.core.errors import Invalid
from virtualwire.core.model import (GATEWAY, Encap, GatewayPort, Host,
                                    VnicPort, Wire)
from virtualwire.core.world import World
from virtualwire.pipeline import flow as pf
from virtualwire.pipeline import wire as fl
from virtualwire.testing.fakeswitch import FakeFabric
from virtualwire.testing.harness import Harness

TUN, TRUNK, WHOLE = 65000, 7, 8


def world(wires):
    gw = Host('gw1', 9, (Encap('gre', '198.19.0.9', TUN),), role=GATEWAY,
              ports=(GatewayPort('eth1', TRUNK), GatewayPort('eth2', WHOLE)))
    h1 = Host('h1', 1, (Encap('gre', '198.19.0.1', TUN),),
              vnics=tuple(VnicPort(v, 'vnet%d' % p, p)
                          for v, p in (('a', 1), ('b', 2), ('c', 3))))
    return World(wires={w.connector_id: w for w in wires},
                 hosts={'gw1': gw, 'h1': h1})


def fabric(w):
    fab = FakeFabric()
    for h in w.hosts.values():
        fab.add(h.name, h.dpid, {TUN: h.tunnel_ip})
    for name, sw in fab.switches.items():
        sw.apply(pf.diff_flows(sw.flows(), fl.compute_flows(w)[name]))
    return fab


def out(fab, host, port, vlan=None):
    return [(h, p, pkt.vlan_vid) for h, p, pkt in
            fab.send(host, port, vlan_vid=vlan)]


def test_a_vlan_on_a_trunk_is_tagged_and_untagged_at_the_trunk():
    w = world([Wire(1, 'a', 'gw1/eth1/100'), Wire(2, 'b', 'gw1/eth1/200')])
    fab = fabric(w)
    # From the physical network, tagged 100: to a, untagged.
    assert out(fab, 'gw1', TRUNK, 100) == [('h1', 1, None)]
    # From a: onto the trunk, tagged 100.
    assert out(fab, 'h1', 1) == [('gw1', TRUNK, 100)]
    # VLAN 200 is b's, and nothing else crosses: untagged or unwired VLANs.
    assert out(fab, 'gw1', TRUNK, 200) == [('h1', 2, None)]
    assert out(fab, 'gw1', TRUNK, None) == []
    assert out(fab, 'gw1', TRUNK, 300) == []
    assert fl.wire_state(w.wires[1], w.hosts, {
        'a': w.locations()['a'],
        'gw1/eth1/100': fl.gateway_location('gw1/eth1/100', w.hosts)}) == \
        fl.TUNNELLED


def test_a_whole_port_passes_every_frame_unchanged():
    fab = fabric(world([Wire(3, 'c', 'gw1/eth2')]))
    assert out(fab, 'gw1', WHOLE, 7) == [('h1', 3, 7)]
    assert out(fab, 'gw1', WHOLE, None) == [('h1', 3, None)]
    assert out(fab, 'h1', 3, 42) == [('gw1', WHOLE, 42)]


def test_two_vlans_of_one_trunk_wired_to_each_other_hairpin():
    fab = fabric(world([Wire(4, 'gw1/eth1/10', 'gw1/eth1/20')]))
    assert out(fab, 'gw1', TRUNK, 10) == [('gw1', TRUNK, 20)]
    assert out(fab, 'gw1', TRUNK, 20) == [('gw1', TRUNK, 10)]


def test_an_end_on_a_missing_port_is_pending():
    w = world([Wire(5, 'a', 'gw1/eth9/5')])
    assert fl.gateway_location('gw1/eth9/5', w.hosts) is None
    assert all(not pf.of_wires(t) for t in fl.compute_flows(w).values())


@pytest.mark.parametrize('bad,words', [
    ('gw1/eth1/0', 'VLAN must be 1-4094'),
    ('gw1/eth1/4095', 'VLAN must be 1-4094'),
    ('gw1/eth1/x', 'HOST/PORT or HOST/PORT/VLAN'),
    ('gw1//5', 'HOST/PORT or HOST/PORT/VLAN'),
    ('gw1/a-port-name-too-long', 'HOST/PORT or HOST/PORT/VLAN'),
])
def test_malformed_gateway_ends(bad, words):
    with pytest.raises(Invalid, match=words):
        ids.check_wire_ends('a', bad)


@pytest.fixture
def rest():
    h = Harness()
    h.host('h1', ('a', 1), ('b', 2), ('c', 3))
    h.loop.post(h.ctl.on_hosts, 'tcp:gw1', [
        Host('gw1', 9, (Encap('gre', '198.19.0.9', TUN),), role=GATEWAY,
             ports=(GatewayPort('eth1', TRUNK), GatewayPort('eth2', WHOLE)))])
    h.settle()
    api = RestApi(h.loop, h.ctl, h.intent, h.runtime, 't')

    def call(body):
        req = webob.Request.blank('/v1/wires', method='POST')
        req.headers['Authorization'] = 'Bearer t'
        req.body = json.dumps(body).encode()
        resp = req.get_response(api)
        h.settle()
        return resp.status_int, resp.json
    call.h = h
    return call


def test_rest_wires_a_vlan_end(rest):
    status, w = rest({'a': 'a', 'b': 'gw1/eth1/100'})
    assert status == 201 and w['state'] == 'tunnelled', w
    assert w['path'] == ['h1', 'gw1']


@pytest.mark.parametrize('first,body,status,words', [
    (None, {'a': 'a', 'b': 'gw9/eth1/100'}, 404, 'no gateway named gw9'),
    (None, {'a': 'a', 'b': 'h1/eth1'}, 422, 'h1 is not a gateway'),
    (None, {'a': 'a', 'b': 'gw1/eth9/100'}, 404, 'no port eth9'),
    (None, {'a': 'a', 'b': 'gw1/eth1/5000'}, 422, 'VLAN must be'),
    ({'a': 'a', 'b': 'gw1/eth1/100'}, {'a': 'b', 'b': 'gw1/eth1/100'}, 409,
     'already wired'),
    ({'a': 'a', 'b': 'gw1/eth1/100'}, {'a': 'b', 'b': 'gw1/eth1'}, 409,
     'wired by VLAN 100'),
    ({'a': 'a', 'b': 'gw1/eth2'}, {'a': 'b', 'b': 'gw1/eth2/7'}, 409,
     'wired as a whole'),
])
def test_bad_gateway_ends_are_refused_and_change_nothing(rest, first, body,
                                                          status, words):
    if first:
        assert rest(first)[0] == 201
    before = dict(rest.h.intent.rows)
    got, err = rest(body)
    assert got == status and words in err['error']['message'], err
    assert rest.h.intent.rows == before
