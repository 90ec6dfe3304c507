"""Provider switches against the paper's experiments and OVN, in one run
(issue 41; VirtualWire sections 5.5 and 5.6).

Latency per hop (5.5): ping round trips from a VM on h1 to one on h2,
--pings a path a round, in blocks of 25 taken path by path in turn:

  wire                     a plain wire: the baseline
  host switch              a provider switch on h3 (both ends tunnelled)
  host switch, collapsed   the switch on h1, beside the sender (4.3)
  VM switch                a Linux bridge in a VM on h3
  VM switch, collapsed     the bridge VM on h1
  OVN switch               an OVN logical switch on the same hosts

A switch's cost is its path's p50 less the wire's in the same round;
what collapsing saves is the remote case's p50 less the collapsed one's.

Throughput (5.6): iperf3 TCP for --seconds from VMs on h1 to VMs on h2,
one pair alone, then two pairs at once (Mbit/s per pair), the cases'
order rotated each round:

  wires            two plain wires: the baseline
  central switch   one provider switch on h3: every frame crosses h3
  split switch     a provider switch split (a part on h1, one on h2, a
                   mesh wire between them: each VM's wire is collapsed)
  OVN switch       an OVN logical switch

    PYTHONPATH=controller:lab:bench python bench/bench_switches.py \\
        [--rounds 3] [--pings 400] [--seconds 5] [--out switches-run1]
    python bench/bench_switches.py --judge bench/results/switches-run*.json
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import threading

from bench_throughput import iperf                       # noqa: E402
from common import Api, pct, write_result                 # noqa: E402
from switch_paths import Builder                          # noqa: E402

from vwlab import Lab                                     # noqa: E402
from vwlab.ovn import Ovn                                 # noqa: E402

RTT = re.compile(r'time=([0-9.]+) ms')
BLOCK = 25                # pings of one path before the next path's


def rtts(p, count, interval=0.005):
    """The round trips (µs) of `count` pings from p.a to p.b, and how many
    of them were lost."""
    r = subprocess.run(['ip', 'netns', 'exec', p.a.ns, 'ping', '-n', '-c',
                        str(count), '-i', str(interval), '-W', '1', p.b_ip],
                       capture_output=True, text=True, timeout=count + 60)
    got = [float(x) * 1e3 for x in RTT.findall(r.stdout)]
    return got, count - len(got)


def lat_round(paths, pings, block=BLOCK):
    """Every path `pings` times, in blocks taken in turn: a drift in the
    machine's load (a 2-core host shared by 3 switches) falls on every
    path alike, not on whichever ran during it."""
    got = {case: [] for case in paths.latency}
    lost = dict.fromkeys(paths.latency, 0)
    for _ in range(max(1, pings // block)):
        for case, p in paths.latency.items():
            r, n = rtts(p, block)
            got[case] += r
            lost[case] += n
    out = {}
    for case in paths.latency:
        g = got[case]
        out[case] = {'n': len(g), 'lost': lost[case],
                     'p50_us': round(pct(g, 50), 1),
                     'p90_us': round(pct(g, 90), 1),
                     'p99_us': round(pct(g, 99), 1)}
        print('  %-24s p50 %7.1f  p90 %7.1f  p99 %7.1f us  (%d lost)' % (
            case, out[case]['p50_us'], out[case]['p90_us'],
            out[case]['p99_us'], lost[case]), flush=True)
    return out


def flows(pairs, seconds):
    """Mbit/s of each pair, all at once."""
    got = [None] * len(pairs)

    def run(i, p):
        got[i] = iperf(p.a, p.b, p.b_ip, seconds)[0]
    ts = [threading.Thread(target=run, args=(i, p))
          for i, p in enumerate(pairs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if None in got:
        raise RuntimeError('an iperf3 run failed')
    return [round(x, 1) for x in got]


def tp_round(paths, seconds, first=0):
    """Each case, starting with the `first`th (rounds rotate the order, so
    no case always runs first or last)."""
    out = {}
    cases = list(paths.throughput)
    for case in cases[first % len(cases):] + cases[:first % len(cases)]:
        pairs = paths.throughput[case]
        one = flows(pairs[:1], seconds)
        two = flows(pairs, seconds)
        out[case] = {'one_flow': one[0], 'two_flows': two}
        print('  %-16s 1 flow %7.1f   2 flows %s Mbit/s' % (
            case, one[0], ' + '.join('%.1f' % x for x in two)), flush=True)
    return out


def span(values, digits=1):
    return [round(min(values), digits), round(max(values), digits)]


def judge(lat, tp):
    """The derived figures, per round, then their range over rounds (of
    one run, or of every kept run: --judge)."""
    per = []
    for L in lat:
        w = L['wire']['p50_us']
        per.append({
            'host switch adds_us': L['host switch']['p50_us'] - w,
            'host switch, collapsed adds_us':
                L['host switch, collapsed']['p50_us'] - w,
            'VM switch adds_us': L['VM switch']['p50_us'] - w,
            'VM switch, collapsed adds_us':
                L['VM switch, collapsed']['p50_us'] - w,
            'OVN switch adds_us': L['OVN switch']['p50_us'] - w,
            'collapsing saves (host switch)_us':
                L['host switch']['p50_us'] -
                L['host switch, collapsed']['p50_us'],
            'collapsing saves (VM switch)_us':
                L['VM switch']['p50_us'] - L['VM switch, collapsed']['p50_us'],
        })
    lat_out = {k: span([r[k] for r in per]) for k in per[0]}
    tp_out = {}
    for case in tp[0]:
        tp_out[case] = {
            'one_flow_mbit': span([r[case]['one_flow'] for r in tp]),
            'two_flows_per_pair_mbit': span(
                [x for r in tp for x in r[case]['two_flows']]),
            'one_flow_vs_wires': span(
                [r[case]['one_flow'] / r['wires']['one_flow'] for r in tp], 2),
            'two_flows_vs_wires': span(
                [statistics.mean(r[case]['two_flows']) /
                 statistics.mean(r['wires']['two_flows']) for r in tp], 2)}
    # The paper's 5.6 comparison, pair for pair in the same round.
    tp_out['central vs split'] = {
        'one_flow': span([r['central switch']['one_flow'] /
                          r['split switch']['one_flow'] for r in tp], 2),
        'two_flows': span([statistics.mean(r['central switch']['two_flows'])
                           / statistics.mean(r['split switch']['two_flows'])
                           for r in tp], 2)}
    return lat_out, tp_out


def judge_files(paths):
    """The ranges over every round of the result files given."""
    lat, tp = [], []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        lat += doc['latency_rounds']
        tp += doc['throughput_rounds']
    lat_out, tp_out = judge(lat, tp)
    print(json.dumps({'runs': len(paths), 'rounds': len(lat),
                      'latency': lat_out, 'throughput': tp_out}, indent=1))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--pings', type=int, default=400)
    ap.add_argument('--seconds', type=int, default=5)
    ap.add_argument('--out', default='switches',
                    help='results file name (a run of several: -runN)')
    ap.add_argument('--judge', nargs='+', metavar='RESULT',
                    help='measure nothing: the ranges over these files\' '
                    'rounds')
    args = ap.parse_args()
    if args.judge:
        return judge_files(args.judge)
    with Lab(3) as lab:
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(3)
        ovn = Ovn(lab)
        ovn.start()
        b = Builder(lab, api, ovn)
        paths = b.build()
        where = b.describe()
        print('switches: %s' % json.dumps(where), flush=True)
        lat, tp = [], []
        for r in range(1, args.rounds + 1):
            print('round %d/%d: latency (%d pings a path)' % (
                r, args.rounds, args.pings), flush=True)
            lat.append(lat_round(paths, args.pings))
            print('round %d/%d: throughput (%d s a run)' % (
                r, args.rounds, args.seconds), flush=True)
            tp.append(tp_round(paths, args.seconds, first=r - 1))
        lat_out, tp_out = judge(lat, tp)
        print(json.dumps({'latency': lat_out, 'throughput': tp_out},
                         indent=1))
        write_result(args.out, {
            'rounds': args.rounds, 'pings': args.pings,
            'seconds': args.seconds, 'switches': where,
            'latency_rounds': lat, 'throughput_rounds': tp,
            'latency': lat_out, 'throughput': tp_out})
    return 0


if __name__ == '__main__':
    sys.exit(main())
