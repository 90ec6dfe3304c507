"""The sequenced echo report tells losses each way apart (pure logic)."""
from vwlab.traffic import echo_report


def _sent(n):
    return {q: 100.0 + q / 1000.0 for q in range(n)}


def test_no_loss():
    r = echo_report(_sent(5), [(q, q + 1, 0) for q in range(5)])
    assert (r['lost'], r['duplicates'], r['lost_runs']) == (0, 0, [])


def test_losses_each_way_and_windows():
    # 2,3 never reached the responder (counter continues 3 -> 4 at seq 4);
    # 6 reached it (counter jumps 5 -> 7) but its echo was lost.
    echoes = [(0, 1, 0), (1, 2, 0), (4, 3, 0), (5, 4, 0), (7, 6, 0),
              (7, 6, 0)]
    r = echo_report(_sent(8), echoes)
    assert r['lost'] == 3
    assert r['lost_on_the_way_in'] == 2
    assert r['lost_on_the_way_back'] == 1
    assert r['duplicates'] == 1
    assert [(x['first'], x['last']) for x in r['lost_runs']] == [(2, 3),
                                                                  (6, 6)]
    assert r['lost_runs'][0]['from'] == 100.002


def test_lost_tail_is_counted():
    r = echo_report(_sent(4), [(0, 1, 0), (1, 2, 0)])
    assert r['lost'] == 2 and r['lost_tail'] == 2


def test_a_sender_that_fell_silent_says_when_and_for_how_long():
    sent = _sent(6)
    for q in (3, 4, 5):
        sent[q] += 0.080            # starved for 80 ms after datagram 2
    r = echo_report(sent, [(q, q + 1, 0) for q in range(6)])
    ((at, gap),) = r['send_gaps']
    assert at == sent[2] and abs(gap - 0.081) < 1e-9
    assert echo_report(_sent(6), [])['send_gaps'] == []
