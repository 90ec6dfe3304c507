"""A wire's window figures (rates, loss over the last seconds) from two
samples of its raw counts (`counters.FlowCounters.raw`). Pure; the
in-process collector and the collector process both answer with it."""
import math

from virtualwire.metrics.counters import DIRECTIONS

WINDOW = 10.0            # s of history for rates and windowed loss
# OVS's userspace switch folds its datapath's counts into a flow's counter
# about twice a second: each end's figure may lag by this much, so while
# frames flow, entered minus delivered over a window is uncertain by up to
# the rate times (2 x this + the spread of the two switches' readings).
STALE = 0.5


def window(first, last, spread=0.0):
    """{direction: window dict} between samples first=(t0, raw0) and
    last=(t1, raw1)."""
    (t0, s0), (t1, s1) = first, last
    span = t1 - t0
    lag = 2 * STALE + (spread or 0.0)
    out = {}
    for d, _, _ in DIRECTIONS:
        e = s1[d][0] - s0[d][0]
        got = s1[d][1] - s0[d][1]
        unsure = math.ceil(e / span * lag) if span else 0
        out[d] = {
            'seconds': round(span, 3), 'entered_packets': e,
            'delivered_packets': got, 'lost_packets': e - got,
            # Of those, how many may be in flight or not counted yet, and
            # what is lost beyond doubt.
            'uncertain_packets': unsure,
            'surely_lost_packets': max(0, e - got - unsure),
            'packets_per_second': round(e / span, 3) if span else 0.0,
            'bits_per_second': round((s1[d][2] - s0[d][2]) * 8 / span, 1)
            if span else 0.0}
    return out
