"""The lag guard (control.lag_guard): how far behind its switches the
controller runs, and which held vNICs stop holding for it."""
from virtualwire.control.lag_guard import (BEHIND, FAR_BEHIND, LagGuard,
                                           to_shed)


def test_behind_all_but_the_oldest_stop_and_far_behind_all_do():
    held = ['oldest', 'b', 'c']
    assert to_shed(BEHIND, held) == []
    assert to_shed(BEHIND + 0.01, held) == ['b', 'c']
    assert to_shed(FAR_BEHIND + 0.01, held) == held


def test_a_poll_out_counts_until_answered_or_its_connection_goes():
    now = [0.0]
    sessions = {'h1': 's1'}
    g = LagGuard(lambda: now[0], sessions.get)
    asked = g.asked('v', 's1')
    g.asked('v', 's1')                  # asked again: the oldest counts
    now[0] = 0.7
    assert g.oldest_out({'v'}, {'v': 'h1'}) == 0.7
    sessions['h1'] = 's2'               # the switch connected again
    assert g.oldest_out({'v'}, {'v': 'h1'}) == 0.0
    assert g.answered('v', asked) == 0.7 and g.recorded('v') == 0.7
    assert g.recorded('v') == 0.0
