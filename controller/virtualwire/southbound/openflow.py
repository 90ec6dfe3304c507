"""The OpenFlow edge: `Flow` values <-> os-ken messages (OpenFlow 1.4).

Messages are built without a switch: they carry a stand-in datapath that
only knows the protocol version, so they serialize (`to_bytes`) in a test
exactly as they would on a connection. A real datapath's `send_msg`
serializes them the same way. Thin on purpose: no decisions are made here.
"""
import ipaddress

from os_ken.ofproto import ofproto_v1_4 as ofp
from os_ken.ofproto import ofproto_v1_4_parser as parser

from virtualwire.pipeline.flow import Flow
from virtualwire.pipeline.tables import SWITCH_MAC, WIRE
from virtualwire.southbound import geneve_tlv, lazy_stats, nx_learn2

lazy_stats.install()       # the collector reads no instructions
geneve_tlv.register()      # tun_metadata0: Geneve's connector id
nx_learn2.register()       # a switch port's learn, with its MAC limit


class _Protocol:
    """What os-ken messages need of a datapath to serialize."""
    ofproto = ofp
    ofproto_parser = parser
    id = None


PROTO = _Protocol()

ALL_ONES = 0xFFFFFFFFFFFFFFFF

# Width of the match fields a learned flow may set (all immediate values).
_LEARN_BITS = {'in_port': 32, 'tunnel_id': 64, 'tun_ipv4_src': 32,
               'tun_metadata0': 32}
NX_LEARN_F_SEND_FLOW_REM = 1

_LEARN_NAMES = {'in_port_nxm': 'in_port', 'tun_id': 'tunnel_id',
                'tun_ipv4_src': 'tun_ipv4_src', 'tunnel_id_nxm': 'tunnel_id'}


# resubmit's in_port is OpenFlow 1.0's 16 bits: 0xfff8 (OFPP_IN_PORT there)
# keeps the frame's own.
RESUBMIT_IN_PORT = 0xfff8

# The register a learn's output port goes through: OVS's learn can only
# output to a field's value, and a guest's activation flow learns for its
# other vNICs too (pipeline.guests), whose ports are not the packet's.
LEARN_PORT_REG = 'reg1'


def _learn(act):
    """('learn', priority, cookie, match, port) -> [reg1 := port,
    NXActionLearn adding `match` -> output:reg1's value to table 0,
    permanently]."""
    _, priority, cookie, match, port = act
    specs = []
    for field, value in match:
        if field == 'tun_ipv4_src':
            value = int(ipaddress.IPv4Address(value))
        specs.append(parser.NXFlowSpecMatch(
            src=value, dst=(field, 0), n_bits=_LEARN_BITS[field]))
    specs.append(parser.NXFlowSpecOutput(src=(LEARN_PORT_REG, 0), dst='',
                                         n_bits=32))
    # The learned flow reports its final counters when it goes, like ours
    # (and with the same exception).
    return [parser.OFPActionSetField(**{LEARN_PORT_REG: port}),
            parser.NXActionLearn(table_id=WIRE.id, specs=specs,
                                 priority=priority, cookie=cookie,
                                 flags=0 if _matches_option(match)
                                 else NX_LEARN_F_SEND_FLOW_REM)]


def _learn_mac(act):
    """('learn_mac', cookie, limit, idle) -> OVS's learn(table=SWITCH_MAC,
    priority=learned, idle_timeout, limit, cookie, NXM_NX_REG4[],
    eth_dst=eth_src, load:reg5->reg6): the frame's source, in its
    switch, found at the port it came in on."""
    _, cookie, limit, idle = act
    specs = [parser.NXFlowSpecMatch(src=('reg4', 0), dst=('reg4', 0),
                                    n_bits=32),
             parser.NXFlowSpecMatch(src=('eth_src', 0), dst=('eth_dst', 0),
                                    n_bits=48),
             parser.NXFlowSpecLoad(src=('reg5', 0), dst=('reg6', 0),
                                   n_bits=32)]
    return [nx_learn2.NXActionLearn2(
        table_id=SWITCH_MAC.id, specs=specs, limit=limit,
        idle_timeout=idle, priority=SWITCH_MAC.priority('learned'),
        cookie=cookie)]


def _read_learn_mac(a):
    """NXActionLearn2 as a switch reports it -> ('learn_mac', ...), or
    None if it is not the one _learn_mac writes."""
    got = [(type(s).__name__, s.src, s.dst, s.n_bits) for s in a.specs]
    want = [(type(s).__name__, s.src, s.dst, s.n_bits)
            for s in _learn_mac(('learn_mac', 0, 1, 1))[0].specs]
    if got != want or a.table_id != SWITCH_MAC.id:
        return None
    return ('learn_mac', a.cookie, a.limit, a.idle_timeout)


def _matches_option(match):
    return any(k == geneve_tlv.FIELD for k, _ in match)


def flow_mod_flags(flow, command):
    """Every flow of ours says when it goes, with its final counters:
    what it counted since the collector's last reading is otherwise lost.
    Except one matching Geneve's option: Open vSwitch 3.1 dies encoding
    such a flow's flow-removed message (measured: ovs-vswitchd exits when
    the wire is deleted; not with the flag off). Its last counts since the
    collector's reading are lost instead."""
    return ofp.OFPFF_SEND_FLOW_REM if command == 'add' and \
        not _matches_option(flow.match) else 0


def _unlearn(a, port):
    """NXActionLearn as a switch reports it, `port` the value the action
    before it loaded into its register -> our ('learn', ...) tuple, or
    None if it is not one we would install."""
    match = []
    outputs = 0
    for spec in a.specs:
        kind = type(spec).__name__
        if kind == 'NXFlowSpecMatch' and not isinstance(spec.src, tuple):
            field = _LEARN_NAMES.get(spec.dst[0], spec.dst[0])
            value = spec.src
            if field == 'tun_ipv4_src':
                value = str(ipaddress.IPv4Address(value))
            match.append((field, value))
        elif kind == 'NXFlowSpecOutput' and spec.src[0] == LEARN_PORT_REG:
            outputs += 1
        else:
            return None
    if outputs != 1 or a.table_id != WIRE.id or port is None:
        return None
    return ('learn', a.priority, a.cookie, tuple(sorted(match)), port)


def _match(flow):
    return parser.OFPMatch(**dict(flow.match))


def _actions(flow):
    return [o for a in flow.actions for o in action_objects(a)]


def action_objects(a):
    """One action of a Flow as os-ken action objects (a learn is two)."""
    if a[0] == 'output':
        # ('output', OFPP_CONTROLLER, bytes): a copy cut short.
        return [parser.OFPActionOutput(a[1], *a[2:])]
    if a[0] == 'set_field':
        return [parser.OFPActionSetField(**{a[1]: a[2]})]
    if a[0] == 'learn':
        return _learn(a)
    if a[0] == 'learn_mac':
        return _learn_mac(a)
    if a[0] == 'resubmit':
        return [parser.NXActionResubmitTable(in_port=RESUBMIT_IN_PORT,
                                             table_id=a[1])]
    if a[0] == 'push_vlan':
        return [parser.OFPActionPushVlan(a[1])]
    if a[0] == 'pop_vlan':
        return [parser.OFPActionPopVlan()]
    raise ValueError('unsupported action %r' % (a,))


COMMANDS = {'add': ofp.OFPFC_ADD, 'modify': ofp.OFPFC_MODIFY_STRICT,
            'delete': ofp.OFPFC_DELETE_STRICT}


def flow_mod(flow, command):
    cmd = COMMANDS[command]
    inst = []
    if command != 'delete' and flow.actions:
        inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS,
                                             _actions(flow))]
    return parser.OFPFlowMod(
        PROTO, cookie=flow.cookie,
        cookie_mask=ALL_ONES if command == 'delete' else 0,
        table_id=flow.table, command=cmd, priority=flow.priority,
        flags=flow_mod_flags(flow, command),
        out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
        match=_match(flow), instructions=inst)


def delete_by_cookie(table, cookie, cookie_mask):
    """Delete every flow of `table` whose cookie matches under the mask
    (non-strict: whatever its match and priority)."""
    return parser.OFPFlowMod(
        PROTO, cookie=cookie, cookie_mask=cookie_mask, table_id=table,
        command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY,
        out_group=ofp.OFPG_ANY, match=parser.OFPMatch())


def learned_copy(stat, idle_timeout):
    """A MAC a provider switch learned (a flow-stats entry of its
    SWITCH_MAC table), added elsewhere as its learn action would add it:
    same match, priority, cookie and action (a later learn of the same
    MAC replaces it)."""
    return parser.OFPFlowMod(
        PROTO, cookie=stat.cookie, table_id=SWITCH_MAC.id,
        command=ofp.OFPFC_ADD, idle_timeout=idle_timeout,
        priority=stat.priority, match=stat.match,
        instructions=stat.instructions)


def diff_messages(diff):
    """FlowMods for a FlowDiff: deletes first, then adds and modifies (the
    order only matters outside a bundle)."""
    msgs = [flow_mod(f, 'delete') for f in diff.delete]
    msgs += [flow_mod(f, 'add') for f in diff.add]
    msgs += [flow_mod(f, 'modify') for f in diff.modify]
    return msgs


def bundle(bundle_id, msgs):
    """Wrap messages into one atomic OpenFlow 1.4 bundle: open, add, commit."""
    flags = ofp.OFPBF_ATOMIC
    out = [parser.OFPBundleCtrlMsg(PROTO, bundle_id, ofp.OFPBCT_OPEN_REQUEST,
                                   flags, [])]
    for m in msgs:
        out.append(parser.OFPBundleAddMsg(PROTO, bundle_id, flags, m, []))
    out.append(parser.OFPBundleCtrlMsg(PROTO, bundle_id,
                                       ofp.OFPBCT_COMMIT_REQUEST, flags, []))
    return out


def barrier():
    return parser.OFPBarrierRequest(PROTO)


def role_request(master, generation):
    """MASTER (or SLAVE) with the leader's term as generation id: a switch
    refuses a request older than the newest it has seen (OFPRRFC_STALE),
    and refuses a SLAVE's flow changes (OFPBRC_IS_SLAVE)."""
    return parser.OFPRoleRequest(
        PROTO, ofp.OFPCR_ROLE_MASTER if master else ofp.OFPCR_ROLE_SLAVE,
        generation & 0xFFFFFFFFFFFFFFFF)


def flow_stats_request(cookie=0, cookie_mask=0):
    return parser.OFPFlowStatsRequest(
        PROTO, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY,
        cookie, cookie_mask, parser.OFPMatch())


def port_stats_request():
    """Every port's counters (a port gone since would be an error)."""
    return parser.OFPPortStatsRequest(PROTO, 0, ofp.OFPP_ANY)


def packet_out(port, frame):
    """A frame the controller hands out of `port` (held frames)."""
    return parser.OFPPacketOut(
        PROTO, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
        actions=[parser.OFPActionOutput(port)], data=frame)


def to_bytes(msg, xid=1):
    """The message as it goes on the wire (what a switch receives)."""
    if msg.xid is None:
        msg.set_xid(xid)
    msg.serialize()
    return bytes(msg.buf)


def flow_key(msg):
    """`Flow.key` (table, priority, match) of an OFPFlowStats entry or an
    OFPFlowRemoved message, without decoding its actions (the collector
    reads every flow of every switch each cycle)."""
    return (msg.table_id, msg.priority, tuple(sorted(msg.match.items())))


def _read_action(a):
    name = type(a).__name__
    if name == 'OFPActionOutput':
        if a.port == ofp.OFPP_CONTROLLER and a.max_len < ofp.OFPCML_MAX:
            return ('output', a.port, a.max_len)
        return ('output', a.port)
    if name == 'OFPActionSetField':
        return ('set_field', a.key, a.value)
    if name == 'OFPActionPushVlan':
        return ('push_vlan', a.ethertype)
    if name == 'OFPActionPopVlan':
        return ('pop_vlan',)
    if name == 'NXActionResubmitTable' and a.in_port == RESUBMIT_IN_PORT:
        return ('resubmit', a.table_id)
    if name == 'NXActionLearn2':
        learn = _read_learn_mac(a)
        if learn is not None:
            return learn
    # Something we never install: keep it distinct so the diff replaces it.
    return ('other', repr(a))


def flow_from_stats(stat):
    """A `Flow` from an OFPFlowStats entry, to compare with what we want."""
    actions: list = []
    for inst in stat.instructions:
        acts = list(getattr(inst, 'actions', []))
        i = 0
        while i < len(acts):
            a, nxt = acts[i], acts[i + 1] if i + 1 < len(acts) else None
            # A learn is read with the register load before it (_learn).
            if type(a).__name__ == 'OFPActionSetField' and \
                    a.key == LEARN_PORT_REG and \
                    type(nxt).__name__ == 'NXActionLearn':
                learn = _unlearn(nxt, a.value)
                if learn is not None:
                    actions.append(learn)
                    i += 2
                    continue
            actions.append(_read_action(a))
            i += 1
    table, priority, match = flow_key(stat)
    return Flow(table, priority, match, tuple(actions), stat.cookie)
