"""Held frames' cut (core.held_frames): which frames kept on a moving
vNIC's destination its guest never read on the source, from the source
tap's read count and short copies of what the source handed the guest."""
from hypothesis import given, settings, strategies as st

from virtualwire.core.held_frames import COPY_LEN, COUNT_PAST, HeldFrames


def frame(n, size=64):
    return n.to_bytes(4, 'big') * (size // 4)


def moving(n_frames, read, base=1000, lagging_polls=(), **bound):
    """The far end sent frames 0..n_frames-1 to both hosts; the guest read
    `read` of them on its source before it stopped. Returns (HeldFrames,
    reads at activation)."""
    hf = HeldFrames(**bound)
    for lag in lagging_polls:            # a poll while the guest lagged
        hf.polled(base - lag, 0)
    hf.polled(base, 0)                   # a poll with nothing unread
    for n in range(n_frames):
        hf.copied(frame(n)[:COPY_LEN])
        hf.hold(frame(n))
    return hf, base + read


def test_the_frames_the_guest_never_read_are_delivered_in_order():
    hf, reads = moving(100, read=90)
    r = hf.release(reads)
    assert r.frames == [frame(n) for n in range(90, 100)]
    assert (r.held, r.read_on_source, r.evicted, r.skipped, r.aligned) == \
        (100, 90, 0, 0, True)


def test_a_guest_that_read_everything_gets_only_what_came_after():
    hf, reads = moving(50, read=50)
    for n in (50, 51):                   # reached only the destination
        hf.hold(frame(n))
    r = hf.release(reads)
    assert r.frames == [frame(50), frame(51)] and r.read_on_source == 50


def test_unread_frames_still_on_their_way_here_are_pending_not_all_held():
    """Activated at STOP, the destination's copies of the last frames
    (a longer path: extenders) have not arrived yet: what is held after
    the last frame the guest read goes, the rest follows as it comes. (It
    once delivered the whole ring: 512 duplicates.)"""
    hf, reads = moving(100, read=96)
    for n in range(100, 104):            # copied on the source ...
        hf.copied(frame(n)[:COPY_LEN])
    r = hf.release(reads + 2)            # ... two of them read there
    assert r.frames == [frame(n) for n in range(98, 100)]
    assert (r.aligned, r.read_on_source, r.pending, r.skipped) == \
        (True, 98, 4, 0)
    # None held after the last read: nothing goes now, none twice.
    hf, reads = moving(100, read=100)
    for n in range(100, 103):
        hf.copied(frame(n)[:COPY_LEN])
    r = hf.release(reads)
    assert (r.frames, r.aligned, r.pending) == ([], True, 3)


def test_a_poll_while_the_guest_lagged_does_not_lower_the_base():
    hf, reads = moving(40, read=30, lagging_polls=(5, 12))
    assert hf.base == 1000
    assert hf.release(reads).frames == [frame(n) for n in range(30, 40)]


def test_a_flood_is_cut_at_the_bound_and_the_rest_counted():
    hf, reads = moving(100, read=20, max_frames=16)
    r = hf.release(reads)
    # 80 unread: the newest 16 delivered, 64 evicted by the bound.
    assert r.frames == [frame(n) for n in range(84, 100)]
    assert (r.evicted, r.skipped) == (64, 0)


def test_the_byte_bound_holds_too():
    hf, reads = moving(100, read=0, max_frames=512, max_bytes=64 * 10)
    r = hf.release(reads)
    assert r.frames == [frame(n) for n in range(90, 100)]
    assert r.evicted == 90


def test_a_frame_lost_on_the_way_to_the_destination_is_counted():
    hf = HeldFrames()
    hf.polled(0, 0)
    for n in range(10):
        hf.copied(frame(n))
        if n != 6:
            hf.hold(frame(n))
    r = hf.release(6)
    assert r.frames == [frame(n) for n in range(7, 10)]
    assert (r.skipped, r.evicted) == (1, 0)


def test_identical_frames_are_told_apart_by_their_order():
    same = frame(7)
    hf = HeldFrames()
    hf.polled(0, 0)
    for f in (frame(1), same, frame(2), same, same):
        hf.copied(f)
        hf.hold(f)
    # The guest read up to the first `same`: the second and third go.
    r = hf.release(2)
    assert r.frames == [frame(2), same, same]


def test_no_source_reads_delivers_all_held_and_says_so():
    hf, _ = moving(5, read=2)
    r = hf.release(None)
    assert len(r.frames) == 5 and not r.aligned


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 300), read=st.data(), bound=st.integers(1, 400),
       lag=st.lists(st.integers(1, 50), max_size=3))
def test_delivered_is_exactly_the_unread_suffix_within_the_bound(
        n, read, bound, lag):
    k = read.draw(st.integers(0, n))
    hf, reads = moving(n, read=k, lagging_polls=lag, max_frames=bound)
    r = hf.release(reads)
    unread = [frame(i) for i in range(k, n)]
    assert r.frames == unread[-bound:] if unread else r.frames == []
    assert len(r.frames) + r.evicted + r.skipped == len(unread)


def test_a_frame_missing_among_the_delivered_is_counted_too():
    hf = HeldFrames()
    hf.polled(0, 0)
    for n in range(10):
        hf.copied(frame(n))
        if n != 8:                        # its packet-in never came
            hf.hold(frame(n))
    r = hf.release(5)
    assert r.frames == [frame(n) for n in (5, 6, 7, 9)]
    assert (r.skipped, r.evicted) == (1, 0)


def caught_up_at_stop(n_frames, lag, stop_at, after=5):
    """A guest `lag` frames behind its tap at every poll (reads before the
    first copy: 1000) that caught up just before its STOP: it read copies
    0..stop_at-1. A poll comes `after` copies past STOP, then more frames.
    Returns (hf, final reads)."""
    hf = HeldFrames(max_frames=4096)
    for n in range(n_frames):
        if n % 10 == 0 and n < stop_at:
            hf.polled(1000 - lag + n, n)
        if n == stop_at + after:
            hf.polled(1000 + stop_at, n)
        hf.copied(frame(n)[:COPY_LEN])
        hf.hold(frame(n))
    reads = 1000 + stop_at
    hf.polled(reads, n_frames)          # the read at activation
    return hf, reads


def test_a_lagging_guest_cannot_push_the_cut_past_the_poll_after_stop():
    # Every poll saw the guest 30 frames behind; the first poll showing
    # the final reads came 5 frames after STOP and lifts the base to
    # 1200 - 205: the cut lands 5 late (frames 200..204 lost), not 30, and
    # the record says where STOP lay.
    hf, reads = caught_up_at_stop(300, lag=30, stop_at=200, after=5)
    assert hf.base == 995
    r = hf.release(reads)
    assert r.frames == [frame(n) for n in range(205, 300)]
    assert r.stop_window == 15            # copies 190..204


def test_a_guest_that_kept_up_is_cut_exactly():
    hf, reads = caught_up_at_stop(300, lag=0, stop_at=200)
    r = hf.release(reads)
    assert r.frames == [frame(n) for n in range(200, 300)]


def test_the_source_taps_drops_are_reported():
    hf = HeldFrames()
    hf.polled(0, 0, dropped=7)
    hf.copied(frame(0))
    hf.hold(frame(0))
    hf.polled(0, 1, dropped=12)
    assert hf.release(0).source_dropped == 5


@settings(max_examples=200, deadline=None)
@given(n=st.integers(40, 300), data=st.data())
def test_whatever_the_lag_the_loss_ends_at_the_poll_after_stop(n, data):
    stop_at = data.draw(st.integers(0, n - 30))
    lag = data.draw(st.integers(0, 200))
    after = data.draw(st.integers(0, 20))
    hf, reads = caught_up_at_stop(n, lag, stop_at, after)
    r = hf.release(reads)
    # A suffix of what was held, in order; never a duplicate (nothing the
    # guest read goes again); nothing handed after the poll that saw it
    # stopped lost, whatever the lag.
    first = n - len(r.frames)
    assert r.frames == [frame(i) for i in range(first, n)]
    assert stop_at <= first <= stop_at + after
    if lag == 0 and stop_at > 0:          # a poll saw it keeping up
        assert first == stop_at


class Tap:
    """A source tap as the kernel keeps it: a FIFO of `size` frames that
    drops what it is handed while full; the guest reads from its head
    (the transmit count), the switch copies everything it hands."""

    def __init__(self, hf, size, reads=1000):
        self.hf, self.size, self.reads = hf, size, reads
        self.queue, self.n, self.drops, self.read_ids = [], 0, 0, []

    def hand(self):
        self.hf.copied(frame(self.n)[:COPY_LEN])
        self.hf.hold(frame(self.n))
        if len(self.queue) < self.size:
            self.queue.append(self.n)
        else:
            self.drops += 1
        self.n += 1

    def read(self):
        if self.queue:
            self.read_ids.append(self.queue.pop(0))
            self.reads += 1

    def poll(self):
        self.hf.polled(self.reads, self.hf.n_copies, self.drops)


@settings(max_examples=300, deadline=None)
@given(size=st.integers(1, 12), data=st.data())
def test_a_guest_that_fell_behind_and_overflowed_its_tap_reads_nothing_twice(
        size, data):
    # The guest keeps up for a while (a poll sees its tap empty), then
    # reads, stalls and overflows its tap in any order, polled every few
    # frames; then it stops and more frames come.
    tap = Tap(HeldFrames(max_frames=4096), size)
    tap.poll()                               # before the move's first copy
    for _ in range(3):
        tap.hand()
        tap.read()
    tap.poll()
    for step in data.draw(st.lists(st.sampled_from('hhrrrp'), max_size=120)):
        {'h': tap.hand, 'r': tap.read, 'p': tap.poll}[step]()
    for _ in range(data.draw(st.integers(0, 15))):
        tap.hand()                           # the guest stopped
    tap.poll()                               # the read at activation
    r = tap.hf.release(tap.reads)
    last_read = max(tap.read_ids)
    first = tap.n - len(r.frames)
    # A suffix of what was handed; nothing the guest never read after its
    # last read frame is missing, and what it read again is at most the
    # drops the polls could not place.
    assert r.frames == [frame(i) for i in range(first, tap.n)]
    assert first <= last_read + 1, (first, last_read, r)
    assert last_read + 1 - first <= r.drops_unplaced, (first, last_read, r)
    assert r.source_dropped == tap.drops
    assert r.drops_placed + r.drops_unplaced <= tap.drops


def test_a_stall_that_overflowed_the_tap_long_before_stop_costs_nothing():
    # As in CI: the guest stopped reading for a while (its tap of 4 frames
    # dropped 6), then caught up and ran on; after STOP the tap fills and
    # drops 2 more. The cut is just after its last read frame: the 6 moved
    # it on, the 2 after it are delivered (the guest never had them).
    tap = Tap(HeldFrames(max_frames=4096), size=4)
    tap.poll()
    for n in range(40):
        tap.hand()
        if not 10 <= n < 19:                 # the stall
            tap.read()
            tap.read()
        if n % 3 == 0:
            tap.poll()
    for _ in range(6):
        tap.hand()                           # STOP, then these
    tap.poll()
    r = tap.hf.release(tap.reads)
    assert max(tap.read_ids) == 39
    assert r.frames == [frame(n) for n in range(40, 46)]
    assert (r.source_dropped, r.drops_placed, r.drops_unplaced) == (8, 6, 0)


def test_a_ring_behind_the_copies_delivers_nothing_the_guest_read():
    """The destination's frames reach us later than the source's copies
    (another connection, a slower path): at the cut the ring holds only
    frames the guest read. None goes; late ones it read are dropped, the
    one it did not read is not."""
    hf, reads = moving(100, read=100)
    for n in range(100, 104):            # copied, not held yet
        hf.copied(frame(n)[:COPY_LEN])
    r = hf.release(reads + 3)            # the guest read 102 of them
    assert (r.frames, r.aligned, r.read_on_source, r.pending) == \
        ([], True, 100, 1)
    assert [hf.late_read(frame(n)) for n in range(100, 104)] == \
        [True, True, True, False]
    assert not hf.late_read(frame(100))  # each once


def test_without_a_count_after_stop_only_what_came_after_it_goes():
    """Activated at STOP, the source's count never came: the frames held
    since the STOP was said go (the guest had stopped reading), none
    before (some of those it read): nothing twice."""
    hf, _reads = moving(100, read=90)
    hf.mark_stop()
    for n in range(100, 105):
        hf.hold(frame(n))
    r = hf.release_from_stop()
    assert r.frames == [frame(n) for n in range(100, 105)]
    assert (r.held, r.read_on_source, r.aligned) == (105, 100, False)
    # A frame over the byte bound after the mark is not held: it must not
    # shift the mark onto a frame from before it.
    hf, _reads = moving(10, read=10, max_bytes=200)
    hf.mark_stop()
    hf.hold(frame(10, size=400))
    hf.hold(frame(11))
    assert hf.release_from_stop().frames == [frame(11)]


def test_without_a_count_frames_the_source_was_handed_never_go():
    """A lagging destination hands us, after the STOP was said, frames
    its guest read on the source long before (bench migration: 487 and
    858 duplicates a move, sent up to 875 ms before STOP). Held after the
    mark or arriving late, a frame the source was handed (its copy came)
    is withheld: only what never reached the source goes."""
    hf = HeldFrames()
    hf.polled(1000, 0)
    for n in range(20):                   # handed to the source, copied
        hf.copied(frame(n)[:COPY_LEN])
    for n in range(10):                   # held in time
        hf.hold(frame(n))
    hf.mark_stop()
    for n in range(10, 15):               # held late, read on the source
        hf.hold(frame(n))
    for n in range(100, 103):             # sent after the source's flows
        hf.hold(frame(n))                 # went: never handed to it
    r = hf.release_from_stop()
    assert r.frames == [frame(n) for n in range(100, 103)]
    assert (r.withheld, r.aligned) == (5, False)
    # Still to come: 15..19 were handed to the source, 103 was not.
    assert [hf.late_read(frame(n)) for n in (15, 16, 103, 19)] == \
        [True, True, False, True]


def test_a_count_past_the_copies_cuts_by_the_destinations_order():
    """A count from the source's agent says the guest read 8 of 10; only
    6 copies ever came (its switch's connection far behind). The
    destination got the same frames in the same order: the cut lies 2
    past the last copy."""
    hf, _ = moving(6, read=0)
    for n in range(6, 10):
        hf.hold(frame(n))
    assert not hf.copies_reach(1008) and hf.copies_reach(1006)
    r = hf.release(1008)
    assert r.frames == [frame(8), frame(9)]
    assert (r.aligned, r.extrapolated, r.read_on_source) == (True, 2, 8)


def test_a_count_past_the_ring_drops_the_next_ones_to_come_as_read():
    """Both the copies and the destination's frames lag (the controller's
    own queue, a second behind under bench_migration's load): the count
    says the guest read 3 past the ring's end. Nothing goes now; of the
    frames still to come, the first 3 were read, the rest were not
    (983 duplicates in one bench move before this)."""
    hf, _ = moving(6, read=0)
    r = hf.release(1009)
    assert (r.frames, r.extrapolated) == ([], 3)
    assert [hf.late_read(frame(n)) for n in range(6, 11)] == \
        [True, True, True, False, False]


def test_a_count_far_past_copies_that_were_lost_is_not_placed():
    """Copies lost on the way (a switch drops packet-ins once its queue
    to us is full: an ensemble move counted 3,300 past them) make their
    numbering not the tap's: the ring shows it (copy 3 never came, so
    4 and 5 sit one further on), the count is not placed, and what goes
    is what no count is needed for (as release_from_stop)."""
    hf = HeldFrames()
    hf.polled(1000, 0)
    for n in range(6):
        if n != 3:
            hf.copied(frame(n)[:COPY_LEN])
        hf.hold(frame(n))
    hf.mark_stop()
    hf.hold(frame(100))
    r = hf.release(1005 + COUNT_PAST + 1)
    assert r.frames == [frame(100)]
    assert (r.count_unplaced, r.extrapolated) == (COUNT_PAST + 1, 0)


def test_a_count_far_past_copies_in_step_is_placed_by_counting():
    """The controller ran 1.4 s behind its switches (bench_migration's
    load): the count was 2,260 past the copies come, but every copy sits
    in the ring one after another, so they only lag: the cut is placed
    by counting on, and of the frames still to come the ones the guest
    read are dropped, none delivered twice (placing nothing delivered
    4,169 twice)."""
    hf, _ = moving(6, read=0)
    hf.mark_stop()
    past = COUNT_PAST + 2
    r = hf.release(1006 + past)
    assert (r.frames, r.extrapolated, r.count_unplaced) == ([], past, 0)
    late = [hf.late_read(frame(n)) for n in range(6, 6 + past + 3)]
    assert late == [True] * past + [False] * 3


def test_a_cut_in_no_held_frame_withholds_those_the_guest_read():
    """The destination's switch dropped packet-ins (its queue to us
    full): 5, the last the guest read, and 6-9, the unread ones the
    source was handed, never came; 10-12 did, their copies lost at the
    source. What goes: every frame held but those whose copy says the
    guest read them (0-4), not the whole ring (an ensemble move
    delivered 512 frames twice so)."""
    hf = HeldFrames()
    hf.polled(1000, 0)
    for n in range(10):
        hf.copied(frame(n)[:COPY_LEN])
    for n in list(range(5)) + [10, 11, 12]:
        hf.hold(frame(n))
    r = hf.release(1006)
    assert r.frames == [frame(n) for n in (10, 11, 12)]
    assert (r.aligned, r.withheld, r.skipped) == (False, 5, 4)
