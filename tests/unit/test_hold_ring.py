"""A destination host's rings of held frames (host.hold_ring) and how
vw-frame-hold reads its port's frames (host.hold_port.classify)."""
import json
import struct

from hypothesis import given, settings, strategies as st

from virtualwire.core.held_frames import digest
from virtualwire.host.hold_port import (ETH_P_8021AD, TP_STATUS_VLAN_TPID_VALID,
                                        TP_STATUS_VLAN_VALID, classify,
                                        message_frame, tagged)
from virtualwire.host.hold_ring import (ETHERTYPE, MAX_MESSAGE,
                                        BEAT_LOST, ORPHAN_AFTER, HoldRings,
                                        parse_message, BadMessage)
import pytest


def frame(n, size=64):
    return n.to_bytes(4, 'big') * (size // 4)


def msg(**doc):
    return json.dumps(doc).encode()


def release(rings, slot, read, now=1.0, **extra):
    out = rings.message(msg(op='release', slot=slot, id=9,
                            after=[digest(f).hex() for f in read], **extra),
                        now)
    return [d for s, d in out if s == slot], json.loads(out[-1][1])


def test_frames_after_the_last_read_go_in_order_then_later_ones_pass():
    rings = HoldRings()
    for n in range(10):
        assert rings.frame(7, frame(n), 0.0) == []
    sent, said = release(rings, 7, [frame(5), frame(6)])
    assert sent == [frame(n) for n in range(7, 10)]
    assert said == {'op': 'released', 'slot': 7, 'id': 9, 'found': True,
                    'delivered': 3, 'held': 10, 'evicted': 0}
    assert rings.frame(7, frame(10), 1.1) == [(7, frame(10))]


def test_a_guest_that_read_none_of_the_ring_gets_all_of_it():
    rings = HoldRings()
    for n in range(4):
        rings.frame(3, frame(n), 0.0)
    assert release(rings, 3, [])[0] == [frame(n) for n in range(4)]


def test_a_cut_not_in_the_ring_delivers_nothing_unless_told_all():
    for absent, want in (('none', []), ('all', [frame(0), frame(1)])):
        rings = HoldRings()
        rings.frame(3, frame(0), 0.0)
        rings.frame(3, frame(1), 0.0)
        sent, said = release(rings, 3, [frame(99)], absent=absent)
        assert sent == want and said['found'] is False


def test_a_release_told_to_wait_answers_when_its_run_comes():
    # The guest read up to 6; the release outruns frames 4-6 here (the far
    # end's path to this host is the longer one): 0-6 were all read, none
    # goes, and 7 on pass.
    rings = HoldRings()
    for n in range(4):
        rings.frame(5, frame(n), 0.0)
    out = rings.message(msg(op='release', slot=5, id=2, absent='wait',
                            after=[digest(frame(n)).hex() for n in (5, 6)]),
                        1.0)
    assert out == []                    # no answer yet: waiting
    assert rings.next_deadline() == pytest.approx(1.25)
    assert rings.frame(5, frame(4), 1.01) == []
    assert rings.frame(5, frame(5), 1.02) == []
    out = rings.frame(5, frame(6), 1.03)
    said = json.loads(out[-1][1])
    assert [s for s, _ in out] == [None]        # only the answer
    assert said == {'op': 'released', 'slot': 5, 'id': 2, 'found': True,
                    'delivered': 0, 'held': 7, 'evicted': 0,
                    'waited_ms': 30.0}
    assert rings.next_deadline() is None
    assert rings.frame(5, frame(7), 1.04) == [(5, frame(7))]
    assert rings.tick(2.0) == []


def test_a_wait_whose_run_never_comes_drops_the_ring_after_the_bound():
    rings = HoldRings()
    for n in range(3):
        rings.frame(5, frame(n), 0.0)
    assert rings.message(msg(op='release', slot=5, id=3, absent='wait',
                             after=[digest(frame(99)).hex()]), 1.0) == []
    assert rings.frame(5, frame(3), 1.1) == []
    assert rings.tick(1.2) == []        # within WAIT_FOR
    out = rings.tick(1.3)
    said = json.loads(out[-1][1])
    assert [s for s, _ in out] == [None]
    assert said['found'] is False and said['dropped'] == 4 and \
        said['waited_ms'] == 300.0
    assert rings.frame(5, frame(4), 1.31) == [(5, frame(4))]
    # A second release of the slot, waiting or done, is refused.
    again = rings.message(msg(op='release', slot=5, absent='wait',
                              after=[digest(frame(1)).hex()]), 1.4)
    assert 'released already' in json.loads(again[-1][1])['error']


def test_a_wait_with_the_run_present_releases_at_once():
    rings = HoldRings()
    for n in range(5):
        rings.frame(2, frame(n), 0.0)
    sent, said = release(rings, 2, [frame(2)], absent='wait')
    assert sent == [frame(3), frame(4)] and said['found'] is True


def test_a_frame_one_side_missed_does_not_hide_the_run():
    # The source read 0-9; this host never got 7 (lost on its way here),
    # and got 50, which the source never did: the cut is still after 9.
    rings = HoldRings()
    for n in [0, 1, 2, 3, 4, 5, 6, 50, 8, 9, 10, 11]:
        rings.frame(4, frame(n), 0.0)
    sent, said = release(rings, 4, [frame(n) for n in range(10)])
    assert sent == [frame(10), frame(11)] and said['found'] is True


def test_frames_the_guest_read_past_the_named_run_are_skipped():
    # The guest read 0-5 and two more the controller had no copy of yet:
    # 6 and 7 are skipped, here and, for a ring not holding them yet, as
    # they come.
    rings = HoldRings()
    for n in range(10):
        rings.frame(1, frame(n), 0.0)
    assert release(rings, 1, [frame(5)], skip=2)[0] == [frame(8), frame(9)]
    rings = HoldRings()
    for n in range(6):
        rings.frame(1, frame(n), 0.0)
    assert release(rings, 1, [frame(4)], skip=3)[0] == []
    assert [rings.frame(1, frame(n), 1.1) for n in range(6, 9)] == \
        [[], [], [(1, frame(8))]]


def test_a_release_naming_the_port_sends_there_what_it_delivers():
    rings = HoldRings()
    for n in range(4):
        rings.frame(6, frame(n), 0.0)
    out = rings.message(msg(op='release', slot=6, id=1, port='vnet7',
                            after=[digest(frame(1)).hex()]), 1.0)
    assert out[:-1] == [('vnet7', frame(2)), ('vnet7', frame(3))]
    assert rings.frame(6, frame(4), 1.1) == [('vnet7', frame(4))]
    bad = rings.message(msg(op='release', slot=8, port='../etc'), 1.2)
    assert 'port must be an interface name' in json.loads(bad[-1][1])[
        'error'] and 8 not in rings.slots


def test_repeated_frames_are_told_apart_by_the_run_before_them():
    # a b a b c: the guest read "b a b" (so the second b): only c goes.
    a, b, c = frame(1), frame(2), frame(3)
    rings = HoldRings()
    for f in (a, b, a, b, c):
        rings.frame(5, f, 0.0)
    assert release(rings, 5, [b, a, b])[0] == [c]
    # read "a b" ending at the first b: the latest such run wins, so
    # only what follows the last "a b" goes (never a read frame twice).
    rings = HoldRings()
    for f in (a, b, c, a, b, c):
        rings.frame(5, f, 0.0)
    assert release(rings, 5, [a, b])[0] == [c]


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 80), read=st.integers(0, 80),
       bound=st.integers(1, 40))
def test_the_bound_holds_and_nothing_read_goes_again(n, read, bound):
    read = min(read, n)
    rings = HoldRings(max_frames=bound)
    for i in range(n):
        rings.frame(1, frame(i), 0.0)
    assert (len(rings.slots[1].ring) if n else 0) == min(n, bound)
    sent, said = release(rings, 1, [frame(i) for i in
                                    range(max(0, read - 3), read)])
    nums = [int.from_bytes(f[:4], 'big') for f in sent]
    assert nums == sorted(set(nums))                 # in order, once each
    assert all(i >= read for i in nums)              # none read goes
    if said['found'] or read == 0:
        # everything unread the bound kept goes
        assert nums == list(range(max(read, n - bound), n))
    assert said['evicted'] == max(0, n - bound)


def test_a_frame_tagged_with_no_slot_the_controller_gives_is_not_held():
    rings = HoldRings()
    assert rings.frame(4094, frame(0), 0.0) == [] and rings.slots == {}


def test_the_slot_bound_refuses_new_slots_and_counts_them():
    rings = HoldRings(max_slots=2)
    for slot in (1, 2, 3):
        rings.frame(slot, frame(0), 0.0)
    assert set(rings.slots) == {1, 2} and rings.refused == 1
    # A release for a slot nothing reached opens none past the bound.
    sent, said = release(rings, 3, [])
    assert sent == [] and 'slots open already' in said['error']
    assert set(rings.slots) == {1, 2}


def test_an_unreleased_ring_expires_and_a_released_one_closes_when_idle():
    rings = HoldRings(max_age=30, pass_for=10)
    rings.frame(1, frame(0), 0.0)
    rings.frame(2, frame(0), 0.0)
    release(rings, 2, [], now=5.0)
    rings.frame(2, frame(1), 12.0)          # passing keeps it open
    assert rings.expire(20.0) == []
    assert rings.expire(22.5) == [2] and rings.expired == 0
    assert rings.expire(31.0) == [1] and rings.expired == 1


def test_a_beaten_ring_outlives_max_age_and_goes_after_its_last_beat():
    """A move may take minutes (four guests between clouds at once):
    while its controller beats, the ring keeps what it holds; a ring
    dropped in the pause lost every frame of it (ensemble bench)."""
    rings = HoldRings(max_age=30, pass_for=10)
    rings.frame(1, frame(0), 0.0)
    for t in range(1, 100):                 # beats, 1 s apart here
        assert rings.message(msg(op='beat', slot=1), float(t)) == []
        assert rings.expire(float(t)) == []
    rings.frame(1, frame(1), 99.5)
    sent, _ = release(rings, 1, [frame(0)], now=100.0)
    assert sent == [frame(1)]               # nothing held was dropped
    # Beats that stop: gone max_age after the last one.
    rings.frame(2, frame(0), 100.0)
    rings.message(msg(op='beat', slot=2), 110.0)
    assert 2 not in rings.expire(139.0)     # (the released one went)
    assert rings.expire(140.5) == [2] and rings.expired == 1


def test_drop_and_close_forget_the_slot_and_say_what_it_held():
    rings = HoldRings()
    rings.frame(4, frame(0), 0.0)
    out = rings.message(msg(op='drop', slot=4, id=2), 1.0)
    assert json.loads(out[0][1]) == {'op': 'dropped', 'slot': 4, 'id': 2,
                                     'held': 1}
    assert 4 not in rings.slots


def test_a_second_release_is_refused_and_sends_nothing():
    rings = HoldRings()
    rings.frame(4, frame(0), 0.0)
    release(rings, 4, [])
    sent, said = release(rings, 4, [])
    assert sent == [] and 'released already' in said['error']


@pytest.mark.parametrize('payload, says', [
    (b'{', 'not JSON'),
    (b'[1]', 'not a JSON object'),
    (msg(op='hold', slot=1), 'op must be'),
    (msg(op='release', slot=0), 'slot must be a VLAN id'),
    (msg(op='release', slot=4094), 'slot must be a VLAN id'),
    (msg(op='release', slot=True), 'slot must be a VLAN id'),
    (msg(op='release', slot=1, id='x'), 'id must be an integer'),
    (msg(op='release', slot=1, after='ab'), 'after must be a list'),
    (msg(op='release', slot=1, after=['zz']), 'not hex'),
    (msg(op='release', slot=1, after=['ab']), 'must be 8 bytes'),
    (msg(op='release', slot=1, absent='some'), 'absent must be'),
    (b' ' * (MAX_MESSAGE + 1), 'at most'),
])
def test_a_bad_message_is_answered_with_why_and_changes_nothing(payload,
                                                                says):
    with pytest.raises(BadMessage, match=says):
        parse_message(payload)
    rings = HoldRings()
    rings.frame(1, frame(0), 0.0)
    out = rings.message(payload, 1.0)
    assert len(out) == 1 and out[0][0] is None
    assert says in json.loads(out[0][1])['error']
    assert len(rings.slots[1].ring) == 1 and rings.slots[1].released_at is None


def test_classify_reads_the_slot_from_the_kernels_metadata_or_the_bytes():
    f = frame(1)
    status = TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID
    assert classify(f, status, 0x2007, ETH_P_8021AD) == ('frame', 7, f)
    assert classify(tagged(9, f)) == ('frame', 9, f)
    # priority 7: a copy of the guest's own frame, it runs here
    assert classify(f, status, 0xE009, ETH_P_8021AD) == ('runs', 9, b'')
    assert classify(f[:12] + struct.pack('!HH', ETH_P_8021AD, 0xE009) +
                    f[12:]) == ('runs', 9, b'')
    # a customer tag taken off by the kernel is not ours
    assert classify(f, status, 7, 0x8100) is None
    assert classify(message_frame(b'{}')) == ('message', None, b'{}')
    ipv4 = f[:12] + struct.pack('!H', 0x0800) + f[14:]
    assert classify(ipv4) is None and classify(b'short') is None
    assert struct.unpack('!H', message_frame(b'')[12:14])[0] == ETHERTYPE


def test_a_guest_that_runs_with_no_release_gets_later_frames_after_the_bound():
    """The controller away when the guest runs here: after ORPHAN_AFTER
    the held frames are dropped (what the guest read is unknown) and later
    ones pass, tagged back into the port; a release then is refused."""
    rings = HoldRings()
    for n in range(3):
        rings.frame(5, frame(n), 0.0)
    assert rings.next_deadline() is None
    rings.runs(5, 10.0)
    rings.runs(5, 10.5)                     # the first frame counts
    assert rings.next_deadline() == 10.0 + ORPHAN_AFTER
    assert rings.frame(5, frame(3), 11.0) == []
    assert rings.tick(10.0 + ORPHAN_AFTER - 0.01) == [] and \
        rings.orphaned == 0
    assert rings.tick(10.0 + ORPHAN_AFTER) == []
    assert rings.orphaned == 1 and rings.orphaned_now == [5]
    assert rings.next_deadline() is None
    assert rings.frame(5, frame(4), 12.5) == [(5, frame(4))]
    sent, said = release(rings, 5, [frame(2)], now=13.0)
    assert sent == [] and 'released already' in said['error']


def test_a_release_in_time_leaves_nothing_for_the_bound_to_do():
    rings = HoldRings()
    rings.frame(6, frame(0), 0.0)
    rings.frame(6, frame(1), 0.0)
    rings.runs(6, 1.0)
    assert release(rings, 6, [frame(0)], now=1.2)[0] == [frame(1)]
    assert rings.next_deadline() is None
    assert rings.tick(1.0 + ORPHAN_AFTER) == [] and rings.orphaned == 0
    # A guest running here before anything was held opens its slot.
    rings.runs(8, 2.0)
    assert rings.tick(2.0 + ORPHAN_AFTER) == [] and rings.orphaned_now == [8]
    assert rings.frame(8, frame(0), 4.5) == [(8, frame(0))]


def test_a_controller_that_stops_beating_is_taken_for_gone_sooner():
    """Beats (unanswered) while the controller holds the move; once the
    guest runs here, beats missing for BEAT_LOST pass the slot: the
    later of its last beat and the guest's first frame, plus BEAT_LOST."""
    rings = HoldRings()
    assert rings.message(msg(op='beat', slot=5), 0.5) == []    # opens it
    rings.frame(5, frame(0), 1.0)
    assert rings.message(msg(op='beat', slot=5), 9.9) == []
    rings.runs(5, 10.0)
    # The guest ran after the last beat: BEAT_LOST from the guest.
    assert rings.next_deadline() == 10.0 + BEAT_LOST
    rings.message(msg(op='beat', slot=5), 10.2)
    assert rings.next_deadline() == 10.2 + BEAT_LOST
    assert rings.tick(10.2 + BEAT_LOST - 0.01) == [] and rings.orphaned == 0
    assert rings.tick(10.2 + BEAT_LOST) == [] and rings.orphaned_now == [5]
    assert rings.frame(5, frame(1), 10.8) == [(5, frame(1))]


def test_beats_that_go_on_never_hold_a_slot_past_orphan_after():
    """A controller that beats and never releases (stuck): ORPHAN_AFTER
    still bounds how long a running guest waits."""
    rings = HoldRings()
    rings.frame(3, frame(0), 0.0)
    rings.runs(3, 1.0)
    t = 1.0
    while t < 1.0 + ORPHAN_AFTER - 0.1:
        rings.message(msg(op='beat', slot=3), t)
        assert rings.tick(t) == [] and rings.orphaned == 0
        t += 0.1
    assert rings.next_deadline() == 1.0 + ORPHAN_AFTER
    rings.tick(1.0 + ORPHAN_AFTER)
    assert rings.orphaned_now == [3]


def test_a_released_slot_ignores_beats_and_a_beat_needs_a_slot():
    rings = HoldRings()
    rings.frame(4, frame(0), 0.0)
    rings.runs(4, 1.0)
    assert release(rings, 4, [], now=1.1)[0] == [frame(0)]
    assert rings.message(msg(op='beat', slot=4), 1.2) == []
    assert rings.next_deadline() is None
    out = rings.message(msg(op='beat'), 1.3)
    assert 'slot must be a VLAN id' in json.loads(out[0][1])['error']

