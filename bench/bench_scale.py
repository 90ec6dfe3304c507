"""Time to set up N wires across H simulated hosts (default 10,000 across 50).

Ours: N sequential REST connects (what a cloud's API layer would send) until
every simulated host's switch holds all of its flows; or, with --batch B,
the N wires in calls of B (POST /v1/wires/batch?wait=programmed: one
transaction each, answered once every switch holds it), then the last
--singles of them removed and connected again one call each, for the
latency of callers that do not batch. Baseline, side by side
in the same run: the identical flow set (computed by the same pure function)
installed by hand with one `ovs-ofctl --bundle add-flows` per bridge on
identical bridges of the same kind: the raw floor of flow installation.

    python bench/bench_scale.py [--hosts 50] [--wires 10000]
                                [--batch 10000 --singles 1000]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Api, ofctl_flow, summary, write_result  # noqa: E402
from scrape_cost import scrape_cost                      # noqa: E402

from virtualwire.pipeline import wire as fl                          # noqa: E402
from vwlab import Lab, SimHosts                    # noqa: E402
from vwlab.simhosts import SIM_PLACEMENT                  # noqa: E402
from virtualwire.core.model import Encap, Host, VnicPort, Wire    # noqa: E402
from virtualwire.core.world import World    # noqa: E402


def plan(n_hosts, n_wires):
    """Wire j joins host k=j%H (port m) to host k+1 (port per/2+m)."""
    per_side = -(-n_wires // n_hosts)
    pairs = []
    for j in range(n_wires):
        k, m = j % n_hosts, j // n_hosts
        pairs.append(((k, m), ((k + 1) % n_hosts, per_side + m)))
    return pairs, 2 * per_side


def wait_flows(sim, expected, timeout):
    end = time.time() + timeout
    while time.time() < end:
        counts = sim.flow_counts()
        if counts == expected:
            return time.time()
        time.sleep(0.2)
    raise RuntimeError('switches did not converge: %s' % counts[:10])


def expected_flows(pairs, n_hosts):
    """Per-host flow count, from the pure model: the miss and the tunnel
    port's reject flow, then 2 per wire end."""
    expected = [2] * n_hosts
    for (ka, _), (kb, _) in pairs:
        expected[ka] += 2
        expected[kb] += 2
    return expected


def connect_all(lab, sim, pairs, n_hosts):
    """Our set-up: every pair connected over REST, one after the other,
    until each simulated switch holds all its flows."""
    api = Api(lab)
    api.wait_hosts(n_hosts)
    expected = expected_flows(pairs, n_hosts)
    print('connecting %d wires over REST' % len(pairs), flush=True)
    lat, wires = [], []
    t0 = time.time()
    for j, ((ka, ma), (kb, mb)) in enumerate(pairs):
        s = time.perf_counter()
        w = api.call('POST', '/v1/wires', {'a': sim.vnic_id(ka, ma),
                                           'b': sim.vnic_id(kb, mb)})
        lat.append(time.perf_counter() - s)
        wires.append(w['id'])
        if (j + 1) % 1000 == 0:
            print('  %d wires, %.1fs' % (j + 1, time.time() - t0),
                  flush=True)
    t_posted = time.time()
    t_done = wait_flows(sim, expected, 600)
    print('ours: %.2fs (REST %.2fs, then converged in %.2fs)'
          % (t_done - t0, t_posted - t0, t_done - t_posted), flush=True)
    return {'seconds': t_done - t0, 'latencies': lat, 'wires': wires,
            'expected': expected, 't0': t0, 'posted': t_posted,
            'done': t_done}


def connect_batches(lab, sim, pairs, n_hosts, size, singles):
    """The wires in batches of `size`, each waited for until programmed;
    then the last `singles` removed (one batch) and connected one call
    each."""
    api = Api(lab)
    api.wait_hosts(n_hosts)
    expected = expected_flows(pairs, n_hosts)
    items = [{'a': sim.vnic_id(ka, ma), 'b': sim.vnic_id(kb, mb)}
             for (ka, ma), (kb, mb) in pairs]
    print('connecting %d wires in batches of %d' % (len(items), size),
          flush=True)
    calls, wires = [], []
    t0 = time.time()
    for i in range(0, len(items), size):
        s = time.perf_counter()
        doc = api.call('POST', '/v1/wires/batch?wait=programmed&timeout=300',
                       {'create': items[i:i + size]}, timeout=330)
        calls.append(time.perf_counter() - s)
        # Programmed on every switch: none left out as not connected.
        assert doc['programmed']['programmed'] and \
            not doc['programmed']['not_connected'], doc['programmed']
        wires += [w['id'] for w in doc['created']]
        print('  %d wires, %.1fs' % (len(wires), time.time() - t0),
              flush=True)
    t_answered = time.time()
    # Programmed must mean on the switches: count them now.
    t_done = wait_flows(sim, expected, 600)
    print('batches: %.2fs until the last answer; flows counted on every '
          'switch %.2fs after it' % (t_answered - t0, t_done - t_answered),
          flush=True)
    lat = []
    if singles:
        tail = wires[-singles:]
        api.call('POST', '/v1/wires/batch?wait=programmed&timeout=300',
                 {'delete': tail}, timeout=330)
        for j, item in enumerate(items[-singles:]):
            s = time.perf_counter()
            w = api.call('POST', '/v1/wires', item)
            lat.append(time.perf_counter() - s)
            wires[len(wires) - singles + j] = w['id']
        wait_flows(sim, expected, 600)
    return {'seconds': t_done - t0, 'answered': t_answered - t0,
            'verify_after_answer': t_done - t_answered,
            'batch_calls': calls, 'latencies': lat, 'wires': wires,
            'expected': expected, 't0': t0, 'posted': t_answered,
            'done': t_done}


def controller_rss(lab, pid=None):
    """{'peak', 'now'} resident MiB of the controller process (or `pid`:
    the python under the lab's `nice` wrapper, which execs it)."""
    out = {}
    with open('/proc/%d/status' % (pid or lab.controller.pid)) as f:
        for line in f:
            if line.startswith(('VmHWM:', 'VmRSS:')):
                key = 'peak' if line.startswith('VmHWM') else 'now'
                out[key] = round(int(line.split()[1]) / 1024, 1)
    return out


def collector_cost(lab, n_hosts, seconds=20.0, most=240.0):
    """The collector process with every flow in place, over at least
    `seconds` and until it has read every switch twice (at most `most`:
    a big table stretches its pace): its CPU per poll cycle (a cycle:
    every switch read once), its pace and its memory."""
    a = lab.collector_get('/v1/status')
    t0 = time.time()
    while True:
        time.sleep(2.0)
        b = lab.collector_get('/v1/status')
        if time.time() - t0 >= seconds and \
                b['readings'] - a['readings'] >= 2 * n_hosts:
            break
        if time.time() - t0 >= most:
            break
    seconds = time.time() - t0
    cycles = (b['readings'] - a['readings']) / float(n_hosts)
    cpu = b['cpu_seconds'] - a['cpu_seconds']
    return {'window_s': round(seconds, 1), 'cycles': round(cycles, 2),
            'cpu_s': round(cpu, 2),
            'cpu_per_cycle_s': round(cpu / cycles, 3) if cycles else None,
            'cpu_share': round(cpu / seconds, 3),
            'flows_per_reading': round((b['flows_read'] - a['flows_read']) /
                                       max(1, b['readings'] - a['readings'])),
            'pace_s': b['pace_s'], 'took_ms': b['took_ms'],
            'rss_mib': controller_rss(lab, lab.collector_proc.pid)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--hosts', type=int, default=50)
    ap.add_argument('--wires', type=int, default=10000)
    ap.add_argument('--batch', type=int, default=0,
                    help='wires per batch call (0: one call per wire)')
    ap.add_argument('--singles', type=int, default=1000,
                    help='with --batch: wires then connected one by one')
    ap.add_argument('--baseline-without-ports', action='store_true',
                    help='baseline bridges without vNIC ports (faster to '
                         'build; their flows install faster too, so the '
                         'floor is lower)')
    ap.add_argument('--ports-as-rows', action='store_true',
                    help='simulated hosts whose vNIC ports are OVSDB rows '
                         'only, not switch ports (SimHosts ports="rows"; '
                         'the baseline bridges then have none either): '
                         'for 100,000 wires on 2 cores')
    ap.add_argument('--out', default='',
                    help='result name (default: scale or scale-batch)')
    args = ap.parse_args()
    pairs, per = plan(args.hosts, args.wires)
    with Lab(0, placement=SIM_PLACEMENT) as lab:
        lab.start_controller()
        print('building %d simulated hosts x %d vNICs (controller-connected)'
              % (args.hosts, per), flush=True)
        t_build = time.time()
        sim = SimHosts(lab, args.hosts, per, name='sim', mgmt_index=100,
                       ports='rows' if args.ports_as_rows else True)
        sim.up(progress=lambda m: print('  ' + m, flush=True))
        print('  built in %.0fs' % (time.time() - t_build), flush=True)
        base = SimHosts(lab, args.hosts, per, name='base',
                        mgmt_index=100 + sim.groups, connect=False,
                        ports=not (args.baseline_without_ports or
                                   args.ports_as_rows))
        print('building %d baseline bridges (no controller)' % args.hosts,
              flush=True)
        base.up()
        res = connect_batches(lab, sim, pairs, args.hosts, args.batch,
                              args.singles) if args.batch else \
            connect_all(lab, sim, pairs, args.hosts)
        api = Api(lab, note=False)      # the hub was noted before the wires
        ours, lat, wires, expected = (res['seconds'], res['latencies'],
                                      res['wires'], res['expected'])
        t_posted, t0, t_done = res['posted'], res['t0'], res['done']

        # Baseline: the same flows, by hand, on the baseline bridges.
        hosts = {}
        for k in range(args.hosts):
            hosts[base.bridge(k)] = Host(
                base.bridge(k), k + 1,
                (Encap('gre', sim.tunnel_ip(k), 65000),),
                vnics=tuple(VnicPort(sim.vnic_id(k, i), 'p%d' % i, i + 1)
                            for i in range(per)))
        world = World({cid: Wire(cid, sim.vnic_id(*a), sim.vnic_id(*b))
                       for cid, (a, b) in zip(wires, pairs)}, hosts)
        tables = fl.compute_flows(world)
        files = []
        tmp = tempfile.mkdtemp()
        for k in range(args.hosts):
            path = os.path.join(tmp, '%d.flows' % k)
            with open(path, 'w') as f:
                f.write('\n'.join(ofctl_flow(x) for x in
                                  sorted(tables[base.bridge(k)])) + '\n')
            files.append(path)
        b0 = time.time()
        for k in range(args.hosts):
            subprocess.run(['ovs-ofctl', '-O', 'OpenFlow14', '--bundle',
                            'add-flows', base.ofctl_target(k), files[k]],
                           check=True)
        b_done = wait_flows(base, expected, 120)
        baseline = b_done - b0
        print('baseline (ovs-ofctl --bundle add-flows per bridge): %.2fs'
              % baseline)
        n_flows = sum(expected)
        doc = {
            'hosts': args.hosts, 'wires': args.wires, 'flows': n_flows,
            'ours_seconds': round(ours, 2),
            'ours_rest_seconds': round(t_posted - t0, 2),
            'ours_converge_after_last_call_seconds': round(t_done - t_posted,
                                                           2),
            'ours_wires_per_second': round(args.wires / ours, 1),
            'connect_call_ms': summary(lat, 1000) if lat else None,
            'batch': args.batch or None,
            'singles': args.singles if args.batch else None,
            'batch_call_s': summary(res['batch_calls'], digits=2)
            if args.batch else None,
            'verify_after_last_answer_seconds': round(
                res['verify_after_answer'], 2) if args.batch else None,
            'baseline_seconds': round(baseline, 2),
            'baseline_bridges_have_ports': base.ports,
            'sim_ports': 'rows' if args.ports_as_rows else 'switch ports',
            'ratio_ours_to_baseline': round(ours / baseline, 1),
            # The controller process: peak and now; the collector process
            # (its own, since the collector left the controller's loop).
            'controller_rss_mib': controller_rss(lab),
            'collector': api.call('GET', '/v1/status')['collector'],
            'collector_process': collector_cost(lab, args.hosts),
        }
        doc['rss_together_peak_mib'] = round(
            doc['controller_rss_mib']['peak'] +
            doc['collector_process']['rss_mib']['peak'], 1)
        # Last, so it changes none of the figures above.
        doc['metrics_scrape'] = scrape_cost(api, lambda: controller_rss(lab))
        print('\n%-44s %10s %10s %8s' % ('', 'ours', 'baseline', 'ratio'))
        print('%-44s %9.2fs %9.2fs %7.1fx' % (
            'set up %d wires / %d flows on %d hosts' % (args.wires, n_flows,
                                                        args.hosts),
            ours, baseline, ours / baseline))
        if lat:
            print('connect call latency ms: p50 %.2f  p99 %.2f  max %.2f' % (
                doc['connect_call_ms']['p50'], doc['connect_call_ms']['p99'],
                doc['connect_call_ms']['max']))
        c = doc['collector_process']
        print('controller RSS peak %.0f MiB, collector %.0f MiB (together '
              '%.0f); collector CPU %.3f s per cycle of %d switches (%.0f '
              'flows each), pace %.1f s' % (
                  doc['controller_rss_mib']['peak'], c['rss_mib']['peak'],
                  doc['rss_together_peak_mib'], c['cpu_per_cycle_s'] or 0,
                  args.hosts, c['flows_per_reading'], c['pace_s']))
        m = doc['metrics_scrape']
        print('one /metrics scrape: %.2f s, %d samples, %.1f MB; the loop '
              'unanswered up to %.2f s; controller RSS peak %.0f MiB after'
              % (m['seconds'], m['samples'], m['bytes'] / 1e6,
                 m['healthz_longest_gap_s'] or 0,
                 m['rss_mib_after']['peak']))
        write_result(args.out or ('scale-batch' if args.batch else 'scale'),
                     doc)


if __name__ == '__main__':
    main()
