"""Copies of what a moving guest's *source* tap is handed, kept on the
source host itself (pure: `vw-frame-hold` feeds it copies, its tap's
counters and messages, and sends what it returns).

Why here: the destination's ring (host.hold_ring) is released with the
digests of the last frames the guest read on its source. Those came from
copies the source switch sent the controller, one packet-in per frame;
behind that backlog a release came up to 391 ms after RESUME, and the
controller let moves go when it fell 1.5-1.8 s behind (bench
migration-hostheld runs 7-9). Kept here, a copy crosses no connection:
the switch tags it with the source port's slot and priority COPY_PCP and
outputs it to `vw-hold`, and this log keeps its digest
(`core.held_frames.HeldFrames`, the same alignment the controller uses).

The alignment needs the tap's reads (its kernel transmit count: frames
QEMU took) against the copies seen: every few ms while copies come the
daemon reads the tap's counters from sysfs (`sample`) and sends itself a
marker through the switch (MARK_SLOT: the switch hands it straight back).
The switch writes a frame and its copy in one flush, in no fixed order,
so a frame QEMU read before the reading may have its copy still on the
way; but OVS's userspace datapath handles every non-PMD port's receive
batch and its flush on one thread, one after another, so when the marker
comes back every copy written before it is in the socket ahead of it
(`marked`). A reading so settled bounds the base exactly from below; the
bound is the base whenever the guest had read all it was handed then.
Where no marker comes back within MARK_WAIT (a switch without the bounce
flow, or one that flushes on several threads: DPDK's PMDs), a reading is
set against the copies SETTLE after it once the socket is drained, and a
bound counts only once CONFIRM such readings agree.

At STOP the controller asks (`cut`, with the count the source's agent
read) and gets back the release's fields for the destination's ring
(`core.host_release.release_doc`), which it forwards there. The tap read
then bounds the base only up to the agent's count: a read after the
cut's message passed the switch may be of a frame whose copy is behind
it (`_cut_reading`).

The count at STOP. QEMU (7.2, net/queue.c) queues a frame its stopped
guest cannot take and never delivers it; after STOP it reads exactly one
more from the tap when one is there (then stops polling it), once the
migration thread lets its main loop run again, after the last copy. The
agent's count comes with libvirt's event, often after that read: the
frame counted as read is then lost (1 a vNIC in 16 of 20 bench moves,
migration-final-run1). With QEMU's own STOP time (`stopped_at`, its QMP
event's timestamp) the log takes the lowest reading it took after it:
every such reading is the count at STOP or that one more, never less,
so the cut can err only towards a loss, never a duplicate.

What it protects against: the late releases and shed moves of a
controller behind its packet-ins. What it does not: a copy the socket
dropped (its queue full: counted, and the cut then names no run: every
frame held goes, duplicates possible, said in the answer), or, without the
marker, one the switch wrote more than SETTLE after a frame QEMU read (a
switch thread descheduled between its two writes) in CONFIRM readings:
the base is then one too high, a frame delivered twice.
"""
import collections
import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from virtualwire.core.held_frames import HeldFrames
from virtualwire.core.host_release import release_doc
from virtualwire.pipeline.host_hold import MARK_SLOT, message_frame

MAX_LOGS = 64           # moving vNICs copied at once on one host
SAMPLE_EVERY = 0.005    # s between readings of a tap while copies come
# s between the cheaper readings that only time the count at STOP (no
# marker, not set against the copies): QEMU's one read after STOP came
# 1.4-10 ms after its STOP event in bench moves the 5 ms readings missed.
STOP_READ_EVERY = 0.0005
# s a reading waits for its marker before it is set against the copies
# without one (its marker back: at once). Its round trip through the lab's
# userspace switch: well under 1 ms unless a thread is descheduled.
MARK_WAIT = 0.05
SETTLE = 0.002          # s before an unmarked reading is set against them
# Unmarked readings that must agree on a bound of the base before it
# counts: one can overshoot (its copies later than SETTLE: a switch
# thread descheduled between the two writes, under TCG guests: 7 frames
# once, test_host_held_switchover), the true base recurs whenever the
# guest has read all it was handed.
CONFIRM = 3
MAX_AGE = 60.0          # s a log lasts unclosed (its move lost)
MAX_RING = 1 << 20      # the largest destination ring a cut is made for
HISTORY = 4096          # readings kept per log (2 s at STOP_READ_EVERY)
_IFNAME = re.compile(r'^[A-Za-z0-9_.:-]{1,15}$')    # a Linux interface name
OPS = ('log', 'cut', 'unlog')


class BadLogMessage(ValueError):
    """A message this log cannot act on: the answer says why."""


@dataclass
class LogMessage:
    op: str                         # log | cut | unlog
    slot: int
    ident: int = 0
    port: Optional[str] = None      # log: the source tap
    reads: Optional[int] = None     # cut: the tap's count at STOP
    ring_frames: int = 2048         # cut: the destination ring's bound
    stopped_at: Optional[float] = None  # cut: QEMU's STOP (Unix time)


def parse_log_message(doc: dict) -> LogMessage:
    op, slot, ident = doc.get('op'), doc.get('slot'), doc.get('id', 0)
    if op not in OPS:
        raise BadLogMessage('op must be one of %s, not %r' % (OPS, op))
    if not isinstance(slot, int) or isinstance(slot, bool) or \
            not 1 <= slot < MARK_SLOT:
        raise BadLogMessage('slot must be a VLAN id 1-%d, not %r'
                            % (MARK_SLOT - 1, slot))
    if not isinstance(ident, int) or isinstance(ident, bool):
        raise BadLogMessage('id must be an integer, not %r' % (ident,))
    port = doc.get('port')
    if port is not None and (not isinstance(port, str) or
                             not _IFNAME.match(port)):
        raise BadLogMessage('port must be an interface name, not %r'
                            % (port,))
    if op == 'log' and port is None:
        raise BadLogMessage('log needs the source tap (port)')
    reads = doc.get('reads')
    if reads is not None and (not isinstance(reads, int) or
                              isinstance(reads, bool) or reads < 0):
        raise BadLogMessage('reads must be a count, not %r' % (reads,))
    ring = doc.get('ring_frames', 2048)
    if not isinstance(ring, int) or isinstance(ring, bool) or \
            not 1 <= ring <= MAX_RING:
        raise BadLogMessage('ring_frames must be 1-%d, not %r'
                            % (MAX_RING, ring))
    stopped_at = doc.get('stopped_at')
    if stopped_at is not None and (
            isinstance(stopped_at, bool) or
            not isinstance(stopped_at, (int, float)) or
            not 0 < stopped_at < 1e11):
        raise BadLogMessage('stopped_at must be a Unix time, not %r'
                            % (stopped_at,))
    return LogMessage(op, slot, ident, port, reads, ring,
                      None if stopped_at is None else float(stopped_at))


@dataclass
class SlotLog:
    opened: float
    copies: HeldFrames
    port: Optional[str] = None
    told: float = float('-inf')     # the controller's last `log` message
    last_sample: float = float('-inf')
    last_stop_read: float = float('-inf')
    # (reads, dropped, when, its marker) read from the tap, not set
    # against the copies yet
    pending: Optional[Tuple[int, Optional[int], float, int]] = None
    samples: int = 0
    marked: int = 0                 # of them settled by their marker
    lost: int = 0                   # copies the socket dropped (maybe)
    # bound of the base -> readings that gave it (those below the base
    # taken are let go)
    bounds: collections.Counter = field(default_factory=collections.Counter)
    # (Unix time just before the reading, reads): where STOP fell
    history: collections.deque = field(
        default_factory=lambda: collections.deque(maxlen=HISTORY))


class CopyLogs:
    """Every source slot's copy log on this host. `copy()` and
    `message()` return what to send; the daemon reads a tap when
    `wants_sample()` says so, and calls `settle()` when its socket is
    empty."""

    def __init__(self, max_logs=MAX_LOGS, max_age=MAX_AGE):
        self.logs: Dict[int, SlotLog] = {}
        self.max_logs, self.max_age = max_logs, max_age
        self.refused = 0
        self.marks = 0                  # the last marker's number

    def _open(self, slot: int, now: float) -> Optional[SlotLog]:
        g = self.logs.get(slot)
        if g is None and len(self.logs) < self.max_logs:
            g = self.logs[slot] = SlotLog(now, HeldFrames(max_frames=1))
        return g

    def copy(self, slot: int, frame: bytes, now: float) -> None:
        if not 1 <= slot < MARK_SLOT:
            return
        g = self._open(slot, now)
        if g is None:
            self.refused += 1
            return
        g.copies.copied(frame)

    def wants_sample(self, slot: int, now: float) -> Optional[str]:
        """The tap to read now for `slot`, if any."""
        g = self.logs.get(slot)
        if g is None or g.port is None or g.pending is not None or \
                now - g.last_sample < SAMPLE_EVERY:
            return None
        return g.port

    def wants_stop_read(self, slot: int, now: float) -> Optional[str]:
        """The tap to read now for `slot`'s STOP history only, if any."""
        g = self.logs.get(slot)
        if g is None or g.port is None or \
                now - g.last_stop_read < STOP_READ_EVERY:
            return None
        return g.port

    def stop_read(self, slot: int, reads: int, now: float,
                  wall: float) -> None:
        """A reading for the STOP history alone (`wall`: the Unix time
        just before the tap was read)."""
        g = self.logs.get(slot)
        if g is not None:
            g.last_stop_read = now
            g.history.append((wall, reads))

    def sample(self, slot: int, reads: int, dropped: Optional[int],
               now: float, wall: Optional[float] = None) -> int:
        """A reading of `slot`'s tap, taken now (`wall`: the Unix time
        just before it was read): the number of the marker to send
        through the switch for it (`mark_frame`)."""
        self.marks += 1
        g = self.logs.get(slot)
        if g is not None:
            g.pending, g.last_sample = (reads, dropped, now, self.marks), now
            if wall is not None:
                g.last_stop_read = now
                g.history.append((wall, reads))
        return self.marks

    def settle_due(self) -> Optional[float]:
        times = [g.pending[2] + MARK_WAIT for g in self.logs.values()
                 if g.pending is not None]
        return min(times) if times else None

    def marked(self, mark: int) -> None:
        """Marker `mark` came back through the switch: every copy written
        before it was sent has come, so readings taken before it bound
        the base exactly (from below)."""
        for g in self.logs.values():
            if g.pending is not None and g.pending[3] <= mark:
                reads, dropped, _, _ = g.pending
                g.pending = None
                g.marked += 1
                _reading(g, reads, dropped, confirmed=True)

    def settle(self, now: float) -> None:
        """The daemon's socket is empty and a reading's marker has not
        come back in MARK_WAIT: readings SETTLE old are set against every
        copy come so far, one vote each."""
        for g in self.logs.values():
            if g.pending is not None and now >= g.pending[2] + SETTLE:
                reads, dropped, _, _ = g.pending
                g.pending = None
                _reading(g, reads, dropped)

    def socket_dropped(self, n: int) -> None:
        """The socket dropped `n` frames: any open log may miss copies."""
        for g in self.logs.values():
            g.lost += n

    def message(self, doc: dict, now: float, tap_counts=None) -> bytes:
        """The answer to one message. `tap_counts(port)` reads a tap now:
        (reads, dropped), None if it is gone."""
        try:
            m = parse_log_message(doc)
        except BadLogMessage as e:
            return answer({'op': 'error', 'error': str(e)})
        base = {'op': {'log': 'logging', 'cut': 'cut',
                       'unlog': 'unlogged'}[m.op],
                'slot': m.slot, 'id': m.ident}
        if m.op == 'unlog':
            gone = self.logs.pop(m.slot, None)
            return answer(dict(base, copies=gone.copies.n_copies
                               if gone else 0))
        g = self._open(m.slot, now)
        if g is None:
            return answer(dict(base, error='%d logs open already'
                               % self.max_logs))
        if m.op == 'log':
            g.port, g.told = m.port, now
            return answer(dict(base, copies=g.copies.n_copies))
        # The guest stopped (its copies all came before this message):
        # a reading now is set against every copy, which bounds the base
        # as the controller's poll after STOP did.
        hf = g.copies
        self.settle(now + SETTLE)
        counts = tap_counts(g.port) if g.port and tap_counts else None
        if counts is not None:
            _cut_reading(g, counts, m.reads)
        reads, said = m.reads, 'agent'
        at_stop = _count_at_stop(g, m.stopped_at, counts)
        if at_stop is not None and (reads is None or at_stop[0] < reads):
            reads, said = at_stop[0], 'log after STOP'
        elif reads is None and counts is not None:
            reads, said = counts[0], 'tap'
        elif reads is None and hf.last_reads is not None:
            # No count at STOP and the tap gone (its QEMU quit: a late
            # activation): the last reading, at most SAMPLE_EVERY before
            # the copies stopped. Without it every frame the tap was
            # handed counts as read (a bench move lost 284 so); with it
            # the few the guest read after it go again.
            reads, said = hf.last_reads, 'last reading'
        if g.lost:
            # Copies missing: no count places the cut among them.
            fields, view = {'after': [], 'absent': 'all'}, {
                'aligned': False}
        else:
            fields, view = release_doc(hf, reads, m.ring_frames)
        above = sum(k for b, k in g.bounds.items()
                    if hf.base is not None and b > hf.base)
        return answer(dict(base, fields=fields, view=dict(
            view, copies=hf.n_copies, samples=g.samples, base=hf.base,
            readings_above=above, readings_at_base=g.bounds.get(hf.base, 0),
            readings_marked=g.marked,
            bound_max=max(g.bounds, default=None),
            lost=g.lost, reads=reads, tap_reads=counts[0] if counts else None,
            agent_reads=m.reads, stopped_at=m.stopped_at,
            stop_reading_ms=None if at_stop is None else at_stop[1],
            reads_from=said if reads is not None
            else None)))

    def expire(self, now: float) -> List[int]:
        """Logs dropped: max_age after the later of their opening and the
        controller's last `log` (it says it again while the move is
        pending: control.source_logs). A log dropped mid-move came back
        with the next copy but without its tap, so its cut could place
        nothing and the destination delivered all it held: 981-990
        duplicates a guest when four moved between clouds together
        (ensemble bench, issue 42)."""
        gone = [s for s, g in self.logs.items()
                if now - max(g.opened, g.told) > self.max_age]
        for s in gone:
            del self.logs[s]
        return gone


def _reading(g: SlotLog, reads: int, dropped: Optional[int],
             confirmed=False) -> None:
    """A reading of the tap set against every copy come: the base is the
    highest bound CONFIRM readings gave (`confirmed`: one whose copies
    are known to be in, by its marker or the guest stopped: a bound as
    it stands)."""
    hf = g.copies
    hf.polled(reads, hf.n_copies, dropped)
    g.samples += 1
    g.bounds[reads - hf.n_copies + hf.drops_marked] += \
        CONFIRM if confirmed else 1
    agreed = [b for b, k in g.bounds.items() if k >= CONFIRM]
    hf.base = max(agreed) if agreed else None
    if hf.base is not None:
        for b in [b for b in g.bounds if b < hf.base]:
            del g.bounds[b]


def _cut_reading(g: SlotLog, counts: Tuple[int, Optional[int]],
                 agent_reads: Optional[int]) -> None:
    """The tap read at the cut, as a bound that counts alone. QEMU's one
    read after STOP may take a frame handed after the cut's message, its
    copy behind it: counted, the base is one too high and the guest's
    last frame goes again (3 bench duplicates: tap one above the agent's
    count, the base from this reading alone). Every frame the agent
    counted was copied before it asked, so only those reads (and no
    drop, read now too) count."""
    reads, dropped = counts
    if agent_reads is not None:
        reads, dropped = min(reads, agent_reads), None
    _reading(g, reads, dropped, confirmed=True)


def _count_at_stop(g: SlotLog, stopped_at: Optional[float], counts
                   ) -> Optional[Tuple[int, Optional[float]]]:
    """(the lowest count read after QEMU's STOP, ms from STOP to the
    reading that gave it: None for the cut's own), None without a STOP
    time or a reading after it. The cut's own reading (`counts`) is
    taken after the controller heard of the STOP, so after it."""
    if stopped_at is None:
        return None
    seen = [(r, round((t - stopped_at) * 1e3, 1)) for t, r in g.history
            if t > stopped_at]
    if counts is not None:
        seen.append((counts[0], None))
    return min(seen, key=lambda x: x[0]) if seen else None


def answer(doc: dict) -> bytes:
    return json.dumps(doc, sort_keys=True).encode()


def is_log_message(doc) -> bool:
    return isinstance(doc, dict) and doc.get('op') in OPS


def mark_frame(mark: int) -> bytes:
    """The marker a reading sends itself through the switch."""
    return message_frame(b'mark %d' % mark)


def mark_of(frame: bytes) -> Optional[int]:
    """The number of a marker come back (its tag off), None if not one."""
    body = frame[14:].rstrip(b'\0')
    if not body.startswith(b'mark '):
        return None
    try:
        return int(body[5:])
    except ValueError:
        return None
