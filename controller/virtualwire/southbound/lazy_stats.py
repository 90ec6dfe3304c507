"""Flow-stats entries whose match and instructions are decoded only when
read.

The collector reads every flow of every switch each cycle for its cookie,
key and counters; os-ken decodes each entry's instructions and actions
too, and that was half of the parsing (profiled: flow-stats parsing was
26% of the controller's CPU while a client connected wires one by one;
instructions and actions 12 points of it). A table dump
(`openflow.flow_from_stats`) reads them, and gets them exactly as os-ken
decodes them, on first access.
"""
import struct

from os_ken import utils
from os_ken.ofproto import ofproto_v1_4 as ofp
from os_ken.ofproto import ofproto_v1_4_parser as parser

_installed = False


def _instructions(self):
    raw = self.__dict__.get('_raw_instructions')
    if raw is not None:
        buf, offset, length = raw
        out = []
        while length > 0:
            inst = parser.OFPInstruction.parser(buf, offset)
            out.append(inst)
            offset += inst.len
            length -= inst.len
        self.__dict__['_instructions'] = out
        del self.__dict__['_raw_instructions']
    return self.__dict__.get('_instructions')


def _set_instructions(self, value):
    self.__dict__.pop('_raw_instructions', None)
    self.__dict__['_instructions'] = value


def _match(self):
    # The encoding stays beside the decoded match: a table dump decodes
    # it (`openflow.flow_from_stats`) and then hands the same entries to
    # the collector, whose key is the encoding (`counter_keys`).
    if '_match' not in self.__dict__:
        raw = self.__dict__.get('_raw_match')
        self.__dict__['_match'] = None if raw is None else \
            parser.OFPMatch.parser(raw, 0)
    return self.__dict__['_match']


def _set_match(self, value):
    self.__dict__.pop('_raw_match', None)
    self.__dict__['_match'] = value


def raw_match(st):
    """The entry's match as the switch encoded it (bytes); None for an
    entry built in memory or given another match."""
    return st.__dict__.get('_raw_match')


def _parse(cls, buf, offset):
    st = cls()
    (st.length, st.table_id, st.duration_sec, st.duration_nsec, st.priority,
     st.idle_timeout, st.hard_timeout, st.flags, st.importance, st.cookie,
     st.packet_count, st.byte_count) = struct.unpack_from(
        ofp.OFP_FLOW_STATS_0_PACK_STR, buf, offset)
    offset += ofp.OFP_FLOW_STATS_0_SIZE
    # The match too is decoded only when read: the collector keys its
    # counters by the encoded match (`counter_keys`), and decoding every
    # match was the larger part of a reading's CPU.
    length = struct.unpack_from('!H', buf, offset + 2)[0]
    st.__dict__.pop('_match', None)          # __init__'s None
    st.__dict__['_raw_match'] = bytes(buf[offset:offset + length])
    match_length = utils.round_up(length, 8)
    inst_length = st.length - (ofp.OFP_FLOW_STATS_SIZE - ofp.OFP_MATCH_SIZE
                               + match_length)
    st.__dict__['_raw_instructions'] = (buf, offset + match_length,
                                        inst_length)
    return st


def install():
    """Make OFPFlowStats decode its instructions lazily (idempotent)."""
    global _installed
    if _installed:
        return
    parser.OFPFlowStats.instructions = property(_instructions,
                                                _set_instructions)
    parser.OFPFlowStats.match = property(_match, _set_match)
    parser.OFPFlowStats.parser = classmethod(_parse)
    _installed = True
