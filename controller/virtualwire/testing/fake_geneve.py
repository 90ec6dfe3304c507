"""What a fake switch does with Geneve's option field (`tun_metadata0`),
as Open vSwitch does: it maps the option on an NXT_TLV_TABLE_MOD (an
error if mapped already), and refuses a flow that uses the field before
that (an error; a bundle holding one fails whole)."""
from typing import Any

from os_ken.ofproto import ofproto_v1_4 as ofp
from os_ken.ofproto import ofproto_v1_4_parser as parser


class GeneveOption:
    fabric: Any
    tlv_mapped: bool

    def _tlv_mod(self, msg, xid):
        """NXT_TLV_TABLE_MOD (add): OVS answers an error if the option is
        mapped already."""
        from virtualwire.southbound import geneve_tlv
        assert (msg.experimenter, msg.exp_type) == (
            geneve_tlv.NX_VENDOR, geneve_tlv.NXT_TLV_TABLE_MOD), msg
        if self.tlv_mapped:
            err = parser.OFPErrorMsg(self, type_=ofp.OFPET_EXPERIMENTER,
                                     code=0)
            err.xid = xid
            self.fabric.post('error', self, err)
        self.tlv_mapped = True

    def _unmapped(self, mod, xid):
        """A flow using tun_metadata0 before the option is mapped: OVS
        refuses it (an error, nothing applied)."""
        acts = [a for i in getattr(mod, 'instructions', [])
                for a in getattr(i, 'actions', [])]
        uses = 'tun_metadata0' in dict(mod.match.items()) or any(
            getattr(a, 'key', None) == 'tun_metadata0' for a in acts)
        if uses and not self.tlv_mapped:
            err = parser.OFPErrorMsg(self, type_=ofp.OFPET_BAD_MATCH,
                                     code=ofp.OFPBMC_BAD_FIELD)
            err.xid = xid
            self.fabric.post('error', self, err)
            return True
        return False
