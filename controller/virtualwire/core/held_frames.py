"""Frames towards a live-migrating vNIC, kept instead of dropped, and the
cut that says which of them the guest never read (pure: the controller
feeds it what its switches report).

While a vNIC moves, its far end sends every frame both to the source and
to the destination. The destination's copies reach the controller (the
`held` flow) and wait in a ring here; the source switch also copies, cut
short, each frame it hands to the guest's source tap. A tap's transmit
counter (OpenFlow port stats) counts frames the guest's QEMU *read*, not
frames handed to it, and it stops when QEMU stops the guest. So:

  base  = tap reads before the first copied frame; each poll gives a lower
          bound (reads - copies seen before the reply: a copy reaches us
          no later than its frame reaches the tap), exact whenever the
          guest had read everything it was handed;
  cut   = reads at activation - base: the first copied frame the guest
          never read. Its copy, found in the held ring, and everything
          held after it go to the destination tap, in arrival order.
A poll after STOP (reads final, c copies seen) bounds the base from below
by reads - c, so the cut is never later than the copies that came after
the first such poll: however the guest lagged, what was handed after that
poll is delivered. Between the last poll that saw the guest reading and
that one (`stop_window` copies: polls every 50 ms) lies STOP; the record
carries the window so a loss can be told from the cost of a late poll.

The tap drops what it is handed while its queue is full (a guest that
stopped reading for seconds: `source_dropped`). A dropped frame was
copied but is never read, so each one the guest's reads went past would
move the cut one early: a frame it read, delivered again. Each poll's
drops happened among the copies that came before its reply and after
the previous poll's; those of every poll interval wholly before the cut
move it on by their number (`drops_placed`), and count in the base's
bound too.

Activated at the source's STOP (control.migrating.source_stopped), the
cut is taken while the last frames may still be on their way to the
destination, or still in its connection to us: the copies and the held
frames come by different paths. Unread frames not held yet at the cut
are `pending`, delivered as they come; if the ring holds nothing the
guest did not read, none goes, and those it read still to come are
dropped as they arrive (`late_read`), never delivered twice. If no count
comes in time (a busy source switch), only frames held since the STOP
was said that the source was never handed go (`release_from_stop`).

What it protects against: a frame the guest read on its source delivered
again (a duplicate), a frame it never read lost (unless the ring's bound
evicted it, or it never reached the destination: both counted). What it
does not: a guest that lagged its tap at every poll, then caught up
before STOP, makes the base low and the cut late, by at most the frames
of the stop window, lost uncounted. Drops in the poll interval that
holds the cut, or before the first poll that saw a copy, cannot be
placed: each of them the guest read past is a duplicate, at most
`drops_unplaced`. Identical frames (same first COPY_LEN bytes) are told
apart only by their order.
"""
import bisect
import collections
import hashlib
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Optional, Tuple

from virtualwire.core.held_release import Release

COPY_LEN = 128          # bytes of each source copy (and of each digest)
DEFAULT_FRAMES = 512    # held per moving vNIC
DEFAULT_BYTES = 1 << 20
# Frames a second towards a moving vNIC above which holding stops for that
# move: at 5000/s the default ring holds 100 ms, less than many pauses
# here (44-410 ms measured), while every frame costs two packet-ins (a 300
# Mbit/s TCP flow fell to 76-302 Mbit/s during the copy).
DEFAULT_RATE = 5000
_SEEN = 4096            # source copies remembered (digests: 8 bytes each)
# Frames a count may say the guest read past the copies come so far, the
# cut then placed by counting on (their lag: the controller's queue ran
# 0.3-1.4 s behind under bench_migration's load, 1 kHz a stream); more
# may mean copies were lost (an ensemble move: 3,300 past): the count is
# then placed only if the copies sit in the ring one after another.
COUNT_PAST = 1500


def digest(frame: bytes) -> bytes:
    return hashlib.blake2b(frame[:COPY_LEN], digest_size=8).digest()


def hold_bounded(ring: Deque[Tuple[bytes, bytes]], ring_bytes: int,
                 frame: bytes, max_frames: int, max_bytes: int
                 ) -> Tuple[int, int]:
    """`frame` appended to `ring` (with its digest), the oldest evicted
    past either bound: (the ring's bytes now, frames evicted). The
    controller's rings and the hosts' (host.hold_ring) keep one rule."""
    ring.append((digest(frame), frame))
    ring_bytes += len(frame)
    evicted = 0
    while len(ring) > max_frames or ring_bytes > max_bytes:
        _, old = ring.popleft()
        ring_bytes -= len(old)
        evicted += 1
    return ring_bytes, evicted


@dataclass
class HeldFrames:
    """One moving vNIC's held frames and source copies."""
    max_frames: int = DEFAULT_FRAMES
    max_bytes: int = DEFAULT_BYTES
    # (digest, frame), oldest first
    ring: Deque[Tuple[bytes, bytes]] = field(
        default_factory=collections.deque)
    ring_bytes: int = 0
    evicted: int = 0                 # evicted by the bound, any frame
    # (index among all copies, digest)
    copies: Deque[Tuple[int, bytes]] = field(
        default_factory=collections.deque)
    n_copies: int = 0
    base: Optional[int] = None       # best lower bound of reads before
    last_reads: Optional[int] = None  # the source tap's, at the last poll
    # Copies seen at the last poll, and between the poll before the first
    # that showed last_reads and that one.
    last_copies: int = 0
    window: int = 0
    first_dropped: Optional[int] = None  # the tap's drop count, first poll
    last_dropped: Optional[int] = None
    # (copies at the previous poll, copies before this reply, drops
    # between) for each poll interval that began with copies flowing and
    # saw drops.
    drop_marks: List[Tuple[int, int, int]] = field(default_factory=list)
    drops_marked: int = 0
    # Digests of frames the guest read that the ring did not hold yet at
    # the release (see _cut_at), with their counts.
    read_after_ring: Dict[bytes, int] = field(default_factory=dict)
    late_skip: int = 0               # frames still to come the guest read
    n_held: int = 0                  # frames ever put in the ring
    stop_mark: Optional[int] = None  # n_held when the STOP was said

    def late_read(self, frame: bytes) -> bool:
        """After a release that found the ring behind the copies: is this
        frame, reaching the destination late, one the guest read on its
        source? (Each such digest answers yes once; after a cut placed
        past the ring's end by counting, the next `late_skip` do.)"""
        if self.late_skip > 0:
            self.late_skip -= 1
            return True
        d = digest(frame)
        if self.read_after_ring.get(d, 0) <= 0:
            return False
        self.read_after_ring[d] -= 1
        return True

    def _copy_index(self, d: bytes) -> Optional[int]:
        for i, dd in reversed(self.copies):
            if dd == d:
                return i
        return None

    def mark_stop(self) -> None:
        """The source said its guest stopped (QEMU's STOP): every frame
        held from now on is one the guest never read there."""
        if self.stop_mark is None:
            self.stop_mark = self.n_held

    def release_from_stop(self) -> Release:
        """No read count from the source came in time: what was held
        since its STOP was said, less any frame the source was handed
        (its copy came): none of the rest reached the guest, none goes
        twice. The unread ones the source was handed are not known, so
        withheld (lost, not doubled).

        Why not all held since the mark: a destination whose switch lags
        (two cores, three TCG guests) hands us frames hundreds of ms old
        after the STOP was said, frames its guest read on the source
        (bench migration, 487 and 858 duplicates in one move each, sent
        up to 875 ms before STOP)."""
        frames = list(self.ring)
        first = self.n_held - len(frames)
        start = max(0, (self.stop_mark or 0) - first)
        handed = collections.Counter(d for _, d in self.copies)
        after = [f for d, f in frames[start:] if d not in handed]
        # Those still to come that the source was handed are dropped as
        # they arrive (`late_read`), for the same reason: one copy, one
        # frame the ring did not hold.
        handed.subtract(d for d, _ in frames)
        self.read_after_ring = {d: n for d, n in handed.items() if n > 0}
        return Release(after, len(frames), start, 0, 0, False,
                       withheld=len(frames) - start - len(after))

    def hold(self, frame: bytes) -> None:
        if len(frame) > self.max_bytes:
            self.evicted += 1
            return
        self.n_held += 1
        self.ring_bytes, evicted = hold_bounded(
            self.ring, self.ring_bytes, frame, self.max_frames,
            self.max_bytes)
        self.evicted += evicted

    def copied(self, head: bytes) -> None:
        """A copy of a frame the source switch handed to the guest's tap."""
        self.copies.append((self.n_copies, digest(head)))
        self.n_copies += 1
        if len(self.copies) > _SEEN:
            self.copies.popleft()

    def polled(self, reads: int, copies_before_reply: int,
               dropped: Optional[int] = None) -> None:
        """A port-stats reply from the source: `reads` is the tap's
        transmit count, `copies_before_reply` how many copies had arrived
        when the reply did (they share the connection, in order);
        `dropped` the tap's transmit drops (its queue was full)."""
        if reads != self.last_reads:
            self.window = copies_before_reply - self.last_copies
        if dropped is not None:
            if self.first_dropped is None:
                self.first_dropped = dropped
            elif dropped > (self.last_dropped or 0) and self.last_copies:
                # Copies flowed since the previous poll: every frame the
                # tap was handed since was copied, so these were among
                # copies before this reply (a poll before the first copy
                # would also count frames handed before the move).
                n = dropped - (self.last_dropped or 0)
                self.drop_marks.append((self.last_copies,
                                        copies_before_reply, n))
                self.drops_marked += n
            self.last_dropped = dropped
        self.last_reads, self.last_copies = reads, copies_before_reply
        # Reads before the first copy: at least the reads now less the
        # copies that were neither queued nor dropped.
        bound = reads - copies_before_reply + self.drops_marked
        if self.base is None or bound > self.base:
            self.base = bound

    def copies_reach(self, reads: int) -> bool:
        """Have the copies of every frame a count of `reads` says the
        guest read come (so the cut it places is found, not guessed)?"""
        return self.base is not None and reads - self.base <= self.n_copies

    def release(self, reads: Optional[int]) -> Release:
        """The held frames the guest never read, given the source tap's
        reads once the guest stopped there (None: unknown, e.g. the source
        switch did not answer: everything held goes, duplicates possible,
        said by `aligned`)."""
        held = len(self.ring)
        frames = [f for _, f in self.ring]
        # digest -> its positions in the ring, ascending: each lookup
        # below is a bisection, not a scan (this runs on the control loop
        # while the guest waits for its frames).
        where: Dict[bytes, List[int]] = {}
        for k, (d, _) in enumerate(self.ring):
            where.setdefault(d, []).append(k)

        def find(d, start=0, last=False):
            hits = where.get(d, ())
            if last:
                return hits[-1] if hits else None
            i = bisect.bisect_left(hits, start)
            return hits[i] if i < len(hits) else None
        dropped = (self.last_dropped or 0) - (self.first_dropped or 0)
        if reads is None or self.base is None:
            return Release(frames, held, 0, 0, 0, False,
                           source_dropped=dropped)
        cut, placed, unplaced = self._past_drops(max(0, reads - self.base))
        if cut - self.n_copies > COUNT_PAST and not self._in_step(find):
            # Further past the copies than their lag explains, and the
            # ring shows copies lost on the way (a switch drops packet-ins
            # once its queue to us is full): the copies' numbering is not
            # the tap's and the count cannot be placed: as without a
            # count. (In step, they only lag: a controller 1.4 s behind
            # counted 2,260 past, and placing nothing delivered 4,169
            # frames twice.)
            r = self.release_from_stop()
            r.count_unplaced = cut - self.n_copies
            return r
        r = self._cut_at(cut, frames, held, find)
        if reads == self.last_reads:
            r.stop_window = self.window
        r.source_dropped = dropped
        r.drops_placed = placed
        r.drops_unplaced = unplaced + max(0, dropped - self.drops_marked)
        return r

    def _in_step(self, find) -> bool:
        """Do the copies the ring holds sit in it one after another, as
        the destination got their frames (none lost on the way to us, on
        either side)? Copies of frames evicted from the ring, or not come
        to it yet, are not looked at."""
        offset, pos, seen = None, 0, 0
        for i, d in self.copies:
            at = find(d, pos)
            if at is None:
                continue
            if offset is None:
                offset = at - i
            elif at - i != offset:
                return False
            pos, seen = at + 1, seen + 1
        return seen > 0

    def _past_drops(self, cut):
        """The cut moved on past the drops of every poll interval that
        ended before it (the guest read on beyond them: the cut never
        passes the true one), and the most it can still fall short, a
        duplicate each: the drops of the interval that holds it and of
        any after that those could reach. (cut, placed, unplaced)."""
        placed = 0
        marks = iter(self.drop_marks)
        for since, before_reply, n in marks:
            if before_reply <= cut:
                cut += n
                placed += n
                continue
            reach = cut + n if since < cut else cut
            for since, _, n in marks:
                if since < reach:
                    reach += n
            return cut, placed, reach - cut
        return cut, placed, 0

    def _cut_at(self, cut, frames, held, find) -> Release:
        unread = [(i, d) for i, d in self.copies if i >= cut]
        if not unread:
            # The guest read every frame its source was handed: what is
            # held after the last copy (arrived once the source stopped
            # getting them, or only here) is unread.
            if not self.copies:
                return Release(frames, held, 0, 0, 0, False)
            at = find(self.copies[-1][1], last=True)
            if at is None:
                return self._unaligned(held, cut)
            # A count from outside the switch (the source's agent) may
            # say the guest read frames whose copies are not here yet
            # (that switch is slow): the destination got the same frames
            # in the same order, so the cut lies that many further on.
            # Past the ring's end, the next ones to come were read too
            # (the destination's frames are behind by as much: a
            # controller whose queue lags both sends them later).
            start = at + 1 + max(0, cut - self.n_copies)
            self.late_skip = max(0, start - held)
            return Release(frames[start:], held, min(start, held), 0, 0,
                           True, extrapolated=max(0, cut - self.n_copies))
        first_copy = self.copies[0][0] if self.copies else 0
        lost_from_copies = max(0, first_copy - cut)
        # Search after the guest's last read frame (a frame repeated, the
        # same ARP request say, is found where it came next).
        last_read = [d for i, d in self.copies if i == cut - 1]
        after = find(last_read[0]) if last_read else None
        start = 0 if after is None else after + 1
        for k, (_, d) in enumerate(unread):
            at = find(d, start)
            if at is not None:
                # Copies before this one were unread yet not held: the ring
                # evicted them, or they never reached the destination; and
                # any after it missing among the delivered did not either.
                evicted = min(k + lost_from_copies, self.evicted)
                missing = [find(dd, at) is None for _, dd in unread[k + 1:]]
                # Those missing after the last one held are still on their
                # way here (pending); those between, lost on the way.
                pending = len(missing) - (max(
                    (j + 1 for j, m in enumerate(missing) if not m),
                    default=0))
                gaps = sum(missing) - pending
                return Release(frames[at:], held, at, evicted,
                               k + lost_from_copies - evicted + gaps, True,
                               pending=pending)
        if after is not None:
            # The last frame the guest read is held, none it never read is
            # yet: they are still on their way here (a longer path than
            # the source's, e.g. through extenders, and a move activated
            # at STOP). Everything held after it goes; they follow as they
            # come, 'late'.
            return Release(frames[start:], held, start, 0, 0, True,
                           pending=len(unread))
        newest = self._copy_index(self.ring[-1][0]) if self.ring else None
        if newest is not None and newest < cut:
            # The ring lags the copies (its frames came by a slower path
            # or connection): the guest read all it holds and more. None
            # goes now; of those still to come, the ones it read are
            # dropped (`late_read`), the rest delivered as they come.
            self.read_after_ring = collections.Counter(
                d for i, d in self.copies if newest < i < cut)
            return Release([], held, held, 0, 0, True, pending=len(unread))
        evicted = min(len(unread) + lost_from_copies, self.evicted)
        r = self._unaligned(held, cut)
        r.evicted = evicted
        r.skipped = len(unread) + lost_from_copies - evicted
        return r

    def _unaligned(self, held, cut) -> Release:
        """The cut is in no frame held: what goes is every frame held but
        those whose copy says the guest read them (before the cut). When
        the bound evicted the unread ones' elders that is the whole ring;
        when copies or held frames were lost on the way (a switch drops
        packet-ins once its queue to us is full: an ensemble move, 18,000
        so, delivered 512 frames twice before this) a frame the guest read
        whose copy was lost may still go twice."""
        read = collections.Counter(d for i, d in self.copies if i < cut)
        out = []
        for d, f in self.ring:
            if read[d] > 0:
                read[d] -= 1
            else:
                out.append(f)
        return Release(out, held, held - len(out), 0, 0, False,
                       withheld=held - len(out))
