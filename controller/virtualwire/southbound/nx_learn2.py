"""OVS's learn action with a limit (NXAST_LEARN2), which os-ken lacks.

A provider switch learns each port's MACs through the port's own learn
action (pipeline.switch); `limit` bounds how many flows that action may
have at once, so one port cannot fill the switch's table (a MAC flood).
The format is OVS's `struct nx_action_learn2` (lib/ofp-actions.c): the
learn action's fields, then limit (32 bits), the result's bit offset (16)
and 2 bytes of padding, then the flow specs; with no result flag, no
destination header. OVS 3.1 writes it as learn(...,limit=N,...).
"""
import struct

from os_ken.lib.pack_utils import msg_pack_into
from os_ken.ofproto import ofproto_v1_4_parser as parser

NXAST_LEARN2 = 45
_LEARN = '!HHHQHBxHH'
_LIMIT = '!IH2x'


class NXActionLearn2(parser.NXActionLearn):
    _subtype = NXAST_LEARN2

    def __init__(self, table_id, specs, limit=0, **kw):
        super().__init__(table_id, specs, **kw)
        self.limit = limit

    @classmethod
    def parser(cls, buf):
        (idle, hard, priority, cookie, flags, table_id, fin_idle,
         fin_hard) = struct.unpack_from(_LEARN, buf, 0)
        at = struct.calcsize(_LEARN)
        (limit, _ofs) = struct.unpack_from(_LIMIT, buf, at)
        rest = buf[at + struct.calcsize(_LIMIT):]
        specs = []
        while len(rest) > 0:
            spec, rest = parser._NXFlowSpec.parse(rest)
            if spec is not None:
                specs.append(spec)
        return cls(table_id=table_id, specs=specs, limit=limit,
                   idle_timeout=idle, hard_timeout=hard, priority=priority,
                   cookie=cookie, flags=flags, fin_idle_timeout=fin_idle,
                   fin_hard_timeout=fin_hard)

    def serialize_body(self):
        data = bytearray()
        msg_pack_into(_LEARN, data, 0, self.idle_timeout, self.hard_timeout,
                      self.priority, self.cookie, self.flags, self.table_id,
                      self.fin_idle_timeout, self.fin_hard_timeout)
        data += struct.pack(_LIMIT, self.limit, 0)
        for spec in self.specs:
            data += spec.serialize()
        return data


def register():
    """Let os-ken parse it (the fake switch decodes what we send)."""
    if parser.NXAction._subtypes.get(NXAST_LEARN2) is not NXActionLearn2:
        parser.NXAction._subtypes[NXAST_LEARN2] = NXActionLearn2
