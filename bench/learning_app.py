"""The controller-learning baseline of bench_switch_learning.py: an os-ken
app that learns MACs the way Ryu's simple_switch_13 and Faucet do, with a
packet-in for each frame from a source not yet learned on its port. It
installs two flows per new source (table 0: this source on this port is
known, go on; table 1: frames to it leave by this port) and sends the
frame on itself (to the learned port, or flooded). Frames from known
sources never reach it. Not product code: the other side of a measured
choice (issue 41)."""
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (CONFIG_DISPATCHER, MAIN_DISPATCHER,
                                       set_ev_cls)
from os_ken.ofproto import ofproto_v1_4

COOKIE = 0x1EA2         # what it learned; its table-miss flows have 0
IDLE = 300


def _mac(b):
    return ':'.join('%02x' % x for x in b)


class Learner(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_4.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ports = {}             # MAC -> port, as last learned

    def _flow(self, dp, table, priority, match, instructions, idle=0,
              cookie=COOKIE):
        p = dp.ofproto_parser
        dp.send_msg(p.OFPFlowMod(dp, cookie=cookie, table_id=table,
                                 priority=priority, match=match,
                                 idle_timeout=idle,
                                 instructions=instructions))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def features(self, ev):
        dp = ev.msg.datapath
        p, o = dp.ofproto_parser, dp.ofproto
        self._flow(dp, 0, 0, p.OFPMatch(), [p.OFPInstructionActions(
            o.OFPIT_APPLY_ACTIONS,
            [p.OFPActionOutput(o.OFPP_CONTROLLER, o.OFPCML_NO_BUFFER)])],
            cookie=0)
        self._flow(dp, 1, 0, p.OFPMatch(), [p.OFPInstructionActions(
            o.OFPIT_APPLY_ACTIONS, [p.OFPActionOutput(o.OFPP_FLOOD)])],
            cookie=0)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        p, o = dp.ofproto_parser, dp.ofproto
        in_port = msg.match['in_port']
        dst, src = _mac(msg.data[0:6]), _mac(msg.data[6:12])
        if not msg.data[6] & 1:             # never learn a group address
            self.ports[src] = in_port
            self._flow(dp, 0, 100, p.OFPMatch(in_port=in_port, eth_src=src),
                       [p.OFPInstructionGotoTable(1)], IDLE)
            self._flow(dp, 1, 100, p.OFPMatch(eth_dst=src),
                       [p.OFPInstructionActions(
                           o.OFPIT_APPLY_ACTIONS,
                           [p.OFPActionOutput(in_port)])], IDLE)
        out = self.ports.get(dst, o.OFPP_FLOOD)
        if out == in_port:
            return                          # never back out of its port
        dp.send_msg(p.OFPPacketOut(dp, buffer_id=o.OFP_NO_BUFFER,
                                   in_port=in_port,
                                   actions=[p.OFPActionOutput(out)],
                                   data=msg.data))
