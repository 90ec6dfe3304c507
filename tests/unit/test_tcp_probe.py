"""A TCP flow through a migration, judged from its sender's TCP_INFO
samples (vwlab.tcp_probe.judge): its rate, stall, recovery, timeouts."""
from vwlab.tcp_probe import CA_LOSS, judge

MBIT = 1e6 / 8


def flow(stop, resume, back_after, rate=80 * MBIT, rto_at=None):
    """Samples every 5 ms: acked at `rate` until STOP, nothing until
    RESUME + back_after, then at `rate` again."""
    out, acked, t = [], 0.0, stop - 3.0
    while t < resume + 3.0:
        if t <= stop or t >= resume + back_after:
            acked += rate * 0.005
        state = CA_LOSS if rto_at and rto_at <= t < rto_at + 0.2 else 0
        out.append((t, int(acked), 0 if t < resume else 3, state,
                    1 if state else 0, 204000 if t <= stop else 408000))
        t = round(t + 0.005, 6)
    return out


def test_a_flow_that_stalls_only_for_the_pause_is_back_at_once():
    j = judge(flow(100.0, 100.3, 0.0), 100.0, 100.3)
    assert j['rate_mbit_s'] == 80.0
    assert 295 <= j['stall_ms'] <= 305
    assert j['recovered_ms_after_resume'] <= 5
    assert j['rto'] is False and j['retransmissions'] == 3
    # The sender's timeout at STOP (it backs off after), in ms.
    assert j['sender_rto_ms'] == 204.0
    assert j['rto_ms_after_resume'] is None


def test_a_retransmission_timeout_shows_as_a_late_recovery():
    j = judge(flow(100.0, 100.3, 0.45, rto_at=100.5), 100.0, 100.3)
    # To within the 100 ms window's 10% (the window may start early).
    assert 435 <= j['recovered_ms_after_resume'] <= 455
    assert j['rto'] is True and j['max_backoff'] == 1
    # The timer ran out 200 ms after RESUME (to within a 5 ms sample).
    assert 195 <= j['rto_ms_after_resume'] <= 205


def test_a_flow_that_never_comes_back_says_so():
    samples = [x for x in flow(100.0, 100.3, 0.0) if x[0] <= 100.0]
    samples += [(100.0 + k * 0.005, samples[-1][1], 0, CA_LOSS, 3)
                for k in range(1, 400)]
    j = judge(samples, 100.0, 100.3)
    assert j['recovered_ms_after_resume'] is None and j['stall_ms'] is None
