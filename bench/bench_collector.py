"""What the flow-counter collector costs at scale, and what REST stats cost
before and after it (issue 11).

10,000 wires on 50 simulated hosts (bench_scale's plan), the controller
reading every switch's flow counters each --stats-interval:

  cycle        the collector's last reading of all 50 switches (its own
               figure, /v1/status), and the controller's CPU per cycle
               (its utime+stime over --seconds, divided by the cycles)
  /metrics     scrape time and size (what Prometheus fetches each scrape)
  stats now    GET /v1/wires/{id}/stats latency over --calls random wires
               (answered from the collector's memory)
  stats before side by side, what that call cost before the collector: a
               flow-stats request for the wire's cookie to each of its two
               hosts' switches (ovs-ofctl dump-flows with the cookie mask,
               the same request the old REST path sent), timed the same way;
               this includes starting ovs-ofctl twice, which the old path
               did not pay: `ovs-ofctl --version` twice is timed the same
               way, and "before" is also given without it

    python bench/bench_collector.py [--hosts 50] [--wires 10000]
"""
import argparse
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_scale import plan, wait_flows                   # noqa: E402
from common import Api, summary, write_result             # noqa: E402

from vwlab import Lab, SimHosts                             # noqa: E402
from vwlab.simhosts import SIM_PLACEMENT                  # noqa: E402

TICK = os.sysconf('SC_CLK_TCK')


def cpu_seconds(pid):
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--hosts', type=int, default=50)
    ap.add_argument('--wires', type=int, default=10000)
    ap.add_argument('--seconds', type=float, default=30.0)
    ap.add_argument('--calls', type=int, default=300)
    ap.add_argument('--out', default='collector',
                    help='result name under bench/results')
    args = ap.parse_args()
    pairs, per = plan(args.hosts, args.wires)
    with Lab(0, placement=SIM_PLACEMENT) as lab:
        lab.start_controller()
        sim = SimHosts(lab, args.hosts, per, name='sim', mgmt_index=200)
        sim.up(progress=lambda m: print('  ' + m, flush=True))
        api = Api(lab)
        api.wait_hosts(args.hosts)
        print('connecting %d wires' % args.wires, flush=True)
        wires, t_connect = [], time.time()
        for (ka, ma), (kb, mb) in pairs:
            if len(wires) % 1000 == 0 and wires:
                print('  %d wires, %.1f s' % (len(wires),
                                              time.time() - t_connect),
                      flush=True)
            wires.append(api.call('POST', '/v1/wires', {
                'a': sim.vnic_id(ka, ma), 'b': sim.vnic_id(kb, mb)})['id'])
        expected = [2] * args.hosts     # the miss and the carrier's reject
        for (ka, _), (kb, _) in pairs:
            expected[ka] += 2
            expected[kb] += 2
        wait_flows(sim, expected, 600)
        time.sleep(3 * 2.0)
        pid = lab.controller.pid
        s0 = api.call('GET', '/v1/status')['collector']
        p0 = lab.collector_get('/v1/status') if lab.collector_on else None
        c0, t0 = cpu_seconds(pid), time.time()
        time.sleep(args.seconds)
        c1, t1 = cpu_seconds(pid), time.time()
        s1 = api.call('GET', '/v1/status')['collector']
        p1 = lab.collector_get('/v1/status') if lab.collector_on else None
        cycles = s1['cycles'] - s0['cycles']
        idle_cpu = (c1 - c0) / (t1 - t0)
        print('collector: %d cycles in %.0f s, last took %s ms, pace %s s; '
              'controller CPU %.3f s/s' % (cycles, t1 - t0, s1['took_ms'],
                                           s1.get('pace_s'), idle_cpu),
              flush=True)

        scrape, size = [], 0
        for _ in range(10):
            s = time.perf_counter()
            r = api.s.get(lab.url + '/metrics', timeout=60,
                          verify=api.verify)
            scrape.append(time.perf_counter() - s)
            size = len(r.content)
        rng = random.Random(1)
        picks = [rng.randrange(len(wires)) for _ in range(args.calls)]
        now = []
        for j in picks:
            s = time.perf_counter()
            api.call('GET', '/v1/wires/%d/stats' % wires[j])
            now.append(time.perf_counter() - s)
        before = []
        for j in picks:
            (ka, _), (kb, _) = pairs[j]
            s = time.perf_counter()
            for k in (ka, kb):
                subprocess.run(['ovs-ofctl', '-O', 'OpenFlow14', 'dump-flows',
                                sim.ofctl_target(k),
                                'cookie=0x%x/0xffff0000ffffffff'
                                % (0x5657 << 48 | wires[j])],
                               check=True, capture_output=True)
            before.append(time.perf_counter() - s)
        starts = []
        for _ in picks:
            s = time.perf_counter()
            for _k in range(2):
                subprocess.run(['ovs-ofctl', '--version'], check=True,
                               capture_output=True)
            starts.append(time.perf_counter() - s)
        doc = {
            'hosts': args.hosts, 'wires': args.wires,
            'flows': sum(expected), 'stats_interval_s': s1['interval'],
            'collector_cycles': cycles,
            'collector_cycle_ms_last': s1['took_ms'],
            'collector_pace_s': s1.get('pace_s'),
            'controller_cpu_s_per_s': round(idle_cpu, 4),
            'controller_cpu_s_per_cycle': round(
                (c1 - c0) / cycles, 4) if cycles else None,
            'metrics_scrape_ms': summary(scrape, 1000),
            'metrics_bytes': size,
            'stats_now_ms': summary(now, 1000),
            'stats_before_ms': summary(before, 1000),
            'ofctl_start_twice_ms': summary(starts, 1000),
        }
        if p0 is not None:
            # The collector's own process (virtualwire-collector): CPU per
            # cycle (every switch read once) and memory.
            n = (p1['readings'] - p0['readings']) / float(args.hosts)
            doc['collector_process'] = {
                'cycles': round(n, 2),
                'cpu_s_per_cycle': round((p1['cpu_seconds'] -
                                          p0['cpu_seconds']) / n, 3)
                if n else None,
                'cpu_s_per_s': round((p1['cpu_seconds'] - p0['cpu_seconds'])
                                     / (t1 - t0), 4),
                'rss_mib': round(p1['rss_bytes'] / 2 ** 20, 1)}
        doc['stats_before_without_start_p50_ms'] = round(
            doc['stats_before_ms']['p50'] -
            doc['ofctl_start_twice_ms']['p50'], 3)
        doc['ratio_before_to_now_p50'] = round(
            doc['stats_before_ms']['p50'] / doc['stats_now_ms']['p50'], 1)
        doc['ratio_before_without_start_to_now_p50'] = round(
            doc['stats_before_without_start_p50_ms'] /
            doc['stats_now_ms']['p50'], 1)
        write_result(args.out, doc)
        text = ('%d wires, %d flows on %d hosts, read every %ss: a cycle '
                'took %s ms; controller CPU %.3f s/s (%.3f s per cycle); '
                '/metrics %d bytes, scrape p50 %.0f ms; stats call p50 %.2f '
                'p99 %.2f ms now, %.2f / %.2f ms asking the two switches '
                '(x%.1f; %.2f ms and x%.1f without starting ovs-ofctl)' % (
                    args.wires, doc['flows'], args.hosts, s1['interval'],
                    s1['took_ms'], idle_cpu,
                    doc['controller_cpu_s_per_cycle'] or 0, size,
                    doc['metrics_scrape_ms']['p50'],
                    doc['stats_now_ms']['p50'], doc['stats_now_ms']['p99'],
                    doc['stats_before_ms']['p50'],
                    doc['stats_before_ms']['p99'],
                    doc['ratio_before_to_now_p50'],
                    doc['stats_before_without_start_p50_ms'],
                    doc['ratio_before_without_start_to_now_p50']))
        if doc.get('collector_process'):
            text += ('; the collector process: %s s CPU per cycle, %s MiB'
                     % (doc['collector_process']['cpu_s_per_cycle'],
                        doc['collector_process']['rss_mib']))
        print(text)
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               'results', args.out + '.txt'), 'w') as f:
            f.write(text + '\n')


if __name__ == '__main__':
    main()
