"""Many REST clients at once, and a big switch reconnecting.

Part 1, callers that do not batch: C clients (default 16) each connect
their share of N wires one call at a time, against one client connecting
N wires alone, side by side in one run (one client, C clients, one
client again, so drift shows). Every call is ``POST /v1/wires`` answered
once stored; the run ends when every simulated switch holds every flow.
Per call latency p50/p99, and wires per second.

Part 2, a switch reconnecting with R flows (default 2,000): it drops its
OpenFlow connection and dials again; the controller dumps its table,
diffs it and sends only what is wrong. Timed from the reconnect until
the host is synced again: with its table intact (nothing to send), and
with 10% of its flows deleted by hand while disconnected (those sent
back). Baseline in the same run: ``ovs-ofctl dump-flows`` of the same
bridge (what reading the table costs by itself).

    python bench/bench_concurrency.py [--clients 16] [--wires 2000]
"""
import argparse
import os
import subprocess
import sys
import threading
import time

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_scale import expected_flows, wait_flows           # noqa: E402
from common import Api, summary, write_result               # noqa: E402

from vwlab import Lab, SimHosts                               # noqa: E402
from vwlab.simhosts import SIM_PLACEMENT                  # noqa: E402


def connect_phase(lab, sim, pairs, clients):
    """Connect every pair, spread over `clients` threads; returns (total
    seconds until every switch holds every flow, latencies, wire ids)."""
    lat, ids, errors = [], [], []
    lock = threading.Lock()
    shares = [pairs[i::clients] for i in range(clients)]

    def run(share):
        s = requests.Session()
        with open(lab.token_file) as f:
            s.headers['Authorization'] = 'Bearer ' + f.read().strip()
        for (ka, ma), (kb, mb) in share:
            t = time.perf_counter()
            r = s.post(lab.url + '/v1/wires', json={
                'a': sim.vnic_id(ka, ma), 'b': sim.vnic_id(kb, mb)},
                verify=lab.verify, timeout=60)
            d = time.perf_counter() - t
            with lock:
                if r.status_code != 201:
                    errors.append(r.text)
                else:
                    lat.append(d)
                    ids.append(r.json()['id'])
    t0 = time.time()
    threads = [threading.Thread(target=run, args=(sh,)) for sh in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError('%d connects refused: %s' % (len(errors),
                                                         errors[:3]))
    return t0, time.time() - t0, lat, ids


def remove_all(api, ids):
    api.call('POST', '/v1/wires/batch?wait=programmed&timeout=300',
             {'delete': ids}, timeout=330)


def pairs_for(hosts, per, offset, n):
    """n wires between host k and k+1, vNIC slots from `offset`."""
    out = []
    for j in range(n):
        k, m = j % hosts, offset + j // hosts
        out.append(((k, m), ((k + 1) % hosts, per // 2 + m)))
    return out


def reconnect_phase(lab, api, sim, k, damage, n_runs=5):
    """Seconds from bridge k's reconnect until the controller confirmed
    its table again; `damage`: flows deleted by hand first."""
    out = []
    name = sim.bridge(k)
    target = sim.vsctl(k, 'get-controller', name).split()
    for _ in range(n_runs):
        if damage:
            # Whole wires' flows (by cookie), ~`damage` flows.
            lines = subprocess.run(
                ['ovs-ofctl', '-O', 'OpenFlow14', 'dump-flows',
                 sim.ofctl_target(k)], capture_output=True, text=True,
                check=True).stdout.splitlines()
            cookies = sorted({l.split('cookie=')[1].split(',')[0]
                              for l in lines if 'cookie=0x' in l} - {'0x0'})
            sim.vsctl(k, 'del-controller', name)
            for c in cookies[:damage // 2]:
                subprocess.run(['ovs-ofctl', '-O', 'OpenFlow14', 'del-flows',
                                sim.ofctl_target(k), 'cookie=%s/-1' % c],
                               check=True)
            t0 = time.time()
            sim.vsctl(k, 'set-controller', name, *target)
        else:
            sim.vsctl(k, 'del-controller', name)
            t0 = time.time()
            sim.vsctl(k, 'set-controller', name, *target)
        while True:
            h = api.call('GET', '/v1/hosts/' + name)
            # Intact: read and diffed, nothing to send; damaged: the
            # missing flows sent back and confirmed by a barrier.
            if h['synced'] and (h['dumped_at'] or 0) > t0 and (
                    not damage or (h['flows_confirmed_at'] or 0) > t0):
                break
            time.sleep(0.01)
        out.append(time.time() - t0)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--result', default='concurrency',
                   help='bench/results/NAME.json (default: '
                        '%(default)s)')
    p.add_argument('--clients', type=int, default=16)
    p.add_argument('--wires', type=int, default=2000)
    p.add_argument('--hosts', type=int, default=10)
    p.add_argument('--reconnect-flows', type=int, default=2000)
    args = p.parse_args()
    per = 6 * -(-args.wires // args.hosts)
    with Lab(0, placement=SIM_PLACEMENT) as lab:
        lab.start_controller()
        sim = SimHosts(lab, args.hosts, per, name='sim', mgmt_index=200)
        print('building %d simulated hosts x %d vNICs' % (args.hosts, per),
              flush=True)
        sim.up()
        api = Api(lab)
        api.wait_hosts(args.hosts)
        phases = {}
        for i, clients in enumerate((1, args.clients, 1)):
            pairs = pairs_for(args.hosts, per, i * (per // 6),
                              args.wires)
            expected = expected_flows(pairs, args.hosts)
            t0, took, lat, ids = connect_phase(lab, sim, pairs, clients)
            t_done = wait_flows(sim, expected, 300)
            label = '%d client%s (%s)' % (clients, 's' if clients > 1
                                          else '', 'first' if i == 0 else
                                          'again' if i == 2 else 'then')
            phases[label] = {
                'clients': clients, 'calls_s': round(took, 3),
                'wires_per_s': round(args.wires / took, 1),
                'connect_ms': summary(lat, 1000),
                'until_on_every_switch_s': round(t_done - t0, 3)}
            print(label, phases[label], flush=True)
            remove_all(api, ids)
    # Part 2: one bridge with `reconnect_flows` flows.
    ends = args.reconnect_flows // 2 - 1
    with Lab(0, placement=SIM_PLACEMENT) as lab:
        lab.start_controller()
        sim = SimHosts(lab, 2, ends, name='big', mgmt_index=200)
        sim.up()
        api = Api(lab)
        api.wait_hosts(2)
        pairs = [((0, m), (1, m)) for m in range(ends)]
        remove_ids = []
        for i in range(0, len(pairs), 1000):
            doc = api.call('POST', '/v1/wires/batch?wait=programmed', {
                'create': [{'a': sim.vnic_id(0, a[1]),
                            'b': sim.vnic_id(1, b[1])}
                           for a, b in pairs[i:i + 1000]]}, timeout=300)
            remove_ids += [w['id'] for w in doc['created']]
        flows = sim.flow_counts()[0]
        print('bridge big0 holds %d flows' % flows, flush=True)
        intact = reconnect_phase(lab, api, sim, 0, 0)
        damaged = reconnect_phase(lab, api, sim, 0, flows // 10)
        dumps = []
        for _ in range(5):
            t = time.time()
            subprocess.run(['ovs-ofctl', '-O', 'OpenFlow14', 'dump-flows',
                            sim.ofctl_target(0)], capture_output=True,
                           check=True)
            dumps.append(time.time() - t)
        reconnect = {'flows': flows,
                     'intact_s': summary(intact, digits=3),
                     'damaged_10pct_s': summary(damaged, digits=3),
                     'baseline_ofctl_dump_s': summary(dumps, digits=3)}
        print('reconnect', reconnect, flush=True)
    one = phases['1 client (first)']['connect_ms']['p50']
    many = phases['%d clients (then)' % args.clients]
    doc = {'wires': args.wires, 'hosts': args.hosts, 'phases': phases,
           'ratio_p50_many_over_one': round(many['connect_ms']['p50'] / one,
                                            2),
           'ratio_throughput_many_over_one': round(
               many['wires_per_s'] /
               phases['1 client (first)']['wires_per_s'], 2),
           'reconnect': reconnect}
    write_result(args.result, doc)


if __name__ == '__main__':
    main()
