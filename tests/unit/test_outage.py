"""The probe's verdicts on one migration: whether it measured the pause at
all, and what it lost outside it, datagram by datagram."""
from vwlab import outage
from vwlab.capture import Datagram
from vwlab.echo_probe import echo_report

STOP, RESUME = 100.0, 100.2


def _report(sent, lost=()):
    """echo_report of datagrams sent at `sent` (by seq), all echoed but
    `lost`."""
    at = dict(enumerate(sent))
    return echo_report(at, [(q, q + 1, t + 0.001) for q, t in at.items()
                            if q not in lost])


def _steady(t0, t1, rate=1000):
    return [t0 + i / rate for i in range(int((t1 - t0) * rate))]


def test_a_sender_sending_through_both_edges_probed_the_pause():
    r = _report(_steady(99.0, 101.0))
    v = outage.probe_check(r, STOP, RESUME)
    assert v == {'probed': True, 'stop_gap_ms': 0.0, 'resume_gap_ms': 0.0,
                 'why': ''}


def test_a_sender_silent_across_resume_did_not_probe_it():
    sent = [t for t in _steady(99.0, 101.0) if not 100.195 < t < 100.230]
    v = outage.probe_check(_report(sent), STOP, RESUME)
    assert not v['probed'] and v['why'] == 'sender silent across RESUME'
    assert 34 < v['resume_gap_ms'] < 36 and v['stop_gap_ms'] == 0.0


def test_a_stream_not_running_at_stop_did_not_probe_it():
    v = outage.probe_check(_report(_steady(100.1, 101.0)), STOP, RESUME)
    assert not v['probed'] and v['stop_gap_ms'] is None
    assert v['why'] == 'sender silent across STOP'


def test_lost_outside_the_pause_counts_datagrams_not_runs():
    """A loss run that begins 3 ms before the margin counts 3 datagrams
    outside the pause, not the whole run (the old figure counted 250)."""
    sent = _steady(99.0, 101.0)
    lost = {q for q, t in enumerate(sent)
            if STOP - outage.MARGIN - 0.003 <= t < RESUME - 0.05}
    r = _report(sent, lost)
    assert outage.lost_outside(r, STOP, RESUME) == 3
    assert len(lost) > 100
    assert outage.lost_outside(_report(sent, {q for q, t in enumerate(sent)
                                              if STOP <= t < RESUME}),
                               STOP, RESUME) == 0


def _into(host, tap, t, dst='10.0.0.1'):
    return Datagram(t, host, tap, True, '10.0.0.2', dst, 5555, 7000,
                    b'', None)


def test_delivery_edges_come_from_the_taps_not_the_sender():
    grams = [_into('h1', 'vnet0', t) for t in (99.990, 99.9985)] + \
            [_into('h1', 'vnet0', 100.1)] + \
            [_into('h2', 'vnet1', t) for t in (100.2031, 100.2041)] + \
            [_into('h2', 'vnet1', 100.25, dst='10.0.0.9'),
             Datagram(100.201, 'h2', 'vnet1', False, '10.0.0.1', '10.0.0.2',
                      7000, 5555, b'', None)]
    e = outage.delivery_edges(grams, '10.0.0.1', {('h1', 'vnet0')},
                              {('h2', 'vnet1')}, STOP, RESUME,
                              first_frame_at=100.2005)
    assert e == {'last_before_stop_ms': 1.5, 'first_into_dest_ms': 3.1,
                 'network_ms': 4.6, 'first_frame_to_delivery_ms': 2.6}
    # Delivered into the destination's tap before RESUME (the guest's RARP
    # came first): queued for the resuming guest, no share of the hole.
    early = [_into('h1', 'vnet0', 99.9995), _into('h2', 'vnet1', 100.150),
             _into('h2', 'vnet1', 100.151)]
    e = outage.delivery_edges(early, '10.0.0.1', {('h1', 'vnet0')},
                              {('h2', 'vnet1')}, STOP, RESUME,
                              first_frame_at=100.1495)
    assert e == {'last_before_stop_ms': 0.5, 'first_into_dest_ms': -50.0,
                 'network_ms': 0.5, 'first_frame_to_delivery_ms': 0.5}
    assert outage.delivery_edges([], '10.0.0.1', set(), set(), STOP,
                                 RESUME)['network_ms'] is None


def _seq(n, t, host, iface, outgoing, dst='10.0.0.1'):
    return Datagram(t, host, iface, outgoing, '10.0.0.2', dst, 5555, 7000,
                    n.to_bytes(8, 'big') + b'x', 7 if iface == 'ul0' else None)


def test_switch_over_tells_the_switchs_drops_from_its_delay():
    frame, tap = 100.2, {('h2', 'vnet1')}
    # Arrivals on h2's underlay 1 ms apart from 100.1985; the switch drops
    # those up to 100.2015 (1.5 ms after the frame), delivers from 100.2025,
    # each 0.8 ms after it arrived. Other hosts and ends do not count.
    grams = []
    for n in range(6):
        t = 100.1985 + n * 0.001
        grams.append(_seq(n, t, 'h2', 'ul0', False))
        if n >= 4:
            grams.append(_seq(n, t + 0.0008, 'h2', 'vnet1', True))
    grams += [_seq(9, 100.2019, 'h1', 'ul0', False),
              _seq(8, 100.2018, 'h2', 'ul0', False, dst='10.0.0.9')]
    assert outage.switch_over(grams, '10.0.0.1', 'h2', tap, frame) == {
        'arrived': 4, 'dropped_after_frame_ms': 1.5,
        'switch_latency_ms': 0.8}
    # Nothing dropped once the frame was in.
    ok = [g for g in grams if g.payload[:8] not in
          {n.to_bytes(8, 'big') for n in (2, 3)}]
    assert outage.switch_over(ok, '10.0.0.1', 'h2', tap, frame)[
        'dropped_after_frame_ms'] == 0.0
    # Nothing arrived after the frame: nothing measured.
    assert outage.switch_over(grams, '10.0.0.1', 'h2', tap, 101.0) == {
        'arrived': 0, 'dropped_after_frame_ms': None,
        'switch_latency_ms': None}


def test_unprobed_runs_are_listed_apart_and_not_averaged_in():
    sent = _steady(99.0, 101.0)
    win = (STOP, 'h1', RESUME, 'h2')
    lost = {q for q, t in enumerate(sent) if STOP - 0.002 <= t < RESUME + 0.003}
    good = outage.judge(_report(sent, lost), win, 1000)
    assert good['probed'] and good['added_ms'] == 5.0
    quiet = [t for t in sent if not 100.19 < t < 100.3]
    bad = outage.judge(_report(quiet), win, 1000)
    assert not bad['probed'] and bad['added_ms'] is None
    s = outage.summarise([good, bad, good])
    assert s['probed'] == 2 and s['added_ms']['n'] == 2
    assert s['unprobed'] == [{'run': 2, 'why': 'sender silent across RESUME'}]
    assert s['added_ms']['max'] == 5.0 and s['duplicates'] == 0


def test_a_later_hole_is_a_second_hole_not_part_of_the_added_outage():
    sent = _steady(99.0, 101.0)
    lost = {q for q, t in enumerate(sent)
            if STOP <= t < RESUME + 0.002 or 100.5 <= t < 100.508}
    row = outage.judge(_report(sent, lost), (STOP, 'h1', RESUME, 'h2'), 1000)
    assert row['added_ms'] == 2.0 and row['second_hole']
    assert row['other_holes'] == [{'ms_after_resume': 300.0, 'ms': 8.0,
                                   'datagrams': 8}]
    assert outage.summarise([row])['second_holes'] == 1


def test_the_added_outage_splits_into_before_stop_and_after_resume():
    # A hole from 6 ms before STOP to 1.2 ms after RESUME (pause 93 ms):
    # 7.2 ms added, 6.0 of them before STOP.
    row = {'probed': True, 'pause_ms': 93.0,
           'main_hole_ms_from_stop': [-6.0, 94.2], 'added_ms': 7.2}
    assert outage.split_added(row) == (6.0, 1.2)
    # Frames queued for the resuming guest: nothing added on either side.
    row.update(main_hole_ms_from_stop=[0.5, 90.0], added_ms=-3.5)
    assert outage.split_added(row) == (0.0, 0.0)
    # An unprobed stream says nothing about either.
    assert outage.split_added(dict(row, probed=False)) is None
    summary = outage.summarise([dict(row, main_hole_ms_from_stop=[-2.0, 95.0],
                                     capture={}, run=1, unprobed_why='',
                                     duplicates=0, lost_outside_pause=0)])
    assert summary['added_before_stop_ms']['max'] == 2.0
    assert summary['added_after_resume_ms']['max'] == 2.0


def test_a_slower_stream_is_allowed_its_own_half_interval():
    """250 a second: sends 4 ms apart probed the pause; at 1 kHz the same
    gap means the sender paused."""
    sent = [STOP - 0.0025 + i / 250 for i in range(-200, 300)]
    assert outage.probe_check(_report(sent), STOP, RESUME, 250)['probed']
    assert not outage.probe_check(_report(sent), STOP, RESUME)['probed']
