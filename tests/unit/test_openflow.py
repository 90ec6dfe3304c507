"""OpenFlow messages are built without a switch and are what a switch
receives: each serializes to valid OpenFlow 1.4 bytes that os-ken's own
parser reads back to the same flow."""
import struct

import pytest
from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_4 as ofp

from virtualwire.core import ids
from virtualwire.pipeline.flow import Flow, FlowDiff, make_flow
from virtualwire.pipeline.tables import WIRE, PipelineError, check
from virtualwire.southbound import openflow

COOKIE = ids.wire_cookie(0xFFFFFFFF)
FLOWS = {
    'encap': make_flow(WIRE, 'wire', {'in_port': 1}, [
        ('set_field', 'tunnel_id', 0xFFFFFFFF),
        ('set_field', 'tun_ipv4_dst', '198.19.0.2'), ('output', 65000)],
        COOKIE),
    'decap': make_flow(WIRE, 'wire', {'in_port': 65000,
                                      'tunnel_id': 0xFFFFFFFF,
                                      'tun_ipv4_src': '198.19.0.2'},
                       [('output', 1)], COOKIE),
    'activate': make_flow(WIRE, 'activate', {'in_port': 2}, [
        ('learn', 100, COOKIE, (('in_port', 65000),
                                ('tun_ipv4_src', '198.19.0.3'),
                                ('tunnel_id', 0xFFFFFFFF)), 2),
        ('output', 0xfffffffd)], COOKIE),
    # A guest's activation flow learning for its other vNIC too (port 4).
    'activate-guest': make_flow(WIRE, 'activate', {'in_port': 2}, [
        ('learn', 100, COOKIE, (('in_port', 65000),
                                ('tun_ipv4_src', '198.19.0.3'),
                                ('tunnel_id', 0xFFFFFFFF)), 2),
        ('learn', 100, ids.wire_cookie(7), (('in_port', 65000),
                                            ('tun_ipv4_src', '198.19.0.3'),
                                            ('tunnel_id', 7)), 4),
        ('output', 0xfffffffd)], COOKIE),
    'miss': make_flow(WIRE, 'miss', {}, [], ids.wire_cookie(0)),
}


def _parse(buf):
    version, msg_type, length, xid = struct.unpack_from('!BBHI', buf)
    assert (version, length) == (ofp.OFP_VERSION, len(buf))
    return ofproto_parser.msg(None, version, msg_type, length, xid, buf)


class _Stat:
    """What a flow-stats reply entry carries, from a parsed flow mod."""

    def __init__(self, mod):
        self.table_id, self.priority = mod.table_id, mod.priority
        self.match, self.instructions = mod.match, mod.instructions
        self.cookie = mod.cookie


@pytest.mark.parametrize('name', sorted(FLOWS))
def test_flow_mod_bytes_parse_back_to_the_same_flow(name):
    flow = FLOWS[name]
    for command in ('add', 'modify'):
        mod = _parse(openflow.to_bytes(openflow.flow_mod(flow, command)))
        assert type(mod).__name__ == 'OFPFlowMod'
        assert openflow.flow_from_stats(_Stat(mod)) == flow
    delete = _parse(openflow.to_bytes(openflow.flow_mod(flow, 'delete')))
    assert delete.command == ofp.OFPFC_DELETE_STRICT
    assert (delete.cookie, delete.cookie_mask) == (flow.cookie, 2 ** 64 - 1)


def test_a_diff_is_one_atomic_bundle_deletes_first():
    diff = FlowDiff(add=[FLOWS['encap']], modify=[FLOWS['decap']],
                    delete=[FLOWS['activate']])
    msgs = openflow.bundle(7, openflow.diff_messages(diff))
    kinds = [type(m).__name__ for m in msgs]
    assert kinds == ['OFPBundleCtrlMsg'] + ['OFPBundleAddMsg'] * 3 + \
        ['OFPBundleCtrlMsg']
    opened, committed = (_parse(openflow.to_bytes(m)) for m in
                         (msgs[0], msgs[-1]))
    assert (opened.type, committed.type) == (ofp.OFPBCT_OPEN_REQUEST,
                                             ofp.OFPBCT_COMMIT_REQUEST)
    assert opened.flags & ofp.OFPBF_ATOMIC and opened.bundle_id == 7
    inner = []
    for m in msgs[1:-1]:
        buf = openflow.to_bytes(m)
        bundle_id, = struct.unpack_from('!I', buf, 8)
        assert bundle_id == 7
        inner.append(_parse(buf[16:16 + struct.unpack_from('!H', buf,
                                                           18)[0]]))
    assert [m.command for m in inner] == [ofp.OFPFC_DELETE_STRICT,
                                          ofp.OFPFC_ADD,
                                          ofp.OFPFC_MODIFY_STRICT]


def test_stats_request_and_barrier_need_no_switch():
    req = openflow.flow_stats_request(COOKIE, 2 ** 64 - 1)
    buf = openflow.to_bytes(req)
    assert buf[1] == ofp.OFPT_MULTIPART_REQUEST and len(buf) > 16
    assert openflow.to_bytes(openflow.barrier())[1] == \
        ofp.OFPT_BARRIER_REQUEST


def test_foreign_actions_decode_as_other_so_the_diff_replaces_them():
    from os_ken.ofproto import ofproto_v1_4_parser as p
    mod = p.OFPFlowMod(openflow.PROTO, cookie=COOKIE, table_id=0,
                       priority=100, match=p.OFPMatch(in_port=1),
                       instructions=[p.OFPInstructionActions(
                           ofp.OFPIT_APPLY_ACTIONS,
                           [p.OFPActionDecNwTtl(), p.OFPActionOutput(2)])])
    got = openflow.flow_from_stats(_Stat(_parse(openflow.to_bytes(mod))))
    assert got.actions[0][0] == 'other' and got.actions[1] == ('output', 2)


@pytest.mark.parametrize('flow,words', [
    (Flow(9, 100, (), (), COOKIE), 'undeclared table'),
    (Flow(0, 55, (), (), COOKIE), 'priority 55'),
    (Flow(0, 100, (('ip_dscp', 1),), (), COOKIE), 'match on ip_dscp'),
    (Flow(0, 100, (), (('group', 1),), COOKIE), 'action group'),
    (Flow(0, 100, (), (), 0x1234), 'no declared space'),
    (Flow(0, 110, (), (('learn', 100, COOKIE + 1, (), 2),), COOKIE),
     'keep its wire cookie'),
    (Flow(0, 110, (), (('learn', 100, COOKIE, ()),), COOKIE),
     'priority, cookie, match, port'),
    (Flow(0, 110, (), (('learn', 100, COOKIE, (), 0xfffffffd),), COOKIE),
     'outputs to a port'),
    (Flow(0, 110, (), (('learn', 100, COOKIE, (('vlan_vid', 5),), 2),),
          COOKIE), 'learn cannot match vlan_vid'),
])
def test_the_pipeline_refuses_flows_it_does_not_declare(flow, words):
    with pytest.raises(PipelineError, match=words):
        check(flow)
