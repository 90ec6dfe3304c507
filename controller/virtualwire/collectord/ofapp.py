"""The collector's OpenFlow side: each switch connects here as to one more
controller (`vw-host-setup --collector`); we make the connection a SLAVE
at once and ask for flow-removed messages on it. A SLAVE reads (flow
stats) and hears (flow-removed), and the switch refuses every change it
sends (OFPBRC_IS_SLAVE): this process cannot alter a flow table, even
with a bug.

The role is asked with Nicira's role request, which carries no generation
id: OpenFlow's own SLAVE request must carry one no older than the
leaders' term (`control.roles`), and the collector has no term and must
not raise it.
"""
import struct

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (CONFIG_DISPATCHER, DEAD_DISPATCHER,
                                       MAIN_DISPATCHER, set_ev_cls)
from os_ken.ofproto import ofproto_v1_4 as ofp
from os_ken.ofproto import ofproto_v1_4_parser as parser

from virtualwire.southbound.lazy_stats import install as lazy_stats
from virtualwire.tls import peer_names

NX_VENDOR = 0x00002320
NXT_ROLE_REQUEST = 10
NX_ROLE_SLAVE = 2
# Every reason a flow goes away (idle, hard, delete, group delete, meter
# delete, eviction).
ALL_REASONS = 0x3F


def slave_request(dp):
    return parser.OFPExperimenter(dp, NX_VENDOR, NXT_ROLE_REQUEST,
                                  struct.pack('!I', NX_ROLE_SLAVE))


def hear_flow_removed(dp):
    """A SLAVE gets no flow-removed by default; the final counts of a
    flow that went away (a migration, a wire deleted) exist nowhere else."""
    return parser.OFPSetAsync(dp, [parser.OFPAsyncConfigPropReasons(
        ofp.OFPACPT_FLOW_REMOVED_SLAVE, mask=ALL_REASONS)])


class CollectorApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofp.OFP_VERSION]

    def __init__(self, *args, fleet=None, loop=None, **kwargs):
        super().__init__(*args, **kwargs)
        if fleet is None or loop is None:
            raise TypeError('CollectorApp needs fleet= and loop=')
        self.fleet, self.loop = fleet, loop
        lazy_stats()      # counters and keys only: no action decoded

    @set_ev_cls(ofp_event.EventOFPStateChange,
                [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev):
        dp = ev.datapath
        if ev.state == MAIN_DISPATCHER:
            for msg in (slave_request(dp), hear_flow_removed(dp)):
                dp.send_msg(msg)
            self.loop.post(self.fleet.switch_up, dp.id, dp,
                           peer_names(dp.socket))
        elif ev.state == DEAD_DISPATCHER and dp.id is not None:
            self.loop.post(self.fleet.switch_down, dp.id, dp)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _flow_stats(self, ev):
        msg = ev.msg
        more = bool(msg.flags & ofp.OFPMPF_REPLY_MORE)
        self.loop.post(self.fleet.reply, msg.datapath.id, msg.datapath,
                       msg.xid, msg.body, more)

    @set_ev_cls(ofp_event.EventOFPFlowRemoved, MAIN_DISPATCHER)
    def _flow_removed(self, ev):
        self.loop.post(self.fleet.flow_removed, ev.msg.datapath.id,
                       ev.msg.datapath, ev.msg)

    @set_ev_cls(ofp_event.EventOFPErrorMsg,
                [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        self.logger.warning('switch %s error type=%s code=%s',
                            ev.msg.datapath.id, ev.msg.type, ev.msg.code)


def send(dp, msg):
    """Fleet's `send`: the message's xid."""
    dp.set_xid(msg)
    dp.send_msg(msg)
    return msg.xid
