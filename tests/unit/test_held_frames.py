"""Held frames' cut (core.held_frames): which frames kept on a moving
vNIC's destination its guest never read on the source, from the source
tap's read count and short copies of what the source handed the guest."""
from hypothesis import given, settings, strategies as st

from virtualwire.core.held_frames import COPY_LEN, HeldFrames


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
