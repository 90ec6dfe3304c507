"""Geneve's 32-bit connector id in a TLV option, at the OpenFlow edge.

A Geneve VNI has 24 bits; the connector id has 32. It travels in one
Geneve option instead (class 0xffff, experimental use per RFC 8926, type
0x80: the critical bit, so a receiver that does not know the option drops
the frame rather than deliver it to VNI 0), which Open vSwitch exposes as
the field `tun_metadata0` once a switch maps the option to it (an
NXT_TLV_TABLE_MOD; the map is per ovs-vswitchd run, so the controller
sends it on every connection before its first flow, as ovn-controller
does).

os-ken knows neither the field nor the message: `register` adds the field
to os-ken's OpenFlow 1.4 OXM table (Nicira's NXM_NX_TUN_METADATA0, class
0x0001 field 40, 4 bytes as mapped) and `tlv_map` builds the message as an
experimenter message.
"""
import struct

from os_ken.ofproto import nicira_ext, oxm_fields
from os_ken.ofproto import ofproto_v1_4 as ofp
from os_ken.ofproto import ofproto_v1_4_parser as parser
from os_ken.lib import type_desc

FIELD = 'tun_metadata0'
OPTION_CLASS = 0xFFFF
OPTION_TYPE = 0x80
OPTION_LEN = 4
NX_VENDOR = 0x00002320
NXT_TLV_TABLE_MOD = 24
NXTTMC_ADD = 0

_registered = False


def register():
    """Teach os-ken's OpenFlow 1.4 tables the field (idempotent)."""
    global _registered
    if _registered:
        return
    f = oxm_fields.NiciraExtended1(FIELD, 40, type_desc.Int4)
    nicira_ext.oxm_types.append(f)
    ofp.oxm_types.append(f)
    oxm_fields.generate(ofp.__name__)
    _registered = True


def tlv_map(dp):
    """The switch's Geneve option -> tun_metadata0 mapping (ADD). A switch
    that has it already answers an error, which the caller ignores."""
    body = struct.pack('!H6x', NXTTMC_ADD) + struct.pack(
        '!HBBH2x', OPTION_CLASS, OPTION_TYPE, OPTION_LEN, 0)
    return parser.OFPExperimenter(dp, NX_VENDOR, NXT_TLV_TABLE_MOD, body)


def ofctl_map():
    """The same mapping as `ovs-ofctl add-tlv-map` writes it."""
    return '{class=0x%x,type=0x%x,len=%d}->%s' % (
        OPTION_CLASS, OPTION_TYPE, OPTION_LEN, FIELD)


register()
