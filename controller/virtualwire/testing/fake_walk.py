"""How the fake switch runs a frame through its tables, as OVS does for
the actions the controller uses: output (never back out of the in_port
unless told IN_PORT), set_field on headers, registers and in_port, VLAN
push and pop, resubmit to a later table (the actions after it run when
it returns), OVS's learn (an activation's: output to the port a register
holds) and learn2 (a switch port's MAC: a register matched, eth_dst from
eth_src, a register loaded; at most `limit` flows per learn, counted by
the learned flows' cookie, as each port's learn has its own)."""
import ipaddress
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

from os_ken.ofproto import ofproto_v1_4 as ofp
from os_ken.ofproto import ofproto_v1_4_parser as parser

OFPP_CONTROLLER = ofp.OFPP_CONTROLLER
OFPP_IN_PORT = ofp.OFPP_IN_PORT
VID_PRESENT = ofp.OFPVID_PRESENT
MAX_DEPTH = 64            # OVS's resubmit limit
_LEARN_NAMES = {'in_port_nxm': 'in_port', 'tun_id': 'tunnel_id',
                'tunnel_id_nxm': 'tunnel_id', 'eth_src_nxm': 'eth_src',
                'eth_dst_nxm': 'eth_dst'}


@dataclass
class Walk:
    """One frame's state on its way through the tables."""
    pkt: Any                       # fakeswitch.Packet
    regs: Dict[str, int] = field(default_factory=dict)
    out: List[Tuple[int, Any]] = field(default_factory=list)

    def value(self, name):
        if name.startswith('reg'):
            return self.regs.get(name, 0)         # OVS registers start at 0
        return getattr(self.pkt, name, None)


def matches(entry, walk: Walk) -> bool:
    for name, want in entry.match:
        have = walk.value(name)
        if name == 'vlan_vid':
            want = want & 0xFFF if want & VID_PRESENT else None
            if have != want:
                return False
        elif isinstance(want, tuple):             # (value, mask): a MAC
            if have is None or not _masked_equal(have, *want):
                return False
        elif have != want:
            return False
    return True


def _masked_equal(have, value, mask):
    h, v, m = (int(x.replace(':', ''), 16) for x in (have, value, mask))
    return h & m == v & m


def lookup(dp, table_id, walk) -> Optional[Any]:
    best: Optional[Any] = None
    for e in dp.table.values():
        if e.table_id == table_id and matches(e, walk) and \
                (best is None or e.priority > best.priority):
            best = e
    return best


def process(dp, pkt) -> List[Tuple[int, Any]]:
    """[(output port, packet as it leaves)] for a packet entering."""
    walk = Walk(pkt)
    run(dp, 0, walk, 0)
    return walk.out


def run(dp, table_id, walk, depth):
    if depth > MAX_DEPTH:
        raise AssertionError('resubmit deeper than %d' % MAX_DEPTH)
    e = lookup(dp, table_id, walk)
    if e is None:
        return
    e.packets += 1
    e.bytes += len(walk.pkt.frame())
    for a in e.actions():
        act(dp, e, a, walk, depth)


def act(dp, e, a, walk, depth):
    name = type(a).__name__
    if name == 'OFPActionSetField' and a.key.startswith('reg'):
        walk.regs[a.key] = a.value
    elif name == 'OFPActionSetField' and a.key == 'vlan_vid':
        walk.pkt = replace(walk.pkt, vlan_vid=a.value & 0xFFF)
    elif name == 'OFPActionSetField':
        walk.pkt = replace(walk.pkt, **{_LEARN_NAMES.get(a.key, a.key):
                                        a.value})
    elif name == 'OFPActionPushVlan':
        walk.pkt = replace(walk.pkt, vlan_vid=0, vlan_pcp=0)
    elif name == 'OFPActionPopVlan':
        walk.pkt = replace(walk.pkt, vlan_vid=None, vlan_pcp=None)
    elif name == 'NXActionResubmitTable':
        run(dp, a.table_id, walk, depth + 1)
    elif name == 'NXActionLearn':
        learn_output(dp, a, walk)
    elif name == 'NXActionLearn2':
        learn_load(dp, a, walk)
    elif name == 'OFPActionOutput' and a.port == OFPP_CONTROLLER:
        pkt = walk.pkt
        dp.fabric.packet_in(dp, parser.OFPPacketIn(
            dp, buffer_id=ofp.OFP_NO_BUFFER, total_len=len(pkt.frame()),
            reason=ofp.OFPR_APPLY_ACTION, table_id=e.table_id,
            cookie=e.cookie, match=parser.OFPMatch(in_port=pkt.in_port),
            data=pkt.frame()[:a.max_len]))
    elif name == 'OFPActionOutput' and a.port == OFPP_IN_PORT:
        walk.out.append((walk.pkt.in_port, walk.pkt))
    elif name == 'OFPActionOutput':
        if a.port != walk.pkt.in_port:     # OpenFlow never echoes
            walk.out.append((a.port, walk.pkt))
    else:
        raise AssertionError('action %s not simulated' % name)


def _src_value(spec, walk):
    src = spec.src
    if not isinstance(src, tuple):
        return src
    return walk.value(_LEARN_NAMES.get(src[0], src[0]))


def learn_output(dp, a, walk):
    """OVS learn: add (or replace) priority+match -> output to the port
    its output spec names a field for (the packet's in_port or a
    register the actions before it loaded), as OVS does."""
    match, port = {}, None
    for spec in a.specs:
        if type(spec).__name__ == 'NXFlowSpecOutput':
            port = _src_value(spec, walk)
        elif type(spec).__name__ == 'NXFlowSpecMatch':
            name = _LEARN_NAMES.get(spec.dst[0], spec.dst[0])
            value = spec.src
            if name.startswith('tun_ipv4'):
                value = str(ipaddress.IPv4Address(value))
            match[name] = value
    _add(dp, a, match, [parser.OFPActionOutput(port)]
         if port is not None else [])


def learn_load(dp, a, walk):
    """OVS learn2 as a switch port's MAC: match fields taken from the
    frame, register loads as actions; once `limit` flows of this cookie
    exist, a new match is not learned (a known one is refreshed)."""
    match, loads = {}, []
    for spec in a.specs:
        kind = type(spec).__name__
        name = _LEARN_NAMES.get(spec.dst[0], spec.dst[0])
        if kind == 'NXFlowSpecMatch':
            match[name] = _src_value(spec, walk)
        elif kind == 'NXFlowSpecLoad':
            loads.append(parser.OFPActionSetField(
                **{name: _src_value(spec, walk)}))
    key = (a.table_id, a.priority, tuple(sorted(match.items())))
    mine = [e for e in dp.table.values() if e.cookie == a.cookie]
    if key not in dp.table and a.limit and len(mine) >= a.limit:
        dp.learn_refused = getattr(dp, 'learn_refused', 0) + 1
        return
    _add(dp, a, match, loads, learned=True)


def _add(dp, a, match, actions, learned=False):
    dp.flow_mod(parser.OFPFlowMod(
        dp, cookie=a.cookie, table_id=a.table_id, command=ofp.OFPFC_ADD,
        priority=a.priority,
        flags=ofp.OFPFF_SEND_FLOW_REM if a.flags & 1 and not learned else 0,
        match=parser.OFPMatch(**match),
        instructions=[parser.OFPInstructionActions(
            ofp.OFPIT_APPLY_ACTIONS, actions)] if actions else []))
