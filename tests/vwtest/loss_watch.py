"""Watching a wire's loss figures as an operator's tools would: REST and
/metrics read every 0.3 s on a thread of its own while traffic runs."""
import re
import threading
import time

import requests

DIRS = ('a_to_b', 'b_to_a')


def metrics_lost(api, connector_id):
    """{direction: virtualwire_wire_lost_packets_total} of one wire."""
    r = api.req('GET', '/metrics')
    r.raise_for_status()
    out = {}
    for d in DIRS:
        m = re.search(r'^virtualwire_wire_lost_packets_total\{'
                      r'direction="%s",wire="%s"\} (\S+)$'
                      % (d, connector_id), r.text, re.M)
        if m:
            out[d] = float(m.group(1))
    return out


class LossWatch:
    """Reads the wire's stats and the /metrics figure every `every`
    seconds: samples of (t, stats, metrics)."""

    def __init__(self, api, wid, connector_id, every=0.3):
        self.api, self.wid, self.cid, self.every = (api, wid, connector_id,
                                                    every)
        self.samples = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(30)

    def _run(self):
        while not self._stop.is_set():
            t = time.time()
            try:
                r = self.api.req('GET', '/v1/wires/%d/stats' % self.wid)
                st = r.json() if r.status_code == 200 else None
                m = metrics_lost(self.api, self.cid)
            except requests.RequestException:
                st, m = None, None          # the controller is restarting
            if st is None:
                self.failures += 1
            else:
                self.samples.append((t, st, m))
            self._stop.wait(max(0.0, self.every - (time.time() - t)))

    def lost(self, d):
        """[(t, lost beyond doubt, window's surely lost, /metrics')]."""
        return [(t, st[d]['lost_packets'],
                 (st[d].get('window') or {}).get('surely_lost_packets', 0),
                 (m or {}).get(d)) for t, st, m in self.samples]

    def entered_while(self, d, t0, t1):
        """How much the wire's entered count rose between reads inside
        [t0, t1]: proof the reads saw the traffic they judge."""
        inside = [st[d]['entered_packets'] for t, st, _m in self.samples
                  if t0 <= t <= t1]
        return inside[-1] - inside[0] if len(inside) >= 2 else 0

    def never_above(self, d, truth):
        """Every read of every place at most `truth`: the failures."""
        return [(t, lost, win, met) for t, lost, win, met in self.lost(d)
                if lost > truth or win > truth or
                (met is not None and met > truth)]


def quiet(api, wid, every=1.0, span=4.0, timeout=60):
    """The wire's stats once nothing is in flight: readings `every` apart,
    alike for `span` seconds. Its entered minus delivered is then what was
    lost, and the loss judged beyond doubt must have come to the same.
    `span` is beyond what a judgement takes after the last frame (counter
    lag 0.75 s + flight 0.5 s + two reading intervals): two readings 1.5 s
    apart once came back alike before the ledger had read the last frame's
    entry (a gigabit flood, 1 frame of 218,031 still unsettled)."""
    last, since = None, None
    end = time.time() + timeout
    while time.time() < end:
        time.sleep(every)
        st = api.ok('GET', '/v1/wires/%d/stats' % wid)
        counts = [(st[d]['entered_packets'], st[d]['delivered_packets'],
                   st[d]['lost_packets']) for d in DIRS]
        now = time.time()
        if counts != last:
            last, since = counts, now
        elif now - since >= span:
            return st
    raise AssertionError('wire %d never quiet: %r' % (wid, last))


def truth(st, d):
    """Lost, by a quiet reading's counts."""
    return st[d]['entered_packets'] - st[d]['delivered_packets']


def check_against(watch, end):
    """Every read of the wire never above what it lost (its counts once
    quiet), and once quiet everything judged: lost, or unsettled only
    where a cut left a few frames in flight (a flow replaced at set-up
    while its first ARP crossed)."""
    for d in DIRS:
        lost = truth(end, d)
        bad = watch.never_above(d, lost)
        assert not bad, ('%s: shown lost above the %d the wire lost: %s; '
                         'once quiet: %s' % (d, lost, bad[:5], end[d]))
        assert end[d]['lost_packets'] + end[d]['unsettled_packets'] == \
            lost, (d, end[d])
        assert end[d]['unsettled_packets'] <= 3 * end[d]['loss_cuts'], \
            (d, end[d])
