"""Flow-stats entries decode their instructions only when read
(southbound.lazy_stats): a reply a real switch would send, parsed the
way os-ken's receive loop parses it, gives every field os-ken's own
parser gives (instructions included, on access), and reading only the
key, cookie and counters decodes no instruction."""
import struct

from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_4 as ofp
from os_ken.ofproto import ofproto_v1_4_parser as parser

from virtualwire.pipeline.flow import Flow
from virtualwire.southbound import counter_keys, lazy_stats, openflow


def _reply_bytes(flows):
    """A serialized OFPMP_FLOW reply holding `flows` (Flow values), with
    counters, as a switch sends it."""
    body = b''
    for i, f in enumerate(flows):
        mod = openflow.flow_mod(f, 'add')
        mod.serialize()
        match = mod.match
        mbuf = bytearray()
        mlen = match.serialize(mbuf, 0)
        insts = bytearray()
        for inst in mod.instructions:
            inst.serialize(insts, len(insts))
        head = struct.pack(ofp.OFP_FLOW_STATS_0_PACK_STR,
                           ofp.OFP_FLOW_STATS_0_SIZE + len(mbuf) + len(insts),
                           f.table, 5, 6, f.priority, 0, 0, 0, 0, f.cookie,
                           100 + i, 1000 + i)
        assert mlen <= len(mbuf)
        body += head + bytes(mbuf) + bytes(insts)
    hdr = struct.pack('!BBHI', ofp.OFP_VERSION, ofp.OFPT_MULTIPART_REPLY,
                      8 + 8 + len(body), 7)
    return hdr + struct.pack('!HH4x', ofp.OFPMP_FLOW, 0) + body


class _Dp:
    ofproto, ofproto_parser = ofp, parser


FLOWS = [Flow(0, 100, (('in_port', 3),),
              (('set_field', 'tunnel_id', 7),
               ('set_field', 'tun_ipv4_dst', '198.19.0.2'), ('output', 9)),
              cookie=0x1_0000_0007),
         Flow(0, 90, (('in_port', 9), ('tunnel_id', 7)), (('output', 3),),
              cookie=0x2_0000_0007),
         Flow(0, 0, (), ())]


def _parse(raw):
    v, t, n, x = struct.unpack_from('!BBHI', raw)
    return ofproto_parser.msg(_Dp(), v, t, n, x, raw)


def test_a_dump_reads_every_field_as_os_ken_would():
    lazy_stats.install()
    msg = _parse(_reply_bytes(FLOWS))
    got = {openflow.flow_from_stats(st) for st in msg.body}
    assert got == set(FLOWS)
    assert [(st.packet_count, st.byte_count) for st in msg.body] == \
        [(100, 1000), (101, 1001), (102, 1002)]


def test_reading_counters_decodes_no_instruction(monkeypatch):
    lazy_stats.install()
    calls = []
    real = parser.OFPInstruction.parser
    monkeypatch.setattr(parser.OFPInstruction, 'parser',
                        staticmethod(lambda *a: calls.append(1) or real(*a)))
    msg = _parse(_reply_bytes(FLOWS))
    keys = [(openflow.flow_key(st), st.cookie, st.packet_count)
            for st in msg.body]
    assert len(keys) == 3 and calls == []
    assert msg.body[0].instructions and len(calls) >= 1


def _removed_bytes(f, packets):
    """A serialized OFPT_FLOW_REMOVED of flow `f`, as a switch sends it."""
    mbuf = bytearray()
    openflow.flow_mod(f, 'add').match.serialize(mbuf, 0)
    body = struct.pack('!QHBBIIHHQQ', f.cookie, f.priority,
                       ofp.OFPRR_DELETE, f.table, 1, 0, 0, 0, packets,
                       packets * 10) + bytes(mbuf)
    return struct.pack('!BBHI', ofp.OFP_VERSION, ofp.OFPT_FLOW_REMOVED,
                       8 + len(body), 9) + body


def test_a_flow_has_one_counter_key_in_stats_and_when_removed():
    """The collector follows a flow's counters by its encoded match and
    credits its final count from the flow-removed message: both must name
    the flow alike, and no match is decoded to read the key."""
    lazy_stats.install()
    stats = _parse(_reply_bytes(FLOWS)).body
    assert all(lazy_stats.raw_match(st) is not None for st in stats)
    keys = [counter_keys.counter_key(st) for st in stats]
    assert all(lazy_stats.raw_match(st) is not None for st in stats), \
        'reading the key decoded the match'
    assert len(set(keys)) == 3
    for f, st, key in zip(FLOWS, stats, keys):
        removed = _parse(_removed_bytes(f, 5))
        assert isinstance(removed, parser.OFPFlowRemoved)
        assert counter_keys.counter_key(removed) == key
        # The tuple form older counter bases were saved with.
        assert counter_keys.decoded(key) == f.key == openflow.flow_key(st)
    # A table dump decodes every entry before the collector keys it: the
    # key is still the switch's encoding, as in a reading that decoded
    # nothing (else each reconnect would credit every count again).
    dumped = _parse(_reply_bytes(FLOWS)).body
    assert {openflow.flow_from_stats(st) for st in dumped} == set(FLOWS)
    assert all(lazy_stats.raw_match(st) is not None for st in dumped)
    assert [counter_keys.counter_key(st) for st in dumped] == keys
    # Messages built in memory (the fake switch) key alike too.
    built = parser.OFPFlowStats(table_id=0, priority=90,
                                match=parser.OFPMatch(in_port=9, tunnel_id=7))
    assert counter_keys.counter_key(built) == keys[1]
