"""Rewire latency of a 16-vNIC guest whose far ends sit on 16 hosts.

A guest (a namespace VM with 16 vNICs) on h1 is wired to one vNIC on each
of 16 simulated hypervisors (real ovs-vswitchd bridges, each identified as
a host). Its destination ports appear on h2 (the migration's prepare step:
every sister starts sending to both hosts), then the destination sends
the RARP announce QEMU sends at switchover, on all 16 vNICs at once.
Measured from the RARP (its send time in the guest):

  delivery     the destination switch delivering (it learns the flows from
               the RARP itself; bounded above by the controller receiving
               the RARP copy the same action list sends)
  cleanup      the last sister switch confirming (OpenFlow barrier reply,
               `flows_confirmed_at` in GET /v1/hosts) its flow back to a
               single destination: the packet-in round trip, 17 bundles

Baseline in the same run, alternating: the same rewire with no RARP,
started by removing the source ports (what a controller without data-
plane activation does when the source leaves): from the removal to the
last sister flow re-pointed.

    python bench/bench_rewire.py [--trials 10]
"""
import argparse
import os
import subprocess
import sys
import uuid
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Api, summary, write_result               # noqa: E402

from virtualwire.core import ids                                    # noqa: E402
from vwlab import Lab, SimHosts                      # noqa: E402
from vwlab.simhosts import SIM_PLACEMENT                  # noqa: E402

N = 16


def wait(fn, timeout=30, what='condition'):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.02)
    raise TimeoutError(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--trials', type=int, default=10)
    args = ap.parse_args()
    with Lab(2, placement=SIM_PLACEMENT) as lab:
        h1, h2 = lab.hosts
        lab.start_controller()
        sims = SimHosts(lab, N, 1, name='rw')
        sims.up()
        api = Api(lab)
        api.wait_hosts(2 + N)
        nics = ['rw-g%d' % i for i in range(N)]
        cookies = {}
        for i, v in enumerate(nics):
            w = api.call('POST', '/v1/wires', {'a': v,
                                               'b': sims.vnic_id(i, 0)})
            # Bits 32-47 say what a flow counts: match the wire's only.
            cookies[i] = '0x%x' % ids.wire_cookie(w['id'])
        seq = [0]

        def guest_on(host, paused=False):
            """The guest's ports on `host`. On a destination it is silent
            until the RARP (a namespace VM would send IPv6 frames when its
            NICs come up, and any first frame activates the move)."""
            seq[0] += 1
            if not paused:
                return host.add_vm('rwg%d' % seq[0],
                                   [(v, None) for v in nics])
            return host.add_paused_vm(
                'rwg%d' % seq[0],
                [(v, '52:54:00:77:%02x:%02x' % (seq[0] % 256, i))
                 for i, v in enumerate(nics)])

        def sister_dests(k):
            out = subprocess.run(
                ['ovs-ofctl', '-O', 'OpenFlow14', 'dump-flows',
                 sims.ofctl_target(k), 'cookie=%s/%#x,in_port=1' % (
                     cookies[k], ids.COOKIE_WIRE_MASK)],
                capture_output=True, text=True).stdout
            return out.count('->tun_dst')

        def sim_env(k):
            return dict(os.environ,
                        OVS_RUNDIR=sims.group_dir(k // sims.per_switch))

        src, dst = h1, h2
        g = guest_on(src)
        wait(lambda: all(sister_dests(k) == 1 for k in range(N)),
             what='wires up')
        rows = {'rarp': [], 'source-leaves': []}
        for trial in range(2 * args.trials):
            mode = 'rarp' if trial % 2 == 0 else 'source-leaves'
            # What the destination's libvirt hook does at `migrate begin`.
            api.call('POST', '/v1/migrations', {
                'vm': 'rw-guest', 'vm_uuid': str(uuid.uuid4()),
                'vnics': nics, 'destination': dst.name})
            g2 = guest_on(dst, paused=True)
            wait(lambda: all(sister_dests(k) == 2 for k in range(N)),
                 what='every sister sends to both hosts')
            sim_names = {sims.bridge(k) for k in range(N)}
            time.sleep(0.3)
            if mode == 'rarp':
                t0 = float(g2.tool('rarp', *['eth%d' % i for i in
                                             range(N)])['sent_at'])
            else:
                cmd = []
                for v in nics:
                    cmd += ['--', 'del-port', 'br-int', g.nics[v]['port']]
                t0 = time.time()
                src.vsctl(*cmd)

            def confirmed():
                hs = [h for h in api.call('GET', '/v1/hosts')['hosts']
                      if h['name'] in sim_names]
                at = [h['flows_confirmed_at'] or 0 for h in hs]
                return at if len(at) == N and min(at) > t0 else None
            at = wait(confirmed, what='sisters re-pointed')
            row = {'cleanup_ms': (max(at) - t0) * 1e3,
                   'first_sister_ms': (min(at) - t0) * 1e3}
            for k in range(N):
                assert sister_dests(k) == 1, 'sister %d not re-pointed' % k
            if mode == 'rarp':
                # The RARP's copy reaches the controller from the same
                # action list that learned the flow: an upper bound of
                # when the destination switch started delivering.
                m = api.call('GET', '/v1/migrations')['migrations']
                got = [t for r in m for v, t in r['activated'].items()
                       if v in nics and t > t0]
                row['rarp_at_controller_ms'] = (max(got) - t0) * 1e3 if got else \
                    float('nan')
            rows[mode].append(row)
            print('%2d %-14s %s' % (trial + 1, mode, '  '.join(
                '%s %.1f' % (k, v) for k, v in sorted(row.items()))),
                flush=True)
            # Finish the move (remove the source) and go back the other way.
            if mode == 'rarp':
                for v in nics:
                    src.unplug(g, v)
            src.vms.pop(g.name, None)
            g, src, dst = g2, dst, src
            wait(lambda: all(sister_dests(k) == 1 for k in range(N)),
                 what='moves finished')
        doc = {'vnics': N, 'sister_hosts': N, 'trials': args.trials}
        for mode, rs in rows.items():
            doc[mode] = {k: summary([r[k] for r in rs], 1, 2)
                         for k in rs[0]}
        base = doc['source-leaves']['cleanup_ms']['p50']
        doc['ratio_rarp_at_controller_to_baseline_p50'] = round(
            doc['rarp']['rarp_at_controller_ms']['p50'] / base, 3)
        doc['ratio_rarp_cleanup_to_baseline_p50'] = round(
            doc['rarp']['cleanup_ms']['p50'] / base, 3)
        print('\n%-40s %8s %8s' % ('', 'p50 ms', 'max ms'))
        for label, d in (
                ('RARP -> its copy at the controller',
                 doc['rarp']['rarp_at_controller_ms']),
                ('RARP -> last sister flow (cleanup)',
                 doc['rarp']['cleanup_ms']),
                ('baseline: source leaves -> last sister',
                 doc['source-leaves']['cleanup_ms'])):
            print('%-40s %8.2f %8.2f' % (label, d['p50'], d['max']))
        print('ratios to baseline p50: RARP at controller %.3f, cleanup %.3f' % (
            doc['ratio_rarp_at_controller_to_baseline_p50'],
            doc['ratio_rarp_cleanup_to_baseline_p50']))
        write_result('rewire', doc)


if __name__ == '__main__':
    main()
