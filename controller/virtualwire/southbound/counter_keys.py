"""The key a collector follows a flow's counters by: its table, priority
and match as the switch encoded them, as bytes.

A decoded key (a tuple of field pairs) was about 300 B a flow in the
collector, 120 MB at 400,000 flows, and decoding every match of every
reading was most of a reading's CPU. The encoded match is what the
switch sends in both places a flow's counters come from: a flow-stats
entry and a flow-removed message (OVS writes both with
ofputil_put_ofp11_match, so one flow gives the same bytes in each).
A message built in memory (the fake switch) has no encoding of its own:
its match is encoded here (`flowmod_bytes`), the same way each time.
"""
import struct

from os_ken.ofproto import ofproto_v1_4 as ofp
from os_ken.ofproto import ofproto_v1_4_parser as parser

from virtualwire.southbound import flowmod_bytes, lazy_stats

_HEAD = struct.Struct('!BH')
# A flow-removed message's match starts after its fixed fields.
_REMOVED_MATCH_AT = ofp.OFP_FLOW_REMOVED_SIZE - ofp.OFP_MATCH_SIZE


def counter_key(msg) -> bytes:
    """The key of an OFPFlowStats entry or an OFPFlowRemoved message."""
    raw = lazy_stats.raw_match(msg) if isinstance(
        msg, parser.OFPFlowStats) else _removed_match(msg)
    if raw is None:
        raw = flowmod_bytes.match_bytes(tuple(sorted(msg.match.items())))
        raw = raw[:struct.unpack_from('!H', raw, 2)[0]]   # unpadded
    return _HEAD.pack(msg.table_id, msg.priority) + raw


def _removed_match(msg):
    buf = getattr(msg, 'buf', None)
    match = getattr(msg, 'match', None)
    if not buf or match is None or len(buf) < _REMOVED_MATCH_AT + 4:
        return None
    length = struct.unpack_from('!H', buf, _REMOVED_MATCH_AT + 2)[0]
    return bytes(buf[_REMOVED_MATCH_AT:_REMOVED_MATCH_AT + length])


def decoded(key: bytes) -> tuple:
    """The key as `openflow.flow_key` makes it (table, priority, sorted
    field pairs): how counter bases saved before these keys named flows."""
    table, priority = _HEAD.unpack_from(key)
    match = parser.OFPMatch.parser(key, _HEAD.size)
    return (table, priority, tuple(sorted(match.items())))
