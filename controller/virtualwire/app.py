"""The os-ken application: forwards OpenFlow events to the engine. Nothing
else; the engine decides and builds messages."""
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (DEAD_DISPATCHER, MAIN_DISPATCHER,
                                       CONFIG_DISPATCHER, set_ev_cls)
from os_ken.ofproto import ofproto_v1_4

# Set by the entry point before os-ken instantiates the app.
ENGINE = None


class VirtualWireApp(app_manager.OSKenApp):
    # 1.4 for standard bundles (atomic multi-flow commits).
    OFP_VERSIONS = [ofproto_v1_4.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.engine = ENGINE

    @set_ev_cls(ofp_event.EventOFPStateChange,
                [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev):
        if ev.state == MAIN_DISPATCHER:
            self.engine.dp_connected(ev.datapath)
        elif ev.state == DEAD_DISPATCHER and ev.datapath.id is not None:
            self.engine.dp_disconnected(ev.datapath)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _flow_stats(self, ev):
        self.engine.multipart_reply(ev.msg)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier(self, ev):
        self.engine.barrier_reply(ev.msg)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev):
        self.engine.packet_in(ev.msg.datapath, ev.msg)

    @set_ev_cls(ofp_event.EventOFPErrorMsg,
                [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        self.engine.switch_error(ev.msg.datapath, ev.msg)
