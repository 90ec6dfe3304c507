"""A fake OpenFlow fabric that consumes the real messages the controller
sends (Faucet's clib/fakeoftable.py is the model).

`FakeDatapath` stands where os-ken's Datapath does: the controller calls
`send_msg`, the message is serialized to the bytes a switch would receive
and parsed back with os-ken's own parser (bundles opened, staged and
committed atomically; flow mods applied with OpenFlow's add / modify-strict
/ delete-strict rules), and replies (barrier, flow stats) and packet-ins
go to `FakeFabric.inbox`, for the harness to hand to the controller as
os-ken would. `FakeFabric.send` answers "does this frame, entering here,
leave there, with these headers?" by running the installed entries.
"""
import struct
import threading
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Tuple

from os_ken.ofproto import ofproto_parser as ofproto_parser_mod
from os_ken.ofproto import ofproto_v1_4 as ofp
from os_ken.ofproto import ofproto_v1_4_parser as parser

from virtualwire.testing import fake_walk
from virtualwire.testing.fake_geneve import GeneveOption



@dataclass(frozen=True)
class Packet:
    """The headers the controller's flows can look at."""
    in_port: int
    payload: bytes = b'frame'
    eth_type: int = 0x0800
    vlan_vid: Optional[int] = None          # outer 802.1Q VID, if tagged
    vlan_pcp: Optional[int] = None          # its priority
    tunnel_id: Optional[int] = None
    tun_ipv4_src: Optional[str] = None
    tun_ipv4_dst: Optional[str] = None
    tun_metadata0: Optional[int] = None     # Geneve's option, once mapped
    eth_dst: str = 'ff:ff:ff:ff:ff:ff'
    eth_src: str = '02:00:00:00:00:00'

    def frame(self):
        """The Ethernet frame a packet-in carries."""
        return bytes.fromhex(self.eth_dst.replace(':', '')) + \
            bytes.fromhex(self.eth_src.replace(':', '')) + \
            self.eth_type.to_bytes(2, 'big') + self.payload


class Entry:
    def __init__(self, mod):
        self.table_id = mod.table_id
        self.priority = mod.priority
        self.cookie = mod.cookie
        self.match = tuple(sorted(mod.match.items()))
        self.instructions = mod.instructions
        self.flags = mod.flags
        self.packets = 0
        self.bytes = 0

    @property
    def key(self):
        return (self.table_id, self.priority, self.match)

    def actions(self):
        return [a for i in self.instructions for a in getattr(i, 'actions', [])]

    def matches(self, pkt):
        return fake_walk.matches(self, fake_walk.Walk(pkt))


class FakeDatapath(GeneveOption):
    """One switch: a flow table, bundles, counters, its carrier ports."""

    def __init__(self, fabric, name, dpid, address=('198.18.0.1', 50000)):
        self.fabric, self.name, self.id = fabric, name, dpid
        self.address = address
        self.ofproto, self.ofproto_parser = ofp, parser
        self.table: Dict[tuple, Entry] = {}
        self.carriers: Dict[int, str] = {}   # ofport -> local carrier address
        self.geneve: set = set()             # carrier ports that are Geneve
        self.tlv_mapped = False              # the Geneve option's field map
        self.bundles: Dict[int, List] = {}
        self.sent: List = []                 # every message received, parsed
        self.closed = False
        # A connection gone dead without closing (a half-open TCP
        # connection): it takes messages and answers nothing.
        self.silent = False
        # OpenFlow role of the controller connection (as OVS keeps it):
        # 'equal' until asked; a SLAVE's flow changes are refused.
        self.role, self.generation = 'equal', None
        self.refused_as_slave = 0
        self._xid = 0
        # ofport -> frames the port's reader took (a tap: what its QEMU
        # read), as port stats report them; set by tests.
        self.tap_reads: Dict[int, int] = {}
        # port -> frames its tap dropped (a full queue): tx_dropped
        self.tap_drops: Dict[int, int] = {}
        # While a list: the controller's messages wait here, unapplied,
        # as on a switch busy elsewhere (stall / catch_up).
        self.stalled: Optional[List] = None

    # -- what os-ken's Datapath offers the controller ----------------------
    def set_xid(self, msg):
        self._xid += 1
        msg.set_xid(self._xid)
        return self._xid

    def send_msg(self, msg):
        if msg.xid is None:
            self.set_xid(msg)
        msg.serialize()
        self.receive(bytes(msg.buf), msg)

    def close(self):
        self.closed = True

    # -- conveniences for tests ----------------------------------------------
    def stall(self):
        """Take nothing from the controller until catch_up(): its flow
        changes, packet-outs and barriers wait in order, while frames go
        on through the flows the switch holds."""
        self.stalled = []

    def catch_up(self):
        waiting, self.stalled = self.stalled or [], None
        for buf, obj in waiting:
            self.receive(buf, obj)

    def apply(self, diff, bundle_id=1):
        """Send a FlowDiff the way the controller does: real messages, one
        atomic bundle."""
        from virtualwire.southbound import openflow
        for m in openflow.bundle(bundle_id, openflow.diff_messages(diff)):
            self.send_msg(m)

    def flows(self):
        """The table as `Flow` values, decoded as a dump would be."""
        from virtualwire.southbound import openflow
        return {openflow.flow_from_stats(st) for st in
                self._flow_stats(parser.OFPFlowStatsRequest(self)).body}

    @property
    def counters(self):
        return {e.key: e.packets for e in self.table.values()}

    @property
    def packet_ins(self):
        """Packets this switch sent to the controller (in_port, frame)."""
        return [Packet(m.match['in_port'], m.data[14:],
                       int.from_bytes(m.data[12:14], 'big'))
                for dp, m in self.fabric.packet_in_log if dp is self]

    # -- the switch ----------------------------------------------------------
    def receive(self, buf, obj=None):
        if self.silent:
            return
        if self.stalled is not None:
            self.stalled.append((buf, obj))
            return
        version, msg_type, length, xid = struct.unpack_from('!BBHI', buf)
        assert version == ofp.OFP_VERSION and length == len(buf), \
            'bad OpenFlow header'
        if msg_type == ofp.OFPT_BUNDLE_ADD_MESSAGE:
            bundle_id, _pad, _flags = struct.unpack_from('!IHH', buf, 8)
            inner = buf[16:]
            iv, it, ilen, ixid = struct.unpack_from('!BBHI', inner)
            msg = ofproto_parser_mod.msg(self, iv, it, ilen, ixid,
                                         inner[:ilen])
            assert bundle_id in self.bundles, 'add to an unopened bundle'
            self.bundles[bundle_id].append(msg)
            self.sent.append(msg)
            return
        if msg_type == ofp.OFPT_ROLE_REQUEST:
            self.sent.append(obj)
            self._role(obj)
            return
        if self.role == 'slave' and msg_type in (ofp.OFPT_FLOW_MOD,
                                                 ofp.OFPT_BUNDLE_CONTROL):
            self.refused_as_slave += 1       # OFPBRC_IS_SLAVE on a switch
            return
        if msg_type == ofp.OFPT_PACKET_OUT:
            [out] = obj.actions
            self.sent.append(obj)
            self.fabric.packet_outs.append((self.name, out.port,
                                            bytes(obj.data)))
            return
        if msg_type in (ofp.OFPT_MULTIPART_REQUEST, ofp.OFPT_BARRIER_REQUEST):
            msg = obj                        # os-ken has no parser for these
        else:
            msg = ofproto_parser_mod.msg(self, version, msg_type, length, xid,
                                         buf)
        self.sent.append(msg)
        if msg_type == ofp.OFPT_BUNDLE_CONTROL:
            if msg.type == ofp.OFPBCT_OPEN_REQUEST:
                self.bundles[msg.bundle_id] = []
            elif msg.type == ofp.OFPBCT_COMMIT_REQUEST:
                staged = self.bundles.pop(msg.bundle_id)
                if any(self._unmapped(m, xid) for m in staged):
                    return                   # OVS fails the whole bundle
                self.fabric.commit_log.append(self.name)
                for m in staged:
                    self.flow_mod(m)
        elif msg_type == ofp.OFPT_FLOW_MOD:
            if not self._unmapped(msg, xid):
                self.flow_mod(msg)
        elif msg_type == ofp.OFPT_EXPERIMENTER:
            self._tlv_mod(msg, xid)
        elif msg_type == ofp.OFPT_ECHO_REQUEST:
            reply = parser.OFPEchoReply(self, data=msg.data)
            reply.xid = xid
            self.fabric.post('echo', self, reply)
        elif msg_type == ofp.OFPT_BARRIER_REQUEST:
            reply = parser.OFPBarrierReply(self)
            reply.xid = xid
            self.fabric.post('barrier', self, reply)
        elif msg_type == ofp.OFPT_MULTIPART_REQUEST and \
                isinstance(msg, parser.OFPPortStatsRequest):
            self.fabric.post('stats', self, self._port_stats(msg))
        elif msg_type == ofp.OFPT_MULTIPART_REQUEST:
            self.fabric.post('stats', self, self._flow_stats(msg))

    def _role(self, req):
        """OVS's rule: a MASTER or SLAVE request whose generation id is
        older than the newest seen is refused as stale."""
        gen = req.generation_id
        if self.generation is not None and \
                ((gen - self.generation) & (1 << 63)):
            self.fabric.post('error', self, parser.OFPErrorMsg(
                self, type_=ofp.OFPET_ROLE_REQUEST_FAILED,
                code=ofp.OFPRRFC_STALE))
            return
        self.generation = gen
        self.role = 'master' if req.role == ofp.OFPCR_ROLE_MASTER \
            else 'slave'

    def flow_mod(self, mod):
        e = Entry(mod)
        if mod.command == ofp.OFPFC_ADD:
            old = self.table.get(e.key)
            if old is not None:             # replaced: counters carry over
                e.packets, e.bytes = old.packets, old.bytes
            self.table[e.key] = e
        elif mod.command == ofp.OFPFC_MODIFY_STRICT:
            old = self.table.get(e.key)
            if old is not None:             # keeps cookie and counters
                old.instructions = mod.instructions
        elif mod.command == ofp.OFPFC_DELETE_STRICT:
            old = self.table.get(e.key)
            if old is not None and \
                    old.cookie & mod.cookie_mask == mod.cookie & mod.cookie_mask:
                del self.table[e.key]
                if old.flags & ofp.OFPFF_SEND_FLOW_REM:
                    self.fabric.post('flow_removed', self, parser.OFPFlowRemoved(
                        self, cookie=old.cookie, priority=old.priority,
                        reason=ofp.OFPRR_DELETE, table_id=old.table_id,
                        duration_sec=0, duration_nsec=0, idle_timeout=0,
                        hard_timeout=0, packet_count=old.packets,
                        byte_count=old.bytes,
                        match=parser.OFPMatch(**dict(old.match))))
        elif mod.command == ofp.OFPFC_DELETE and not list(mod.match.items()):
            # Non-strict, by table and cookie only (a switch's MACs).
            for k, old in list(self.table.items()):
                if old.table_id == mod.table_id and old.cookie & \
                        mod.cookie_mask == mod.cookie & mod.cookie_mask:
                    del self.table[k]
        else:
            raise AssertionError('flow mod command %d not expected'
                                 % mod.command)

    def _flow_stats(self, req):
        body = []
        for e in self.table.values():
            if e.cookie & req.cookie_mask != req.cookie & req.cookie_mask:
                continue
            body.append(parser.OFPFlowStats(
                table_id=e.table_id, duration_sec=0, duration_nsec=0,
                priority=e.priority, idle_timeout=0, hard_timeout=0, flags=0,
                importance=0, cookie=e.cookie, packet_count=e.packets,
                byte_count=e.bytes, match=parser.OFPMatch(**dict(e.match)),
                instructions=e.instructions))
        reply = parser.OFPFlowStatsReply(self, body=body, flags=0)
        reply.xid = req.xid
        return reply

    def _port_stats(self, req):
        body = [parser.OFPPortStats(port_no=p, tx_packets=n,
                                    tx_dropped=self.tap_drops.get(p, 0))
                for p, n in sorted(self.tap_reads.items())
                if req.port_no in (p, ofp.OFPP_ANY)]
        reply = parser.OFPPortStatsReply(self, body=body, flags=0)
        reply.xid = req.xid
        return reply

    def lookup(self, pkt) -> Optional[Entry]:
        return fake_walk.lookup(self, 0, fake_walk.Walk(pkt))

    def process(self, pkt) -> List[Tuple[int, Packet]]:
        """[(output port, packet as it leaves)] for a packet entering
        (testing.fake_walk: the tables as OVS runs them)."""
        return fake_walk.process(self, pkt)


class FakeFabric:
    """Switches joined by their carrier addresses (an underlay)."""

    def __init__(self):
        self.switches: Dict[str, FakeDatapath] = {}
        self.inbox: List[Tuple[str, FakeDatapath, object]] = []
        self.packet_in_log: List[Tuple[FakeDatapath, object]] = []
        self.commit_log: List[str] = []      # switch names, bundles in order
        # (switch, port, frame) the controller sent out, in order
        self.packet_outs: List[Tuple[str, int, bytes]] = []
        self._lock = threading.Lock()   # the loop posts, a harness drains

    def post(self, kind, dp, msg):
        """A message from a switch to the controller."""
        with self._lock:
            self.inbox.append((kind, dp, msg))

    def drain(self):
        with self._lock:
            out, self.inbox = self.inbox, []
        return out

    def packet_in(self, dp, msg):
        self.post('packet_in', dp, msg)
        self.packet_in_log.append((dp, msg))

    def add(self, name, dpid, carriers=None, address=None, geneve=()):
        """carriers: {ofport: local address} of the switch's carrier ports
        (GRE, or Geneve for those in `geneve`)."""
        dp = FakeDatapath(self, name, dpid,
                          address or ('198.18.0.%d' % (len(self.switches) + 1),
                                      50000))
        dp.carriers = dict(carriers or {})
        dp.geneve = set(geneve)
        self.switches[name] = dp
        return dp

    def by_address(self, ip):
        return next((s for s in self.switches.values()
                     if ip in s.carriers.values()), None)

    def send(self, host, ofport, payload=b'frame', eth_type=0x0800,
             vlan_vid=None, forged=None):
        """Inject a frame on host's port (or `forged`, a packet arriving
        from the underlay on a carrier port); returns [(host, ofport,
        Packet)] for every frame that left the fabric on a non-carrier
        port."""
        delivered = []
        pending = [(host, forged or Packet(ofport, payload, eth_type,
                                           vlan_vid))]
        hops = 0
        while pending and hops < 32:
            hops += 1
            name, pkt = pending.pop(0)
            sw = self.switches[name]
            for port, p in sw.process(pkt):
                if port not in sw.carriers:
                    delivered.append((name, port, p))
                    continue
                dst = self.by_address(p.tun_ipv4_dst)
                if dst is None:
                    continue
                dst_port = next(o for o, ip in dst.carriers.items()
                                if ip == p.tun_ipv4_dst)
                if (port in sw.geneve) != (dst_port in dst.geneve):
                    continue                 # GRE and Geneve never meet
                # GRE carries a 32-bit key and no option; Geneve a 24-bit
                # VNI and the option.
                tun = {'tunnel_id': p.tunnel_id & 0xFFFFFF
                       if p.tunnel_id is not None else None} \
                    if port in sw.geneve else {'tun_metadata0': None}
                pending.append((dst.name, replace(
                    p, in_port=dst_port, tun_ipv4_src=sw.carriers[port],
                    tun_ipv4_dst=None, **tun)))
        return delivered

    def deliveries(self, host, ofport, **kw):
        """send(), reduced to [(host, ofport)] for assertions."""
        return [(h, p) for h, p, _pkt in self.send(host, ofport, **kw)]
