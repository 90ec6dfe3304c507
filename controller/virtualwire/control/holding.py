"""Held frames (a part of the controller, on its loop): while a vNIC
moves, the frames its destination receives come here instead of being
dropped, with short copies of what its source hands the guest; at
activation the frames the guest never read on its source go to its
destination port, in order, just before the bundle that starts delivering
there (`core.held_frames` decides which; this is the I/O around it).

Cost, said where it is paid: every frame towards a moving vNIC crosses the
destination's OpenFlow connection (and 128 bytes of it the source's) for
as long as the move lasts; the ring per vNIC is bounded (--hold-frames,
--hold-bytes) and OVS bounds what it queues towards us. A vNIC getting
frames faster than --hold-rate stops being held for the rest of its move
(its flows become those of --hold off): its ring would hold less than a
pause, and its packet-ins would slow the flow they were to help. So does
every held vNIC but the one held longest when the controller falls behind
its switches' packet-ins (BEHIND): it reads them all on one loop, and OVS's
queue towards it overflows, losing held frames and copies alike. Frames
that reach the destination after the guest's first frame and before our
bundle lands ('late') are delivered as they come, behind the held ones;
the switch may deliver the next frame, once the bundle is in, before the
last of them (a controller relays in one round trip, the switch in
none): at most one reordering a move at the switch-over, after the guest
runs again. While an activation waits for its source's reads (a few
ms; READ_WAIT at most) every switch's sync waits with it: the held
frames and the bundle go out together.
"""
import logging
import time
from typing import Dict, Optional, Tuple

from virtualwire.control.held_delivery import HeldDelivery
from virtualwire.control.host_rings import HostRings
from virtualwire.control.lag_guard import (RING_BEHIND, LagGuard, RateGuard,
                                            to_shed)
from virtualwire.control.migrations import RELEASED
from virtualwire.control import source_reads
from virtualwire.control.shared import Shared
from virtualwire.control.source_logs import SourceLogs
from virtualwire.core import ids
from virtualwire.core.frames import SOURCE_STOPPED
from virtualwire.core.held_frames import (DEFAULT_BYTES, DEFAULT_FRAMES,
                                          DEFAULT_RATE, HeldFrames)

LOG = logging.getLogger(__name__)

# Seconds between reads of a moving source tap. At 25 ms (twice the
# events, each followed by a sync) the first held delivery after the
# guest's first frame took p50 67 ms against 26 at 50 ms
# (migration-held-run1/2, docs/benchmarks.rst), and the count's bound
# does not need it (core.held_frames).
POLL = 0.05
READ_WAIT = 0.2      # how long activation waits for the source's reads
# ... and for its copy log's cut: a loss (never a duplicate) past it.
CUT_WAIT = 1.0


class Holding:
    def __init__(self, shared: Shared, frames=DEFAULT_FRAMES,
                 max_bytes=DEFAULT_BYTES, rate=DEFAULT_RATE):
        self.shared = shared
        self.stats = shared.stats
        self.stats.update(held_delivered=0, held_evicted=0, held_late=0,
                          held_late_dropped=0, held_abandoned=0,
                          held_late_read=0)
        self.hold_frames, self.hold_bytes = frames, max_bytes  # per vNIC
        self.rate = RateGuard(shared.clock, rate)   # --hold-rate
        self.lag = LagGuard(shared.clock, shared.session_of)
        self.rings = HostRings(shared, frames)   # destinations' own rings
        self.logs = SourceLogs(shared)   # sources' own copy logs
        self.holding: Dict[str, HeldFrames] = {}   # vNIC -> held frames
        # vNIC -> (clock() at activation, its destination), while its
        # source's reads are awaited
        self.awaiting_reads: Dict[str, Tuple[float, str]] = {}
        # vNIC -> the count its source's agent read at STOP, while the
        # switch's own is awaited
        self.agent_reads: Dict[str, int] = {}
        self.delivery = HeldDelivery(shared)   # released and late frames
        # Anything for poll_held to do: its timer posts nothing otherwise.
        self.polls_wanted = False

    @property
    def tables(self):
        return self.shared.tables

    def _record(self, m):
        self.shared.record(m)

    def _held_end(self, host, msg) -> Optional[Tuple[str, str]]:
        """(vNIC, 'held'|'copy'|'late') if this packet-in is a moving
        vNIC's frame held on its destination, copied on its source, or
        reaching its destination after the guest runs there (the switch
        still holds the flows of the move)."""
        cookie = getattr(msg, 'cookie', 0)
        if cookie & ids.COOKIE_MARK_MASK != ids.COOKIE_MARK:
            return None
        wire = self.tables.wires.get(cookie & 0xFFFFFFFF)
        if wire is None:
            return None
        in_port = msg.match.get('in_port')
        for v in wire.ends():
            released = self.delivery.released
            if not self.tables.holds(v) and v not in released:
                continue
            if in_port == self.tables.placement.claims.get(v, {}).get(host):
                continue           # the guest's own frame (activation)
            mv = self.tables.placement.moves.get(v)
            if mv is None:
                # The move is over (its source QEMU quit) and this host
                # still sends us its frames: its bundle is not in yet.
                if host in (released.get(v, ('',))[0],
                            self.awaiting_reads.get(v, (0, ''))[1]):
                    return v, 'late'
                continue
            if host == mv.destination:
                return v, 'late' if mv.activated else 'held'
            if host == mv.source and (not mv.activated or
                                      v in self.awaiting_reads):
                # Copies the source sent before its answer to our read
                # count, even once the move activated (at the source's
                # STOP the last of them may still be on their way):
                # each one missed would put the cut one too early, a
                # frame the guest read delivered again.
                return v, 'copy'
        return None

    def hold_packet_in(self, host, msg) -> bool:
        """Keep a held frame or a source copy; True if it was one."""
        if self.logs.answered(host, msg) or self.rings.answered(host, msg):
            return True
        end = self._held_end(host, msg)
        if end is None:
            return False
        v, what = end
        self.polls_wanted = True
        data = bytes(msg.data or b'')
        if what == 'late':
            self._deliver_late(v, host, data)
            return True
        hf = self._frames_of(v)
        mv = self.tables.placement.moves.get(v)
        if what == 'held' or (mv is not None and self.rings.ring_of(
                v, mv.destination)):    # held on the host: its copies
            self.rate.counted(v)
        if what == 'held':
            hf.hold(data)
        else:
            hf.copied(data)
        return True

    def _deliver_late(self, vnic, host, frame):
        port = self.tables.placement.claims.get(vnic, {}).get(host)
        s = self.shared.session_of(host)
        if port is None or s is None:
            self.stats['held_late_dropped'] += 1
            return
        if vnic in self.awaiting_reads:
            # Not decided yet: it is held like the others.
            self.holding[vnic].hold(frame)
            return
        self.delivery.late_frame(vnic, host, port, frame)

    # ---- the source's reads --------------------------------------------------
    def poll_held(self):
        """Timer (while polls_wanted): read every moving source tap's
        transmit count (frames its QEMU read). Frees what moves no longer
        need. (Only while leading: the controller asks.)"""
        moves = self.tables.placement.moves
        for v in [v for v in self.holding if v not in moves and
                  v not in self.awaiting_reads]:
            del self.holding[v]
        self.rate.keep(moves)
        self.delivery.report(moves, self._in_place)
        self._behind(self.lag.oldest_out(self.holding, {
            v: mv.source for v, mv in moves.items() if v in self.holding}))
        for v, mv in moves.items():
            if not mv.activated and self.tables.holds(v) and \
                    not self._too_fast(v):
                self._frames_of(v)
                if self.logs.log_of(v, mv) is not None:
                    self.logs.start(v, mv)      # its source counts there
                    continue
                # Asked again even with one unanswered: each answer, in
                # order, is the freshest count a late release can use
                # (one at a time left it 610 copies stale: CI of 6e6d2df).
                self._read_source(v, mv.source, None)
        # Beats to the rings of the moves still held (none once released:
        # the ring passes then).
        self.rings.beat({v: moves[v].destination for v in self.holding
                         if v in moves and self.tables.holds(v)})
        self.rings.close_done(moves, self._in_place)
        self.logs.close_done(moves)
        self.polls_wanted = bool(moves or self.holding or
                                 self.delivery.busy() or self.awaiting_reads or
                                 self.rings.open or self.logs.open)

    def _in_place(self, host) -> bool:
        """Has `host`'s switch confirmed our last bundle? Until then it
        may still send us a released vNIC's frames from its held flows
        (bench migration-held-run4, move 12: a destination took its bundle
        ~450 ms after the guest's first frame, the move ended meanwhile,
        and then 165 such frames a stream were dropped here)."""
        s = self.shared.session_of(host)
        return s is None or s.installed is None or s.barrier_answered

    def _too_fast(self, vnic) -> bool:
        """Over --hold-rate (control.lag_guard.RateGuard) the flows go back
        to those of --hold off for this move; the record says why."""
        why = self.rate.too_fast(vnic)
        if why is not None:
            self._abandon(vnic, why)
        return why is not None

    def _behind(self, lag):
        """Over control.lag_guard's limits, vNICs stop holding (the one
        held longest last): each held frame is a packet-in on its
        destination and a copy's on its source, read on our one loop."""
        moves = self.tables.placement.moves
        held = [v for v in self.holding if v in moves and
                not moves[v].activated and self.tables.holds(v)]
        # Held on their hosts: shed later (lag_guard.RING_BEHIND).
        ring = [v for v in held if self.rings.ring_of(v, moves[v].destination)]
        for v in to_shed(lag, [v for v in held if v not in ring]) + (
                ring if lag > RING_BEHIND else []):
            self._abandon(v, 'the controller ran %d ms behind its '
                             "switches' packet-ins, holding %d vNICs" % (
                                 round(lag * 1e3), len(held)))

    def _abandon(self, vnic, why):
        self.rate.forget(vnic)
        self.tables.hold_by_vnic[vnic] = False
        self.tables.moved(vnic)
        self.holding.pop(vnic, None)
        self.stats['held_abandoned'] += 1
        LOG.info('vNIC %s: not holding its frames (%s)', vnic, why)
        # When (wall clock): what was held until then is dropped, so a
        # guest already running on its destination loses up to here.
        m = self.shared.migrations.held_released(vnic, {
            'abandoned': why, 'abandoned_at': round(time.time(), 3)})
        self._record(m)

    def _frames_of(self, vnic) -> HeldFrames:
        hf = self.holding.get(vnic)
        if hf is None:
            hf = self.holding[vnic] = HeldFrames(self.hold_frames,
                                                 self.hold_bytes)
        return hf

    def _read_source(self, vnic, host, then):
        """Ask `host` for the vNIC's tap counters (control.source_reads);
        then(reads, why), reads None when there is no count."""
        def done(reads, dropped, why, behind):
            self._behind(behind)
            hf = self.holding.get(vnic)
            if reads is not None and hf is not None:
                hf.polled(reads, hf.n_copies, dropped)
            if then is not None:
                then(reads, why)
        source_reads.ask(self.shared, self.lag, vnic, host, done)

    # ---- activation ----------------------------------------------------------
    def held_activation(self, vnic, host, stop_reads=None, stopped_at=None):
        """The guest runs on `host` (or will: its source stopped): read
        its source's last count, then release (the sync waits for it,
        READ_WAIT at most). `stop_reads`: the count the source's agent
        read at STOP. With every copy up to its cut here, it is the
        release's at once; else the switch's answer brings the copies
        before it (the lower count of the two is the guest's: QEMU reads
        a frame or two after STOP and keeps them), and without an answer
        in time the agent's count alone places the cut. `stopped_at`:
        QEMU's own STOP time, for the source's copy log
        (host.copy_log: the count at STOP)."""
        if vnic not in self.holding:
            return
        mv = self.tables.placement.moves.get(vnic)
        source = mv.source if mv is not None else None
        hf = self.holding[vnic]
        if self._trigger(vnic) == SOURCE_STOPPED:
            hf.mark_stop()
        self.awaiting_reads[vnic] = (self.shared.clock(), host)
        if mv is not None and self.rings.ring_of(vnic, host) is not None \
                and self.logs.cut(vnic, mv, stop_reads,
                                  self.rings.ring_frames,
                                  lambda fields, view: self._release_cut(
                                      vnic, host, stop_reads, fields, view),
                                  stopped_at):
            if stop_reads is not None:      # for a cut that does not come
                self.agent_reads[vnic] = stop_reads
            return
        if stop_reads is not None and hf.copies_reach(stop_reads):
            self._release(vnic, host, stop_reads, 'agent at STOP')
            return
        if stop_reads is not None and hf.base is not None and hf.copies \
                and self.rings.ring_of(vnic, host) is not None:
            # A ring holds the frames past the last copy come here in the
            # same order and skips those read (`skip`): no wait for the
            # copies behind our packet-in backlog, which put the held
            # frames up to 395 ms past RESUME (bench migration-hostheld).
            self._release(vnic, host, stop_reads,
                          'agent at STOP (ahead of its copies)')
            return
        if stop_reads is not None:
            self.agent_reads[vnic] = stop_reads

        def then(reads, why):
            agent = self.agent_reads.pop(vnic, None)
            if agent is not None and (reads is None or agent < reads):
                reads, why = agent, 'agent at STOP (switch: %s)' % why
            self._release(vnic, host, reads, why)
        self._read_source(vnic, source, then)

    def _release_cut(self, vnic, host, reads, fields, view):
        """The source's copy log answered where the guest stopped."""
        if fields is None:
            self._release(vnic, host, reads, 'agent at STOP (copy log: %s)'
                          % view.get('cut_error'))
            return
        if self.awaiting_reads.pop(vnic, None) is None:
            return                          # released already (timeout)
        self.agent_reads.pop(vnic, None)
        hf = self.holding.pop(vnic, None)
        if hf is not None:
            self.rings.release(vnic, host, hf, None, 'copy log (count: %s)'
                               % view.get('reads_from'), cut=(fields, view))

    def _release(self, vnic, host, reads, why):
        self.logs.forget(vnic)
        if self.awaiting_reads.pop(vnic, None) is None:
            return                          # released already
        hf = self.holding.pop(vnic, None)
        port = self.tables.placement.claims.get(vnic, {}).get(host)
        if hf is None or port is None:
            return
        if self.rings.ring_of(vnic, host) is not None:
            if reads is None and hf.stop_mark is None and \
                    hf.last_reads is not None:
                reads, why = hf.last_reads, 'last-poll (%s)' % why
            self.rings.release(vnic, host, hf, reads, why)
            return
        if reads is None and hf.stop_mark is not None:
            # Activated at the source's STOP and the source did not count
            # in time (a busy switch: 6.5 s once, under two TCG guests
            # leaving it): its last poll came before STOP, and a cut from
            # it would deliver frames the guest read. What came after the
            # STOP was said goes; the few unread before it are withheld.
            r = hf.release_from_stop()
            why = 'from STOP (%s)' % why
        else:
            if reads is None and hf.last_reads is not None:
                # The source is gone (its QEMU quit, a last-resort
                # activation) or slow: its last poll, taken after STOP
                # unless the guest stopped within the last POLL (then a
                # few frames it read go again).
                reads, why = hf.last_reads, 'last-poll (%s)' % why
            r = hf.release(reads)
        self.delivery.queue(vnic, host, port, hf, r.frames)
        self.stats['held_delivered'] += len(r.frames)
        self.stats['held_evicted'] += r.evicted
        view = dict(r.view(), source_reads=why, source_behind_ms=round(
            self.lag.recorded(vnic) * 1e3))
        if self.tables.learn_held and hf.stop_mark is None:
            # Not activated at the source's STOP: the switch learned
            # delivery on the guest's first frame, so these come behind
            # newer ones. (Asked of the frames, not of the migration's
            # record, which may have ended since.)
            view['after_switch_learned'] = True
        LOG.info('vNIC %s: delivering %d held frames on %s (%s)', vnic,
                 len(r.frames), host, ', '.join(
                     '%s %s' % (k, v) for k, v in sorted(view.items())))
        self._record(self.shared.migrations.held_released(vnic, view))
        # Sent with the next sync, just before its bundle.
        self._record(self.shared.migrations.step(vnic, RELEASED))

    def _trigger(self, vnic):
        m = next((m for m in self.shared.migrations.active.values()
                  if vnic in m.vnics), None)
        return m.activated_by.get(vnic) if m is not None else None

    def awaiting_source(self) -> bool:
        """Does the sync wait for a source's reads? Not past READ_WAIT
        (the poll timer's events bring the sync back): then every held
        frame goes, and the record says why."""
        now = self.shared.clock()
        for v, (since, host) in list(self.awaiting_reads.items()):
            if self.logs.awaits(v):
                # Its copies are on its source host: only that host's cut
                # places it (the agent's count alone gave 1,169 duplicates
                # in CI run 54). Past CUT_WAIT the move goes on unheld.
                if now - since >= CUT_WAIT:
                    self.awaiting_reads.pop(v, None)
                    self.agent_reads.pop(v, None)
                    self.logs.forget(v)
                    self._abandon(v, "its source's copy log did not answer "
                                  'the cut in %g s' % CUT_WAIT)
                continue
            if now - since >= READ_WAIT:
                agent = self.agent_reads.pop(v, None)
                if agent is not None:
                    self._release(v, host, agent, 'agent at STOP (switch: '
                                  'timeout)')
                elif self.lag.worst(v) > READ_WAIT:
                    # Its polls come back later than this: the last one
                    # answered may predate STOP, and a cut from it would
                    # go wrong by as much (80 lost beyond the bound in a
                    # flood move 571 ms behind). Go on without holding.
                    self.awaiting_reads.pop(v, None)
                    self._abandon(v, "its source's count did not come in "
                                  'time: the controller ran %d ms behind '
                                  "its switches' packet-ins" % round(
                                      self.lag.recorded(v) * 1e3))
                else:
                    self._release(v, host, None, 'timeout')
        return bool(self.awaiting_reads) or self.rings.waiting()

    def packet_outs_for(self, host) -> list:
        """The held frames to send `host` before its next bundle."""
        return self.delivery.packet_outs_for(host)
