"""A wire's window figures (rates, and loss over the last seconds) from
two of its samples. Pure; the in-process collector and the collector
process both answer with it.

A sample is (lower, upper, raw, judged): `raw` the raw counts
(`counters.FlowCounters.raw`), `judged` the loss beyond doubt each way
once it was taken (`loss.LossLedger.judge`), and the two times that
bound when its counts were true (`loss`)."""
from virtualwire.metrics.loss import DIRECTIONS

WINDOW = 10.0            # s of history for rates and windowed loss


def window(first, last):
    """{direction: window dict} between two samples."""
    span = last[1] - first[1]
    out = {}
    for k, d in enumerate(DIRECTIONS):
        r0, r1 = first[2][d], last[2][d]
        e, got = r1[0] - r0[0], r1[1] - r0[1]
        surely = last[3][k] - first[3][k]
        out[d] = {
            'seconds': round(span, 3), 'entered_packets': e,
            'delivered_packets': got,
            # Shown lost in the window: frames that can no longer arrive
            # (they may have entered before it), never more than were.
            'surely_lost_packets': surely,
            # Of the window's raw difference, what is not settled yet: in
            # flight, not counted yet, or lost where it cannot be proved.
            'uncertain_packets': max(0, e - got - surely),
            'packets_per_second': round(e / span, 3) if span else 0.0,
            'bits_per_second': round((r1[2] - r0[2]) * 8 / span, 1)
            if span else 0.0}
    return out


def flat(now, raw, judged):
    """The window of a wire that did not move: no rate, nothing lost."""
    sample = (now, now, raw, judged)
    return window((now, now - WINDOW, raw, judged), sample)
