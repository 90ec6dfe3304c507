"""The source host's copy log (host.copy_log), pure: copies in, the tap's
counters in, and the cut the destination's ring is to get out."""
import json
import struct

from virtualwire.core.held_frames import digest
from virtualwire.host.copy_log import (CONFIRM, MARK_WAIT, MAX_AGE, SETTLE,
                                       CopyLogs, mark_frame)
from virtualwire.host.hold_port import classify
from virtualwire.pipeline.host_hold import COPY_PCP, MARK_SLOT


def frame(n):
    return b'\x02' * 12 + b'\x08\x00' + n.to_bytes(4, 'big') * 12


def said(logs, doc, now=1.0, tap_counts=None):
    return json.loads(logs.message(doc, now, tap_counts))


def opened(port='vnet7'):
    logs = CopyLogs()
    assert said(logs, {'op': 'log', 'slot': 7, 'id': 1, 'port': port}) == {
        'op': 'logging', 'slot': 7, 'id': 1, 'copies': 0}
    return logs


def readings(logs, reads, n=CONFIRM, at=0.0):
    for k in range(n):
        logs.sample(7, reads, 0, at + k)
        logs.settle(at + k + SETTLE)


def test_the_cut_names_the_last_frames_the_guest_read():
    logs = opened()
    readings(logs, 100)                # base: 100 read before any copy
    for n in range(20):
        logs.copy(7, frame(n), 0.01)
    got = said(logs, {'op': 'cut', 'slot': 7, 'id': 2, 'reads': 112,
                      'ring_frames': 2048})
    assert got['fields'] == {
        'after': [digest(frame(n)).hex() for n in range(12 - 16, 12)
                  if n >= 0],
        'skip': 0, 'absent': 'wait'}
    assert (got['view']['read_copies'], got['view']['unread_copies'],
            got['view']['base'], got['view']['reads_from']) == (
        12, 8, 100, 'agent')


def test_a_reading_waits_for_the_copy_written_after_the_frame():
    """The switch wrote frames 0-5 to the tap, QEMU read them, the
    daemon read the count (106): frame 5's copy comes a moment later. Set against the
    copies at once, the base would be 101 and the cut one frame early (a
    frame the guest read, delivered twice); after SETTLE it is exact."""
    logs = opened()
    for n in range(5):
        logs.copy(7, frame(n), 0.0)
    logs.sample(7, 106, 0, 0.001)
    logs.settle(0.001 + SETTLE / 2)
    assert logs.logs[7].copies.base is None     # not yet
    logs.copy(7, frame(5), 0.0015)
    logs.settle(0.001 + SETTLE)
    readings(logs, 106, CONFIRM - 1, at=1.0)
    assert logs.logs[7].copies.base == 100
    got = said(logs, {'op': 'cut', 'slot': 7, 'reads': 106})
    assert got['fields']['after'][-1] == digest(frame(5)).hex()


def test_without_a_count_from_the_agent_the_tap_is_read():
    logs = opened()
    readings(logs, 0)
    for n in range(4):
        logs.copy(7, frame(n), 1.0)
    got = said(logs, {'op': 'cut', 'slot': 7},
               tap_counts=lambda tap: {'vnet7': (3, 0)}[tap])
    assert (got['view']['reads'], got['view']['reads_from']) == (3, 'tap')
    assert got['fields']['after'][-1] == digest(frame(2)).hex()


def test_with_no_count_and_the_tap_gone_the_last_reading_places_the_cut():
    logs = opened()
    readings(logs, 0)
    for n in range(10):
        logs.copy(7, frame(n), 5.0)
    readings(logs, 6, n=1, at=6.0)     # read six, then the tap went
    got = said(logs, {'op': 'cut', 'slot': 7}, tap_counts=lambda tap: None)
    assert (got['view']['reads'], got['view']['reads_from']) == (
        6, 'last reading')
    assert got['fields']['after'][-1] == digest(frame(5)).hex()
    assert got['view']['unread_copies'] == 4


def test_copies_the_socket_dropped_name_no_run():
    logs = opened()
    logs.sample(7, 0, 0, 0.0)
    logs.settle(1.0)
    for n in range(4):
        logs.copy(7, frame(n), 1.0)
    logs.socket_dropped(2)
    got = said(logs, {'op': 'cut', 'slot': 7, 'reads': 2})
    assert got['fields'] == {'after': [], 'absent': 'all'}
    assert (got['view']['aligned'], got['view']['lost']) == (False, 2)


def test_bad_messages_say_why_and_change_nothing():
    logs = opened()
    for doc, why in (({'op': 'cut', 'slot': 0}, 'slot must be'),
                     ({'op': 'log', 'slot': 3}, 'needs the source tap'),
                     ({'op': 'log', 'slot': 3, 'port': 'a/b'},
                      'interface name'),
                     ({'op': 'cut', 'slot': 7, 'reads': -1},
                      'reads must be a count'),
                     ({'op': 'cut', 'slot': 7, 'ring_frames': 0},
                      'ring_frames must be'),
                     ({'op': 'cut', 'slot': 7, 'id': 'x'},
                      'id must be an integer')):
        got = said(logs, doc)
        assert got['op'] == 'error' and why in got['error'], (doc, got)
    assert list(logs.logs) == [7]


def test_unlog_closes_and_an_unclosed_log_expires():
    logs = opened()
    logs.copy(7, frame(0), 0.0)
    logs.copy(9, frame(0), 0.0)
    assert said(logs, {'op': 'unlog', 'slot': 7, 'id': 4}) == {
        'op': 'unlogged', 'slot': 7, 'id': 4, 'copies': 1}
    assert list(logs.logs) == [9]
    assert logs.expire(MAX_AGE + 1) == [9] and logs.logs == {}


def test_a_log_named_again_outlives_max_age_and_keeps_its_tap():
    """The controller names the tap again while the move is pending: a
    log dropped mid-move came back with the next copy but without its
    tap, and its cut placed nothing (981-990 duplicates a guest)."""
    logs = opened()                         # named at 1.0
    for t in range(10, 200, 10):
        logs.copy(7, frame(t), float(t))
        said(logs, {'op': 'log', 'slot': 7, 'id': t, 'port': 'vnet7'},
             now=float(t))
        assert logs.expire(float(t)) == []
        assert logs.wants_sample(7, float(t)) == 'vnet7'
    # Named no more: dropped MAX_AGE after the last time.
    assert logs.expire(190.0 + MAX_AGE - 1) == []
    assert logs.expire(190.0 + MAX_AGE + 1) == [7]


def test_the_port_tells_a_copy_by_its_priority():
    f = frame(1)
    tci = COPY_PCP << 13 | 12
    assert classify(f, 0x10 | 0x40, tci, 0x88A8) == ('copy', 12, f)
    tagged = f[:12] + struct.pack('!HH', 0x88A8, tci) + f[12:]
    assert classify(tagged) == ('copy', 12, f)
    assert classify(f, 0x10 | 0x40, 12, 0x88A8) == ('frame', 12, f)


def test_a_move_too_short_for_a_sample_is_bounded_at_the_cut():
    """No reading while copies came (the move began just before STOP):
    the tap's count at the cut bounds the base (QEMU stopped, every copy
    is here): exact when the guest had read all it was handed."""
    logs = opened()
    for n in range(6):
        logs.copy(7, frame(n), 0.0)
    got = said(logs, {'op': 'cut', 'slot': 7, 'reads': 506},
               tap_counts=lambda tap: (506, 0))
    assert got['view']['base'] == 500 and got['view']['samples'] == 1
    assert got['fields']['after'][-1] == digest(frame(5)).hex()
    assert (got['fields']['absent'], got['view']['unread_copies']) == (
        'wait', 0)


def test_one_reading_that_overshoots_is_outvoted():
    """A reading whose copies came later than SETTLE (the switch thread
    descheduled between its two writes) bounds the base 7 too high: a cut
    from it would deliver 7 frames the guest read. The readings that
    agree keep the base."""
    logs = opened()
    readings(logs, 100)
    for n in range(10):
        logs.copy(7, frame(n), 5.0)
    readings(logs, 110, at=6.0)        # caught up: base 100 again
    logs.sample(7, 117, 0, 7.0)        # 7 more read, their copies late
    logs.settle(7.0 + SETTLE)
    for n in range(10, 17):
        logs.copy(7, frame(n), 7.1)
    got = said(logs, {'op': 'cut', 'slot': 7, 'reads': 117})
    assert (got['view']['base'], got['view']['readings_above']) == (100, 1)
    assert got['fields']['after'][-1] == digest(frame(16)).hex()


def test_a_reading_counts_once_its_marker_is_back_behind_the_late_copy():
    """The switch wrote frames 0-5 to the tap, QEMU read them, the daemon
    read the count (106) and sent its marker through the switch. Frame
    5's copy was written later than SETTLE (a switch thread descheduled),
    but ahead of the marker, which the same thread hands back: the
    reading waits for its marker, and then counts alone."""
    logs = opened()
    for n in range(5):
        logs.copy(7, frame(n), 0.0)
    mark = logs.sample(7, 106, 0, 0.001)
    assert logs.settle_due() == 0.001 + MARK_WAIT    # not SETTLE
    logs.copy(7, frame(5), 0.001 + 2 * SETTLE)
    logs.marked(mark)
    assert logs.logs[7].copies.base == 100
    got = said(logs, {'op': 'cut', 'slot': 7, 'reads': 106})
    assert got['fields']['after'][-1] == digest(frame(5)).hex()
    assert got['view']['readings_marked'] == 1


def test_a_marker_settles_only_the_readings_sent_before_it():
    logs = opened()
    logs.copy(7, frame(0), 0.0)
    first = logs.sample(7, 101, 0, 0.0)
    logs.marked(first - 1)                  # an older marker: not yet
    assert logs.logs[7].pending is not None
    logs.marked(first)
    assert logs.logs[7].pending is None and logs.logs[7].copies.base == 100


def test_a_marker_back_through_the_switch_is_told_from_frames():
    back = mark_frame(41)                   # its tag taken off
    tci = MARK_SLOT
    assert classify(back, status=0x10 | 0x40, tci=tci,
                    tpid=0x88a8) == ('mark', None, 41)
    tagged_in_bytes = back[:12] + struct.pack('!HH', 0x88a8, tci) + back[12:]
    assert classify(tagged_in_bytes) == ('mark', None, 41)
    # Something else on the marker's tag is not ours.
    assert classify(frame(3), status=0x10 | 0x40, tci=tci,
                    tpid=0x88a8) is None


def stopped_log(stop=1000.0):
    """100 read before any copy; 20 copies; readings at Unix times
    around QEMU's STOP (at `stop`): 110 just before, 111 frozen after it
    (the count at STOP), 112 once QEMU took its one frame after STOP."""
    logs = opened()
    readings(logs, 100)
    for n in range(20):
        logs.copy(7, frame(n), 0.01)
    for k, (wall, reads) in enumerate(((stop - 0.004, 110),
                                       (stop + 0.001, 111),
                                       (stop + 0.006, 111),
                                       (stop + 0.040, 112))):
        logs.sample(7, reads, 0, 1.0 + k * 0.005, wall=wall)
        logs.settle(1.0 + k * 0.005 + SETTLE)
    return logs


def test_the_count_at_stop_is_the_lowest_reading_after_qemus_stop():
    """QEMU read one frame after its STOP and kept it (the agent counted
    112, as libvirt's event came later): with QEMU's STOP time the log
    cuts at 111, the frozen count, and frame 11 goes to the destination
    instead of being lost."""
    logs = stopped_log()
    got = said(logs, {'op': 'cut', 'slot': 7, 'id': 2, 'reads': 112,
                      'stopped_at': 1000.0}, tap_counts=lambda tap: (112, 0))
    v = got['view']
    assert (v['reads'], v['agent_reads'], v['reads_from'],
            v['stop_reading_ms']) == (111, 112, 'log after STOP', 1.0)
    assert got['fields']['after'][-1] == digest(frame(10)).hex()
    without = said(stopped_log(), {'op': 'cut', 'slot': 7, 'id': 2,
                                   'reads': 112},
                   tap_counts=lambda tap: (112, 0))
    assert without['view']['reads_from'] == 'agent'
    assert without['fields']['after'][-1] == digest(frame(11)).hex()


def test_no_reading_before_qemus_stop_ever_lowers_the_cut():
    """Readings taken before STOP (110 here) are below the count at STOP:
    taken for it, the cut would hand the guest a frame it had read. Only
    readings after STOP count, and with none the agent's count stands;
    one above the agent's never raises it."""
    late = said(stopped_log(), {'op': 'cut', 'slot': 7, 'id': 2,
                                'reads': 112, 'stopped_at': 1000.05},
                tap_counts=lambda tap: (112, 0))
    assert (late['view']['reads'], late['view']['reads_from']) == (
        112, 'agent')
    early = said(stopped_log(), {'op': 'cut', 'slot': 7, 'id': 2,
                                 'reads': 110, 'stopped_at': 1000.0},
                 tap_counts=lambda tap: (112, 0))
    assert (early['view']['reads'], early['view']['reads_from']) == (
        110, 'agent')
    # Without the agent's count: the lowest reading after STOP.
    alone = said(stopped_log(), {'op': 'cut', 'slot': 7, 'id': 2,
                                 'stopped_at': 1000.0})
    assert (alone['view']['reads'], alone['view']['reads_from']) == (
        111, 'log after STOP')


def test_a_bad_stop_time_is_refused_and_changes_nothing():
    logs = stopped_log()
    for bad in ('soon', True, -1, 1e12):
        got = said(logs, {'op': 'cut', 'slot': 7, 'id': 2, 'reads': 112,
                          'stopped_at': bad})
        assert got['op'] == 'error' and 'stopped_at' in got['error']
    assert logs.logs[7].copies.n_copies == 20


def test_cheap_readings_between_samples_time_the_count_at_stop():
    """Between the marked samples (every SAMPLE_EVERY) the log reads the
    tap's count alone at most every STOP_READ_EVERY, for the STOP history
    only: QEMU's one read after STOP can come within a few ms of it."""
    from virtualwire.host.copy_log import STOP_READ_EVERY
    logs = opened()
    readings(logs, 100)
    for n in range(20):
        logs.copy(7, frame(n), 0.01)
    assert logs.wants_stop_read(7, 10.0) == 'vnet7'
    logs.stop_read(7, 111, 10.0, wall=1000.0005)
    assert logs.wants_stop_read(7, 10.0 + STOP_READ_EVERY / 2) is None
    assert logs.wants_stop_read(7, 10.0 + STOP_READ_EVERY) == 'vnet7'
    logs.stop_read(7, 112, 10.001, wall=1000.0015)
    got = said(logs, {'op': 'cut', 'slot': 7, 'id': 2, 'reads': 112,
                      'stopped_at': 1000.0}, tap_counts=lambda tap: (112, 0))
    assert (got['view']['reads'], got['view']['stop_reading_ms']) == (
        111, 0.5)
    assert logs.wants_stop_read(9, 10.0) is None       # no such log


def test_a_read_after_the_cuts_message_does_not_lift_the_base():
    """The agent counted 106 and asked for the cut. Frame 6 was handed to
    the tap after the cut's message passed the switch (its copy behind
    it), and QEMU's one read after STOP took it before the daemon read
    the tap for the cut: 107 reads against 6 copies. Counted, the base
    would be 101 (from this reading alone) and frame 5, the last the
    guest read, would go again; the base stays the readings' 100."""
    logs = opened()
    readings(logs, 100)
    for n in range(6):
        logs.copy(7, frame(n), 1.0)
    readings(logs, 104, at=2.0)        # 4 read, 2 queued in the tap
    got = said(logs, {'op': 'cut', 'slot': 7, 'reads': 106},
               tap_counts=lambda tap: (107, 0))
    assert (got['view']['base'], got['view']['tap_reads']) == (100, 107)
    assert got['view']['unread_copies'] == 0
    assert got['fields']['after'][-1] == digest(frame(5)).hex()


def test_the_agents_count_bounds_the_base_at_the_cut_when_it_can():
    """No reading settled while copies came (the move began just before
    STOP): the cut's reading bounds the base, with the agent's count, not
    the tap's one read more (its frame's copy not come)."""
    logs = opened()
    for n in range(6):
        logs.copy(7, frame(n), 0.0)
    got = said(logs, {'op': 'cut', 'slot': 7, 'reads': 506},
               tap_counts=lambda tap: (507, 0))
    assert got['view']['base'] == 500
    assert (got['fields']['after'][-1], got['view']['unread_copies']) == (
        digest(frame(5)).hex(), 0)
