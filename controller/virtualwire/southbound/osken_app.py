"""The os-ken application: every OpenFlow event becomes an event on the
control loop. Nothing else; the controller decides and builds messages.

The controller and loop arrive as keyword arguments of
`AppManager.instantiate_apps` (no module global)."""
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (CONFIG_DISPATCHER, DEAD_DISPATCHER,
                                       MAIN_DISPATCHER, set_ev_cls)
from os_ken.ofproto import ofproto_v1_4

from virtualwire.tls import peer_expiry, peer_names


class VirtualWireApp(app_manager.OSKenApp):
    # 1.4 for standard bundles (atomic multi-flow commits).
    OFP_VERSIONS = [ofproto_v1_4.OFP_VERSION]

    def __init__(self, *args, controller=None, loop=None, **kwargs):
        super().__init__(*args, **kwargs)
        if controller is None or loop is None:
            raise TypeError('VirtualWireApp needs controller= and loop=')
        self.controller, self.loop = controller, loop

    @set_ev_cls(ofp_event.EventOFPStateChange,
                [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev):
        if ev.state == MAIN_DISPATCHER:
            # Who the switch is, by its certificate (None without TLS):
            # the controller admits it or not (control.admission).
            self.loop.post(self.controller.on_switch_up, ev.datapath,
                           peer_names(ev.datapath.socket),
                           peer_expiry(ev.datapath.socket))
        elif ev.state == DEAD_DISPATCHER and ev.datapath.id is not None:
            self.loop.post(self.controller.on_switch_down, ev.datapath)

    @set_ev_cls([ofp_event.EventOFPFlowStatsReply,
                 ofp_event.EventOFPPortStatsReply], MAIN_DISPATCHER)
    def _flow_stats(self, ev):
        msg = ev.msg
        more = bool(msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE)
        self.loop.post(self.controller.on_multipart_reply, msg, more)

    @set_ev_cls(ofp_event.EventOFPFlowRemoved, MAIN_DISPATCHER)
    def _flow_removed(self, ev):
        self.loop.post(self.controller.on_flow_removed, ev.msg)

    @set_ev_cls(ofp_event.EventOFPEchoReply, MAIN_DISPATCHER)
    def _echo_reply(self, ev):
        # A liveness probe's answer (control.takeover); os-ken's own
        # handler still acknowledges it.
        self.loop.post(self.controller.admission.on_echo_reply, ev.msg)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier(self, ev):
        self.loop.post(self.controller.on_barrier_reply, ev.msg)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev):
        self.loop.post(self.controller.on_packet_in, ev.msg)

    @set_ev_cls(ofp_event.EventOFPErrorMsg,
                [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        self.loop.post(self.controller.on_switch_error, ev.msg)
