"""Loss figures under bursts and real loss (issue 37): what "lost beyond
doubt" said, read every 0.3 s from REST, against the truth, with the
rule it replaced computed side by side from the same reads.

One tunnelled wire between two lab hosts (netns VMs, the controller
reading counters every 1 s, as the lab runs it). Phases, in one run:

  bursts   iperf3 -n 16M three times: nothing is lost by the network
           (its entered minus delivered once quiet says so); the largest
           figure each rule showed lost while and after they ran.
  outage   a 1 kHz UDP stream for --seconds with every GRE frame of the
           sending host dropped for 1 s on the underlay (nftables, with a
           counter): when each rule first showed the drop, what it showed
           at most, and how long after the stream paused the new one
           showed it all.
  steady   the same stream with 1 % of its frames dropped at random on
           the underlay (nftables numgen): how much of it the new rule
           proved while the stream ran, and after it paused.

The old rule (metrics/figures.py before issue 37): over the collector's
10 s window, lost beyond doubt = entered - delivered - ceil(rate x (2 x
0.5 s + the readings' spread)); it is computed here from the cumulative
counts the reads saw, one sample per collector reading.

    python bench/bench_loss_figures.py [--seconds 20] [--out loss-figures]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Api, write_result                      # noqa: E402

from vwlab import Lab                                       # noqa: E402
from vwlab.drops import UnderlayDrop                        # noqa: E402
from vwlab.shell import sh                                  # noqa: E402

DIRS = ('a_to_b', 'b_to_a')


class Reads(threading.Thread):
    def __init__(self, api, wid, every=0.3):
        super().__init__(daemon=True)
        self.api, self.wid, self.every = api, wid, every
        self.samples, self.stop = [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            t = time.time()
            st = self.api.call('GET', '/v1/wires/%d/stats' % self.wid)
            self.samples.append((t, st))
            self.stop.wait(max(0.0, self.every - (time.time() - t)))


def old_rule(samples, d, window=10.0, stale=0.5):
    """[(t, what the old rule called lost beyond doubt)] for each read:
    its window from the collector's readings (the reads where the
    counts changed stand for them; spread 0, which only lowers it)."""
    readings, out = [], []
    for t, st in samples:
        e, g = st[d]['entered_packets'], st[d]['delivered_packets']
        if not readings or readings[-1][1:] != (e, g):
            readings.append((t, e, g))
        while len(readings) > 2 and t - readings[1][0] >= window:
            readings.pop(0)
        t0, e0, g0 = readings[0]
        span = t - t0
        de, dg = e - e0, g - g0
        unsure = math.ceil(de / span * 2 * stale) if span > 0 else 0
        out.append((t, max(0, de - dg - unsure)))
    return out


def new_rule(samples, d):
    return [(t, st[d]['lost_packets']) for t, st in samples]


def quiet(api, wid, span=4.0):
    """Stats alike for `span` s: longer than a judgement takes after the
    last frame (counter lag + flight + two reading intervals)."""
    last, since = None, None
    while True:
        time.sleep(1.0)
        st = api.call('GET', '/v1/wires/%d/stats' % wid)
        counts = [(st[d]['entered_packets'], st[d]['delivered_packets'],
                   st[d]['lost_packets']) for d in DIRS]
        if counts != last:
            last, since = counts, time.time()
        elif time.time() - since >= span:
            return st


def iperf(client, server, dst, *args):
    srv = subprocess.Popen(['ip', 'netns', 'exec', server.ns, 'iperf3', '-s',
                            '-1'], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        p = subprocess.run(['ip', 'netns', 'exec', client.ns, 'iperf3', '-c',
                            dst, '-J'] + list(args), capture_output=True,
                           text=True, timeout=120)
        return json.loads(p.stdout)['end']
    finally:
        srv.kill()
        srv.wait()


def stream(src, dst, seconds, rate=1000, port=6200):
    rx = dst.tool_bg('udp-recv', '--port', port, '--seconds', seconds + 3)
    time.sleep(0.5)
    sent = src.tool('udp-send', '--dst', '10.78.0.2', '--port', port,
                    '--rate', rate, '--seconds', seconds,
                    timeout=seconds + 60)
    got = json.loads(rx.communicate(timeout=seconds + 30)[0]
                     .strip().splitlines()[-1])
    return sent, got


class RandomDrop:
    """1 in `every` GRE frames from `port` dropped on the underlay, and
    counted (nftables numgen)."""

    def __init__(self, ns, port, every=100):
        self.ns, self.port, self.every = ns, port, every
        self.dropped = None

    def __enter__(self):
        sh(['nft', 'add table bridge vwrand'], ns=self.ns)
        sh(['nft', 'add counter bridge vwrand dropped'], ns=self.ns)
        sh(['nft', 'add chain bridge vwrand drops { type filter hook '
            'forward priority -10 ; policy accept ; }'], ns=self.ns)
        sh(['nft', 'add rule bridge vwrand drops iifname "%s" ether type ip '
            'ip protocol gre numgen random mod %d 0 counter name dropped '
            'drop' % (self.port, self.every)], ns=self.ns)
        return self

    def __exit__(self, *exc):
        sh(['nft', 'flush chain bridge vwrand drops'], ns=self.ns)
        out = sh(['nft', 'list counter bridge vwrand dropped'], ns=self.ns)
        self.dropped = int(out.split('packets ')[1].split()[0])
        sh(['nft', 'delete table bridge vwrand'], ns=self.ns)


def phase(api, wid, action):
    base = quiet(api, wid)
    reads = Reads(api, wid)
    reads.start()
    marks = action()
    time.sleep(8)
    reads.stop.set()
    reads.join(10)
    end = quiet(api, wid)
    return base, end, reads.samples, marks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--seconds', type=float, default=20.0,
                    help='length of the outage and steady streams')
    ap.add_argument('--out', default='loss-figures')
    args = ap.parse_args()
    with Lab(2) as lab:
        h1, h2 = lab.hosts
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(2)
        a = h1.add_vm('lf-a', [('lf-a', '10.78.0.1/24')])
        b = h2.add_vm('lf-b', [('lf-b', '10.78.0.2/24')])
        wid = api.call('POST', '/v1/wires', {'a': 'lf-a', 'b': 'lf-b'})['id']
        time.sleep(3)
        a.ping('10.78.0.2', count=3)
        out = {'seconds': args.seconds}

        def bursts():
            spans = []
            for _ in range(3):
                t0 = time.time()
                iperf(a, b, '10.78.0.2', '-n', str(16 * 1024 * 1024))
                spans.append((t0, time.time()))
            return {'spans': spans}
        base, end, samples, marks = phase(api, wid, bursts)
        out['bursts'] = {}
        for d in DIRS:
            truth = (end[d]['entered_packets'] - end[d]['delivered_packets']
                     - base[d]['entered_packets'] +
                     base[d]['delivered_packets'])
            b0 = base[d]['lost_packets']
            out['bursts'][d] = {
                'lost_by_the_network': truth,
                'new_rule_max_shown': max(x - b0 for _t, x in
                                          new_rule(samples, d)),
                'old_rule_max_shown': max(x for _t, x in
                                          old_rule(samples, d)),
                'old_rule_reads_above_truth': sum(
                    1 for _t, x in old_rule(samples, d) if x > truth),
                'max_unsettled': max(st[d]['unsettled_packets']
                                     for _t, st in samples),
                'reads': len(samples),
                'entered': end[d]['entered_packets'] -
                base[d]['entered_packets']}
        print('bursts: %s' % out['bursts'], flush=True)

        def outage():
            res = {}
            t = threading.Thread(target=lambda: res.update(
                r=stream(a, b, args.seconds)))
            t.start()
            time.sleep(args.seconds / 2)
            with UnderlayDrop(lab.ul_ns_of(1), h1.name) as drop:
                time.sleep(1.0)
            res['drop_end'] = time.time()
            t.join(args.seconds + 60)
            res['stream_end'] = time.time()
            res['dropped'] = drop.dropped
            return res

        def steady():
            res = {}
            with RandomDrop(lab.ul_ns_of(1), h1.name) as drop:
                res['r'] = stream(a, b, args.seconds)
                res['stream_end'] = time.time()
            res['dropped'] = drop.dropped
            return res

        for name, action in (('outage', outage), ('steady_1pct', steady)):
            base, end, samples, marks = phase(api, wid, action)
            b0 = base['a_to_b']['lost_packets']
            sent, got = marks['r']
            new = [(t, x - b0) for t, x in new_rule(samples, 'a_to_b')]
            old = old_rule(samples, 'a_to_b')
            dropped = marks['dropped']
            # What the wire lost by its own counts once quiet: all the new
            # rule may show.
            lost = (end['a_to_b']['entered_packets'] -
                    end['a_to_b']['delivered_packets'] -
                    base['a_to_b']['entered_packets'] +
                    base['a_to_b']['delivered_packets'])
            since = marks.get('drop_end', samples[0][0])
            # The stream's loss: what its receiver missed (a background
            # frame lost beside it is in the counts, not in the stream).
            missed = sent['sent'] - got['received']
            target = min(lost, missed)

            def first(series, at_least):
                return next((round(t - since, 2) for t, x in series
                             if x >= at_least and x > 0), None)
            during = [x for t, x in new if t <= marks['stream_end']]
            out[name] = {
                'sent': sent['sent'], 'received': got['received'],
                'dropped_on_underlay': dropped,
                'lost_by_the_counts': lost,
                'new_rule_max_shown': max(x for _t, x in new),
                'new_rule_at_end': end['a_to_b']['lost_packets'] - b0,
                'new_rule_max_while_streaming': max(during),
                'new_rule_first_shown_s': first(new, 1),
                'receiver_missed': missed,
                'new_rule_all_shown_s': first(new, target),
                'new_rule_all_shown_after_pause_s': None if first(
                    new, target) is None else round(
                    first(new, target) + since - marks['stream_end'], 2),
                'old_rule_max_shown': max(x for _t, x in old),
                'old_rule_reads_above_truth': sum(
                    1 for t, x in old if x > lost),
                'old_rule_first_shown_s': first(old, 1),
                'reads': len(samples),
                'sender_sent_during_reads': sent['sent'],
                'from': 'drop end' if 'drop_end' in marks else 'first read'}
            print('%s: %s' % (name, out[name]), flush=True)
        write_result(args.out, out)


if __name__ == '__main__':
    main()
