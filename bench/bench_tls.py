"""What TLS costs, side by side in one run: the same lab built twice, with
TLS on every channel (the default) and with --insecure-plaintext-lab.

  connect -> first packet   both labs up at once; trials alternate between
                            them (TLS, plain, TLS, ...), tunnelled and
                            collapsed wires, as bench_latency measures them
  set-up of N wires         bench_scale's REST set-up on H simulated hosts,
                            plain lab first, then the TLS lab, then plain
                            again (so drift shows as a plain-plain spread)

    python bench/bench_tls.py [--trials 100] [--hosts 50] [--wires 10000]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_latency import CASES, prepare, run_case           # noqa: E402
from bench_scale import connect_all, plan                    # noqa: E402
from common import summary, write_result                    # noqa: E402

from vwlab import Lab, SimHosts                              # noqa: E402
from vwlab.simhosts import SIM_PLACEMENT                  # noqa: E402

MODES = ('tls', 'plain')


def latency_lab(tls, interval_us):
    lab = Lab(2, tls=tls, placement=SIM_PLACEMENT).__enter__()
    return (lab,) + prepare(lab, interval_us)


def latencies(trials, interval_us):
    labs = {m: latency_lab(m == 'tls', interval_us) for m in MODES}
    out = {(m, c): [] for m in MODES for c, _r, _v in CASES}
    try:
        for i in range(trials):
            for case, rx, vm in CASES:
                for m in (MODES if i % 2 == 0 else MODES[::-1]):
                    lab, api, vms, _b = labs[m]
                    lat, _stale = run_case(lab, api, rx, vms[vm], 1, False)
                    out[(m, case)] += lat
            if (i + 1) % 20 == 0:
                print('  %d/%d trials each' % (i + 1, trials), flush=True)
    finally:
        for lab, _api, _vms, beacon in labs.values():
            beacon.kill()
            beacon.wait()
            lab.__exit__(None, None, None)
    return out


def setup_seconds(tls, hosts, wires):
    pairs, per = plan(hosts, wires)
    with Lab(0, tls=tls, placement=SIM_PLACEMENT) as lab:
        lab.start_controller()
        sim = SimHosts(lab, hosts, per, name='sim', mgmt_index=200)
        sim.up(progress=lambda m: print('  ' + m, flush=True))
        res = connect_all(lab, sim, pairs, hosts)
        return res['seconds'], summary(res['latencies'], 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--result', default='tls',
                    help='bench/results/NAME.json (default: '
                         '%(default)s)')
    ap.add_argument('--trials', type=int, default=100)
    ap.add_argument('--interval-us', type=int, default=250)
    ap.add_argument('--hosts', type=int, default=50)
    ap.add_argument('--wires', type=int, default=10000)
    ap.add_argument('--skip-scale', action='store_true')
    args = ap.parse_args()
    doc = {'trials': args.trials, 'beacon_interval_us': args.interval_us,
           'note': 'latency includes up to one beacon interval; trials '
                   'alternate between the TLS and the plain lab'}
    print('connect -> first packet: TLS and plain labs, %d trials each'
          % args.trials, flush=True)
    lat = latencies(args.trials, args.interval_us)
    print('\n%-34s %8s %8s %8s' % ('connect -> first packet (ms)', 'p50',
                                   'p99', 'max'))
    for case, _rx, _vm in CASES:
        s = {m: summary(lat[(m, case)], 1000) for m in MODES}
        doc[case] = dict(s, ratio_p50=round(s['tls']['p50'] /
                                             s['plain']['p50'], 3),
                         ratio_p99=round(s['tls']['p99'] /
                                         s['plain']['p99'], 3))
        for m in MODES:
            print('%-34s %8.2f %8.2f %8.2f' % ('%s (%s)' % (case, m),
                                               s[m]['p50'], s[m]['p99'],
                                               s[m]['max']))
        print('%-34s %7.3fx %7.3fx' % ('%s TLS/plain' % case,
                                       doc[case]['ratio_p50'],
                                       doc[case]['ratio_p99']))
    if not args.skip_scale:
        runs = []
        for tls in (False, True, False):
            name = 'tls' if tls else 'plain'
            print('\nset-up of %d wires on %d hosts, %s' % (
                args.wires, args.hosts, name), flush=True)
            t0 = time.time()
            seconds, calls = setup_seconds(tls, args.hosts, args.wires)
            runs.append({'mode': name, 'seconds': round(seconds, 2),
                         'connect_call_ms': calls,
                         'lab_total_seconds': round(time.time() - t0, 1)})
        plain = [r['seconds'] for r in runs if r['mode'] == 'plain']
        tls_s = next(r['seconds'] for r in runs if r['mode'] == 'tls')
        doc['scale'] = {'hosts': args.hosts, 'wires': args.wires,
                        'runs': runs,
                        'ratio_tls_to_plain_mean': round(
                            tls_s / (sum(plain) / len(plain)), 3)}
        print('\nset-up of %d wires: plain %s s, TLS %.2f s (%.3fx the '
              'plain mean)' % (args.wires, ' / '.join('%.2f' % p
                                                      for p in plain),
                               tls_s, doc['scale']['ratio_tls_to_plain_mean']))
    write_result(args.result, doc)


if __name__ == '__main__':
    main()
