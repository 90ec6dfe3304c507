"""Our flow-mod bytes (southbound.flowmod_bytes) equal os-ken's for every
kind of flow the pipeline makes: plain and tunnelled wires over GRE and
Geneve, a migration's learn flows, gateways' VLAN tags, table misses; in
each command; and the bundle around them."""
import uuid

import pytest

from virtualwire.core.model import Wire
from virtualwire.pipeline import wire as fl
from virtualwire.pipeline.flow import FlowDiff
from virtualwire.southbound import flowmod_bytes, openflow
from virtualwire.testing.harness import Harness

from test_gateways import world as gateway_world


def harness_flows(carrier):
    h = Harness()
    h.carrier = carrier
    h.host('h1', ('a', 1), ('g', 2))
    h.host('h2', ('b', 3))
    h.host('h3', ('f', 5))
    h.connect('a', 'b')                       # tunnelled
    h.connect('g', 'f')
    h.host('h1', ('a', 1), ('g', 2), ('c', 4), ('d', 6))
    h.connect('c', 'd')                       # collapsed
    h.call(h.ctl.moves.announce_migration, {        # learn flows on the way
        'vm': 'guest', 'vm_uuid': str(uuid.uuid4()), 'vnics': ['g'],
        'destination': 'h2'})
    h.host('h2', ('b', 3), ('g', 7))
    return {f for name in h.fabric.switches
            for f in h.ctl.tables.table_map(name).values()}


def all_flows():
    flows = harness_flows('gre') | harness_flows('geneve')
    w = gateway_world([Wire(1, 'gw1/eth1/100', 'a'),
                       Wire(2, 'gw1/eth2', 'b'),
                       Wire(3, 'gw1/eth1/200', 'gw1/eth1/300')])
    for table in fl.compute_flows(w).values():
        flows |= set(table)
    return sorted(flows, key=str)


FLOWS = all_flows()


def test_the_flows_cover_every_kind():
    actions = {a[0] for f in FLOWS for a in f.actions}
    fields = {k for f in FLOWS for k, _ in f.match}
    assert {'output', 'set_field', 'learn', 'push_vlan',
            'pop_vlan'} <= actions, actions
    assert {'in_port', 'tunnel_id', 'tun_ipv4_src', 'vlan_vid'} <= fields
    assert any(not f.actions for f in FLOWS), 'a drop (table miss)'
    assert any(k.startswith('tun_metadata') for k in fields), 'Geneve'


@pytest.mark.parametrize('command', ['add', 'modify', 'delete'])
def test_each_flow_mod_is_byte_for_byte_os_kens(command):
    for f in FLOWS:
        ours = flowmod_bytes.BundleAdd(openflow.PROTO, 7, 1,
                                       flowmod_bytes.flow_mod_body(f,
                                                                   command))
        theirs = openflow.bundle(7, [openflow.flow_mod(f, command)])[1]
        for m in (ours, theirs):
            m.set_xid(42)
            m.serialize()
        assert bytes(ours.buf) == bytes(theirs.buf), (command, str(f))


def test_a_diff_is_the_same_bundle_as_before():
    diff = FlowDiff(add=FLOWS[:10], modify=FLOWS[10:13],
                    delete=FLOWS[13:20])
    ours = flowmod_bytes.diff_bundle(3, diff)
    theirs = openflow.bundle(3, openflow.diff_messages(diff))
    assert len(ours) == len(theirs) == 2 + 20
    for i, (a, b) in enumerate(zip(ours, theirs)):
        for m in (a, b):
            m.set_xid(100 + i)
            m.serialize()
        assert bytes(a.buf) == bytes(b.buf), i
