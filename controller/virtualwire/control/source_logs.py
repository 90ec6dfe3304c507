"""Copy logs on moving vNICs' source hosts (a part of control.holding):
where both hosts of a move keep frames themselves, the source switch
copies what it hands the guest's tap to its own `vw-frame-hold`
(`pipeline.host_hold.to_log`, `host.copy_log`) instead of to us. This
part names the tap to that log while the move is pending (it reads the
tap's counters there), asks it at activation where the guest stopped
reading (`cut`, with the agent's count at STOP), and hands the answer to
the destination's ring (control.host_rings). No copy crosses a
connection, so the release no longer waits behind a backlog of them.

Messages and answers cross the source switch's authenticated OpenFlow
session, as the rings' do; an answer is believed only from that host's
session, for a cut still awaited there.
"""
from typing import Callable, Dict, Optional, Tuple

from virtualwire.control.host_rings import (answer_from, message_frame,
                                            take_awaited)
from virtualwire.core.model import Location
from virtualwire.pipeline import host_hold
from virtualwire.southbound import openflow


Then = Callable[[Optional[dict], dict], None]

# Seconds between namings of a pending move's tap to its log: the log
# drops one not named for host.copy_log.MAX_AGE (60 s), and a move may
# take minutes.
LOG_AGAIN = 10.0


class SourceLogs:
    """Owns the logs opened on source hosts and the cuts not answered."""

    def __init__(self, shared):
        self.shared = shared
        self.open: Dict[str, Tuple[str, int]] = {}   # vNIC -> (host, slot)
        self.told: Dict[str, float] = {}    # vNIC -> when its log was named
        # (host, slot) -> (vNIC, message id, when asked, then)
        self.awaited: Dict[Tuple[str, int], Tuple[str, int, float, Then]] = {}
        self.next_id = 1

    @property
    def tables(self):
        return self.shared.tables

    def log_of(self, vnic, mv) -> Optional[Tuple[int, int]]:
        """(hold port, slot) on the move's source if its copies stay
        there (the flows' rule: pipeline.host_hold.copies_on_host)."""
        claims = self.tables.placement.claims.get(vnic, {})
        src, dst = claims.get(mv.source), claims.get(mv.destination)
        if src is None or dst is None or not self.tables.copies_on_hosts:
            return None
        return host_hold.copies_on_host(
            self.tables.hosts, Location(mv.source, src),
            Location(mv.destination, dst), self.tables.hold_on_hosts)

    def any_logged(self) -> bool:
        """Whether some move's copies stay on its source host: nothing
        of it reaches us before STOP, so the poll names its tap."""
        return self.tables.copies_on_hosts and any(
            self.log_of(v, mv)
            for v, mv in self.tables.placement.moves.items())

    def _say(self, host, hold_port, doc) -> Optional[int]:
        s = self.shared.session_of(host)
        if s is None:
            return None
        ident, self.next_id = self.next_id, self.next_id + 1
        s.dp.send_msg(openflow.packet_out(hold_port, message_frame(
            dict(doc, id=ident))))
        return ident

    def start(self, vnic, mv) -> None:
        """Name the source tap to its log: once a move, and again every
        LOG_AGAIN while it is pending, which keeps the log."""
        log = self.log_of(vnic, mv)
        now = self.shared.clock()
        if log is None or (self.open.get(vnic) == (mv.source, log[1]) and
                           now - self.told.get(vnic, now) < LOG_AGAIN):
            return
        vp = self.tables.hosts[mv.source].vnic_map().get(vnic)
        if vp is None or not vp.port_name:
            return
        if self._say(mv.source, log[0], {'op': 'log', 'slot': log[1],
                                         'port': vp.port_name}):
            self.open[vnic] = (mv.source, log[1])
            self.told[vnic] = now

    def cut(self, vnic, mv, reads, ring_frames, then: Then,
            stopped_at=None) -> bool:
        """Ask the source's log where the guest stopped reading; then(
        fields, view) with its answer (fields None: it could not say).
        `stopped_at`: QEMU's STOP (its agent's word), which the log times
        its count at STOP by. False if the move keeps no log there."""
        log = self.log_of(vnic, mv)
        if log is None or self.open.get(vnic) != (mv.source, log[1]):
            return False
        doc = {'op': 'cut', 'slot': log[1], 'ring_frames': ring_frames}
        if reads is not None:
            doc['reads'] = reads
        if stopped_at is not None:
            doc['stopped_at'] = stopped_at
        ident = self._say(mv.source, log[0], doc)
        if ident is None:
            return False
        self.awaited[(mv.source, log[1])] = (
            vnic, ident, self.shared.clock(), then)
        return True

    def answered(self, host, msg) -> bool:
        """Is this packet-in an answer from `host`'s copy log?"""
        doc = answer_from(self.tables, host, msg)
        if doc is None or doc.get('op') not in ('logging', 'cut',
                                                'unlogged'):
            return False
        if doc['op'] != 'cut':
            return True
        got = take_awaited(self.awaited, host, doc, 'a cut from its copy log')
        if got is None:
            return True
        vnic, _, asked, then = got
        view = dict(doc.get('view') or {}, copies_on='host',
                    cut_ms=round((self.shared.clock() - asked) * 1e3, 1))
        fields = doc.get('fields')
        if doc.get('error') or not isinstance(fields, dict):
            view['cut_error'] = doc.get('error', 'no fields')
            fields = None
        then(fields, view)
        return True

    def awaits(self, vnic) -> bool:
        """Is a cut for `vnic` asked and not answered yet?"""
        return any(got[0] == vnic for got in self.awaited.values())

    def forget(self, vnic) -> None:
        """A cut given up (its activation went on without it)."""
        for key, got in list(self.awaited.items()):
            if got[0] == vnic:
                del self.awaited[key]

    def close_done(self, moving) -> None:
        """Close the logs of vNICs whose moves are over."""
        for vnic, (host, slot) in list(self.open.items()):
            if vnic in moving or any(g[0] == vnic
                                     for g in self.awaited.values()):
                continue
            del self.open[vnic]
            self.told.pop(vnic, None)
            h = self.tables.hosts.get(host)
            if h is not None and h.hold_port is not None:
                self._say(host, h.hold_port, {'op': 'unlog', 'slot': slot})
