"""Connect-to-first-packet latency: from the start of the connect request to
the first frame arriving at the far vNIC, over many fresh wires.

A beacon in VM a sends a small raw frame every --interval-us; the far VM
listens for the first one. Each trial makes a new wire (new connector id),
measures, disconnects and waits until the wire's flows are gone.

  ours      POST /v1/wires to the controller (intent stored in OVSDB, flows
            computed and sent as one bundle per host)
  baseline  the same flows (same pure function) installed by hand: one
            `ovs-ofctl --bundle add-flows` per host, both hosts in parallel

Both for a tunnelled wire (h1 -> h2) and a collapsed one (both ends on h1).

    python bench/bench_latency.py [--trials 200] [--interval-us 250]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Api, ofctl_flow, summary, write_result  # noqa: E402

from virtualwire.pipeline import wire as fl                          # noqa: E402
from virtualwire.core import ids                                  # noqa: E402
from vwlab import Lab                              # noqa: E402
from virtualwire.core.model import Encap, Host, VnicPort, Wire    # noqa: E402
from virtualwire.core.world import World    # noqa: E402

CASES = (('tunnelled', 'lat-b', 'vm-b'), ('collapsed', 'lat-c', 'vm-c'))


def hosts_from_api(api):
    """The controller's view of the lab hosts, as model.Host values."""
    vnics = api.call('GET', '/v1/vnics')['vnics']
    out = {}
    for h in api.call('GET', '/v1/hosts')['hosts']:
        out[h['name']] = Host(
            h['name'], int(h['dpid'], 16),
            (Encap('gre', h['tunnel_ip'], 65000),),
            vnics=tuple(VnicPort(v['id'], v['port'], v['ofport'])
                        for v in vnics if v['host'] == h['name']))
    return out


def _wire_spec(cid):
    """Every flow of wire `cid`, whatever its counting bits (32-47)."""
    return 'cookie=%#x/%#x' % (ids.wire_cookie(cid), ids.COOKIE_WIRE_MASK)


def cookie_gone(lab, cid):
    spec = _wire_spec(cid)
    return all('cookie=' not in h.ofctl('dump-flows', spec)
               for h in lab.hosts[:2])


def wait(fn, timeout=10, what='condition'):
    end = time.time() + timeout
    while time.time() < end:
        if fn():
            return
        time.sleep(0.005)
    raise RuntimeError('timed out waiting for ' + what)


def trial(lab, rx_vm, make, unmake):
    """One measurement: arm the receiver, make the wire, read the arrival.
    Returns seconds from make() to the first frame, or None if a frame from
    an earlier wire was still in flight (the trial is then repeated)."""
    ready = tempfile.mktemp(prefix='vwlat')
    p = rx_vm.tool_bg('first-frame', 'eth0', '--timeout', '10',
                      '--ready-file', ready)
    wait(lambda: os.path.exists(ready), what='receiver')
    os.unlink(ready)
    time.sleep(0.02)        # a frame queued before now would show up here
    t0 = time.monotonic()
    handle = make()
    out = p.communicate(timeout=15)[0]
    t1 = json.loads(out.strip().splitlines()[-1])['monotonic']
    unmake(handle)
    if t1 is None:
        raise RuntimeError('no frame crossed the wire within 10 s')
    return t1 - t0 if t1 >= t0 else None


def run_case(lab, api, rx_name, rx_vm, trials, hand):
    """`trials` latencies for wires lat-a <-> rx_name, ours or by hand."""
    out, stale = [], 0
    hosts = hosts_from_api(api) if hand else None
    tmp = tempfile.mkdtemp()
    seq = [0xB0000000]

    def make_ours():
        return api.call('POST', '/v1/wires', {'a': 'lat-a',
                                              'b': rx_name})['id']

    def unmake_ours(cid):
        api.call('DELETE', '/v1/wires/%d' % cid)
        wait(lambda: cookie_gone(lab, cid), what='flows removed')

    def make_hand():
        seq[0] += 1
        cid = seq[0]
        world = World({cid: Wire(cid, 'lat-a', rx_name)}, hosts)
        procs = []
        for name, table in fl.compute_flows(world).items():
            path = os.path.join(tmp, name)
            with open(path, 'w') as f:
                f.write('\n'.join(ofctl_flow(x) for x in table
                                  if x.cookie & ids.COOKIE_WIRE_MASK ==
                                  ids.wire_cookie(cid)) + '\n')
            h = lab.host(name)
            procs.append(subprocess.Popen(
                ['ovs-ofctl', '-O', 'OpenFlow14', '--bundle', 'add-flows',
                 'unix:%s/br-int.mgmt' % h.dir, path]))
        for p in procs:
            if p.wait() != 0:
                raise RuntimeError('ovs-ofctl add-flows failed')
        return cid

    def unmake_hand(cid):
        for h in lab.hosts[:2]:
            h.ofctl('del-flows', _wire_spec(cid))
        wait(lambda: cookie_gone(lab, cid), what='flows removed')

    make, unmake = (make_hand, unmake_hand) if hand else (make_ours,
                                                          unmake_ours)
    while len(out) < trials:
        d = trial(lab, rx_vm, make, unmake)
        if d is None:
            stale += 1
            continue
        out.append(d)
        if len(out) % 50 == 0:
            print('    %d/%d' % (len(out), trials), flush=True)
    return out, stale


def prepare(lab, interval_us):
    """The controller, VM a on h1 beaconing, b on h2 and c on h1: returns
    (api, {vm name: Vm}, the beacon process)."""
    h1, h2 = lab.hosts
    lab.start_controller()
    api = Api(lab)
    a = h1.add_vm('vm-a', [('lat-a', None)])
    vms = {'vm-b': h2.add_vm('vm-b', [('lat-b', None)]),
           'vm-c': h1.add_vm('vm-c', [('lat-c', None)])}
    api.wait_hosts(2)
    wait(lambda: len(api.call('GET', '/v1/vnics')['vnics']) == 3, 30,
         'vNICs seen')
    beacon = a.tool_bg('beacon', 'eth0', '--interval-us', interval_us,
                       '--src-mac', a.nics['lat-a']['mac'])
    return api, vms, beacon


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--result', default='latency',
                    help='bench/results/NAME.json (default: '
                         '%(default)s)')
    ap.add_argument('--trials', type=int, default=200)
    ap.add_argument('--interval-us', type=int, default=250)
    args = ap.parse_args()
    with Lab(2) as lab:
        print('lab up; starting controller', flush=True)
        api, vms, beacon = prepare(lab, args.interval_us)
        results = {}
        try:
            for hand in (False, True):
                # The controller stays up during the baseline: it only
                # rewrites a host whose desired table changes, and none does.
                label = 'baseline' if hand else 'ours'
                for case, rx, vm in CASES:
                    print('%s, %s wire: %d trials' % (label, case,
                                                      args.trials), flush=True)
                    lat, stale = run_case(lab, api, rx, vms[vm], args.trials,
                                          hand)
                    results[(case, label)] = (lat, stale)
        finally:
            beacon.kill()
            beacon.wait()
        doc = {'trials': args.trials, 'beacon_interval_us': args.interval_us,
               'note': 'latency includes up to one beacon interval'}
        print('\n%-28s %9s %9s %9s %9s %8s' % ('connect -> first packet (ms)',
                                            'p50', 'p99', 'max', 'base p50',
                                            'ratio'))
        for case, _rx, _vm in CASES:
            o, b = (summary(results[(case, k)][0], 1000)
                    for k in ('ours', 'baseline'))
            doc[case] = {'ours_ms': o, 'baseline_ms': b,
                         'stale_trials_repeated': {
                             k: results[(case, k)][1]
                             for k in ('ours', 'baseline')},
                         'ratio_p50': round(o['p50'] / b['p50'], 2),
                         'ratio_p99': round(o['p99'] / b['p99'], 2)}
            print('%-28s %9.2f %9.2f %9.2f %9.2f %7.2fx' % (
                case + ' (ours)', o['p50'], o['p99'], o['max'], b['p50'],
                o['p50'] / b['p50']))
            print('%-28s %9.2f %9.2f %9.2f' % (case + ' (baseline)', b['p50'],
                                               b['p99'], b['max']))
        write_result(args.result, doc)


if __name__ == '__main__':
    main()
