"""bench_migration's judge (bench/migration_report.goals): issue 42's bar
on a run's rows, here the first frame of the pause in the guest's tap."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'bench'))
import migration_report  # noqa: E402


def _row(into_ms):
    return {'guest_crashed': False, 'pause_ms': 80.0, 'probed': True,
            'added_ms': -80.0, 'main_hole_ms_from_stop': [0.0, 0.0],
            'lost_runs_ms_from_stop': [], 'duplicates': 0,
            'lost_outside_pause': 0, 'unprobed_why': None,
            'capture': {'first_into_dest_ms': into_ms}}


def _doc(into):
    rows = [_row(x) for x in into]
    ovn = [dict(_row(5.0), added_ms=6.0)]
    return {'virtualwire': {'far': dict(migration_report.outage.summarise(
        rows), rows=rows)}, 'ovn': {'far': dict(
            migration_report.outage.summarise(ovn), rows=ovn)}}


def test_a_move_whose_first_held_frame_reached_the_tap_late_misses_the_bar():
    ok = migration_report.goals(_doc([-40.0, 1.5]))['far']
    assert ok['first_held_in_tap_within_2ms'] and ok['met']
    late = migration_report.goals(_doc([-40.0, 5.7]))['far']
    assert not late['first_held_in_tap_within_2ms'] and not late['met']
    # A move the captures did not see is not taken as met.
    unseen = migration_report.goals(_doc([-40.0, None]))['far']
    assert not unseen['first_held_in_tap_within_2ms']


def _losing(into_pause_ms, cut, run=None):
    doc = _doc([-40.0, -30.0])
    row = doc['virtualwire']['far']['rows'][1]
    row['lost_runs_ms_from_stop'] = [run or [1, into_pause_ms,
                                             into_pause_ms]]
    row['lost_near_pause_cut'] = cut
    return migration_report.goals(doc)['far']


def test_a_pause_loss_the_source_qemu_read_did_not_reach_the_destination():
    placed = _losing(0.4, [[812, 0.4, 'read on the source']])
    assert placed['moves_losing_in_the_pause'] == 1
    assert placed['lost_in_the_pause_read_on_the_source'] == 1
    assert placed['moves_losing_in_the_pause_past_the_source'] == 0
    assert placed['met']
    # Past the cut (the ring's or the destination's part), or not placed
    # at all (no captures): it counts against the bar.
    for cut in ([[812, 0.4, 'after the cut, not released']], []):
        missed = _losing(0.4, cut)
        assert missed['moves_losing_in_the_pause_past_the_source'] == 1
        assert not missed['met']
    # Two lost in the pause, one of them read on the source: the other
    # reached the destination and was lost there.
    two = _losing(None, [[812, 0.4, 'read on the source'],
                         [813, 0.9, 'after the cut, not released']],
                  run=[2, 0.4, 0.9])
    assert two['moves_losing_in_the_pause_past_the_source'] == 1


def test_pause_losses_are_judged_by_sequence_number_where_placed():
    """A lost run's send times are spread evenly between its first and
    last; the cut audit has each one's own. Three lost from 1 ms before
    STOP to 1 ms after spread as -1, 0, +1 (two in the pause); sent at
    -1, -0.9 and +0.5 only one was, and the source's QEMU read it."""
    exact = _losing(None, [[810, -1.0, 'read on the source'],
                           [811, -0.9, 'read on the source'],
                           [812, 0.5, 'read on the source']],
                    run=[3, -1.0, 1.0])
    assert exact['moves_losing_in_the_pause'] == 1
    assert exact['moves_losing_in_the_pause_past_the_source'] == 0
    assert exact['met']
