"""Flow mods in a bundle, as bytes: os-ken's own encoding of each match
field and action, cached, joined with struct.

Why: building an OFPFlowMod with its OFPMatch, instruction and action
objects, then serializing it, cost about 50 us a flow here (28 to build,
23 to serialize; `bench_scale`'s batches of 10,000 wires spent 65% of
their time sending 40,000 flow mods). A wire's flows share most of their
pieces (ports, peer addresses, the output action), so each piece is
encoded once by os-ken and reused. The bytes equal os-ken's for every
flow the pipeline makes (tests/unit/test_flowmod_bytes.py), and the fake
switch decodes what we send with os-ken's parser.
"""
import functools
import struct

from os_ken.ofproto import ofproto_v1_4 as ofp
from os_ken.ofproto import ofproto_v1_4_parser as parser

from virtualwire.southbound import openflow

_HEADER = struct.Struct('!BBHI')
_FLOW_MOD = struct.Struct('!' + ofp.OFP_FLOW_MOD_PACK_STR0.lstrip('!'))
_BUNDLE_ADD = struct.Struct('!IHH')
_MATCH = struct.Struct('!HH')
_INSTRUCTION = struct.Struct('!HH4x')


def _pad8(n):
    return -n % 8


@functools.lru_cache(maxsize=1 << 16)
def _field(name, value):
    """(OXM number to sort by, encoded TLV), as OFPMatch makes them."""
    n, v, m = ofp.oxm_from_user(name, value)
    buf = bytearray()
    length = ofp.oxm_serialize(n, v, m, buf, 0)
    return (n[0] if isinstance(n, tuple) else n), bytes(buf[:length])


def field_bytes(name, value):
    try:
        return _field(name, value)
    except TypeError:                 # a value that cannot be hashed
        return _field.__wrapped__(name, value)


def match_bytes(match):
    """An ofp_match (OXM, padded to 8) for a Flow's match."""
    fields = sorted((field_bytes(k, v) for k, v in match),
                    key=lambda f: f[0])
    body = b''.join(f[1] for f in fields)
    length = 4 + len(body)
    return _MATCH.pack(ofp.OFPMT_OXM, length) + body + bytes(_pad8(length))


@functools.lru_cache(maxsize=1 << 16)
def _action(a):
    buf = bytearray()
    offset = 0
    for obj in openflow.action_objects(a):
        obj.serialize(buf, offset)
        offset += obj.len
        # Some leave their padding unwritten (NXActionLearn: 76 of 80).
        buf.extend(bytes(max(0, offset - len(buf))))
    return bytes(buf[:offset])


def action_bytes(a):
    try:
        return _action(a)
    except TypeError:                 # a value that cannot be hashed
        return _action.__wrapped__(a)


def flow_mod_body(flow, command):
    """A FlowMod for `flow` without its header: what openflow.flow_mod
    encodes."""
    body = _FLOW_MOD.pack(
        flow.cookie, openflow.ALL_ONES if command == 'delete' else 0,
        flow.table, openflow.COMMANDS[command], 0, 0, flow.priority,
        ofp.OFP_NO_BUFFER, ofp.OFPP_ANY, ofp.OFPG_ANY,
        openflow.flow_mod_flags(flow, command), 0) + match_bytes(flow.match)
    if command != 'delete' and flow.actions:
        acts = b''.join(action_bytes(a) for a in flow.actions)
        length = 8 + len(acts)
        body += _INSTRUCTION.pack(ofp.OFPIT_APPLY_ACTIONS,
                                  length + _pad8(length)) + acts + \
            bytes(_pad8(length))
    return body


class BundleAdd(parser.MsgBase):
    """OFPT_BUNDLE_ADD_MESSAGE around an already encoded flow mod; the
    inner message takes the outer one's xid when sent (as os-ken's
    OFPBundleAddMsg does)."""

    def __init__(self, datapath, bundle_id, flags, body):
        super().__init__(datapath)
        self.bundle_id, self.flags, self.body = bundle_id, flags, body

    def _serialize_body(self):
        inner = _HEADER.pack(ofp.OFP_VERSION, ofp.OFPT_FLOW_MOD,
                             8 + len(self.body), self.xid) + self.body
        self.buf += _BUNDLE_ADD.pack(self.bundle_id, 0, self.flags) + \
            inner + bytes(_pad8(len(inner)))


BundleAdd.cls_msg_type = ofp.OFPT_BUNDLE_ADD_MESSAGE


def diff_bundle(bundle_id, diff):
    """A FlowDiff as one atomic bundle: open, the flow mods (deletes
    first), commit; as openflow.bundle(openflow.diff_messages(diff))."""
    flags = ofp.OFPBF_ATOMIC
    out = [parser.OFPBundleCtrlMsg(openflow.PROTO, bundle_id,
                                   ofp.OFPBCT_OPEN_REQUEST, flags, [])]
    for command, flows in (('delete', diff.delete), ('add', diff.add),
                           ('modify', diff.modify)):
        out += [BundleAdd(openflow.PROTO, bundle_id, flags,
                          flow_mod_body(f, command)) for f in flows]
    out.append(parser.OFPBundleCtrlMsg(openflow.PROTO, bundle_id,
                                       ofp.OFPBCT_COMMIT_REQUEST, flags, []))
    return out
