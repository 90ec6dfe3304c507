"""One connected switch, as the controller sees it: what it holds (dumped
on connect), the bundles and barriers we sent it, and multipart requests
waiting for replies. Owned by the control loop; sends, never waits."""
import time
from typing import Dict, Optional

from virtualwire.pipeline.flow import apply_diff
from virtualwire.southbound import flowmod_bytes, geneve_tlv, openflow


class SwitchSession:
    def __init__(self, dp, now=time.time, identity=None):
        self.dp = dp
        # Names of the switch's verified certificate (None without TLS).
        self.identity = identity
        self.cert_expires: Optional[float] = None     # its Unix time
        self._now = now
        self.installed: Optional[Dict] = None   # {key: Flow} once dumped
        self.needs_full = True       # diff the whole table on next sync
        self.bundle_id = 1
        self.connected_at = now()
        self.confirmed_at = None     # barrier reply after our last bundle
        self.barrier_xid = None
        self.barrier_answered = True   # no bundle of ours still unconfirmed
        self.barrier_sent_at: Optional[float] = None   # while unanswered
        # Generations (control.programming): of the last bundle sent, and
        # the last one the switch confirmed holding.
        self.sent_gen = 0
        self.confirmed_gen = 0
        self.pending = {}            # xid -> (body list, on_done(body))
        self.dump_sent_at = None
        self.dumped_at = None        # when its table was last read whole
        # The Geneve option's field map, sent on this connection (xid: a
        # switch that has it already answers an error, not a fault).
        self.tlv_xid = None

    @property
    def synced(self):
        return self.installed is not None

    def request(self, msg, on_done):
        """Send a multipart request; on_done(body) when its last reply
        arrives (on the loop, via `reply`)."""
        self.dp.set_xid(msg)
        self.pending[msg.xid] = ([], on_done)
        self.dp.send_msg(msg)
        return msg.xid

    def reply(self, msg, more):
        entry = self.pending.get(msg.xid)
        if entry is None:
            return
        entry[0].extend(msg.body)
        if not more:
            del self.pending[msg.xid]
            entry[1](entry[0])

    def dump(self, on_done):
        """Ask for the whole flow table."""
        self.dump_sent_at = self._now()
        return self.request(openflow.flow_stats_request(), on_done)

    def send_diff(self, diff, before=(), after=()):
        """The difference as one atomic bundle, then a barrier whose reply
        says every change is in place. Returns the number of flow mods.
        `before`: messages sent ahead of the bundle (held frames' packet-
        outs: OVS runs a packet-out as it reads it, a bundle's only once
        its flows are in, when a newer frame may be delivered first);
        `after`: messages sent after it and before its barrier (flows the
        switch learned itself, deleted once what learned them is gone)."""
        assert self.installed is not None, 'diff before the dump'
        # Built whole before anything is sent or recorded: a flow that
        # cannot be encoded raises here, with this switch unchanged.
        bundle = flowmod_bytes.diff_bundle(self.bundle_id, diff)
        if self.tlv_xid is None and uses_geneve(diff):
            m = geneve_tlv.tlv_map(self.dp)
            self.dp.set_xid(m)
            self.tlv_xid = m.xid
            self.dp.send_msg(m)     # before the bundle that needs it
        for m in before:
            self.dp.send_msg(m)
        apply_diff(self.installed, diff)
        for m in bundle:
            self.dp.send_msg(m)
        self.bundle_id = (self.bundle_id + 1) & 0xFFFFFFFF or 1
        for m in after:
            self.dp.send_msg(m)
        barrier = openflow.barrier()
        self.dp.set_xid(barrier)
        self.barrier_xid = barrier.xid
        self.barrier_answered = False
        if self.barrier_sent_at is None:    # the oldest unanswered one
            self.barrier_sent_at = self._now()
        self.dp.send_msg(barrier)
        return len(diff.add) + len(diff.modify) + len(diff.delete)

    def barrier_waited(self):
        """Seconds its oldest unanswered barrier has waited (0: none)."""
        return 0.0 if self.barrier_sent_at is None else \
            self._now() - self.barrier_sent_at

    def barrier_reply(self, msg):
        if msg.xid == self.barrier_xid:
            self.barrier_answered = True
            self.barrier_sent_at = None
            self.confirmed_at = self._now()
            self.confirmed_gen = self.sent_gen


def uses_geneve(diff):
    """Does any flow added or changed match or set Geneve's option field?"""
    for f in diff.add + diff.modify:
        if any(k == geneve_tlv.FIELD for k, _ in f.match) or any(
                a[0] == 'set_field' and a[1] == geneve_tlv.FIELD
                for a in f.actions):
            return True
    return False


def hang_up(dp):
    """End a switch's connection. os-ken's close() closes the socket under
    its own receive loop (a ValueError traceback each time); shutting it
    down instead lets that loop see the end and close it itself. The fake
    fabric's datapaths have no socket: closed directly."""
    sock = getattr(dp, 'socket', None)
    if sock is None:
        dp.close()
        return
    from virtualwire.listen_guard import cut
    cut(sock)
