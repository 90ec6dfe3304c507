"""Does a flow-table change while a guest's tap vanishes make OVS 3.1's
userspace tunnel race fire?

After a live migration the source QEMU exits and its taps vanish from the
kernel 10-35 ms after RESUME, while their OVS ports stay until libvirt
deletes them; our controller's cleanup reaches the source host 20 ms after
the activation, inside that teardown. Every second hole our near end had
came then (docs/benchmarks.rst). This isolates the question without QEMU.

A wire h1 <-> h3 carries a 1 kHz sequenced UDP echo (h3 sends, clock-paced,
SCHED_FIFO). Each trial on h1: a tap is created, brought up and plugged,
left 0.3 s, then its device is deleted (as QEMU's exit does) and its port
0.4 s later (as libvirt does). Variants, interleaved trial by trial:

  none       no flow change
  at +0 ms   one flow-table change on h1 right after the device went
  at +10 ms  ... 10 ms after
  at +150 ms ... 150 ms after (outside the teardown)

The flow change is an add-flow on h1's underlay bridge (a flow nothing
matches): every bridge of a userspace ovs-vswitchd shares one datapath, so
it makes the revalidators re-translate br-int's flows exactly as our
bundle does, and the controller does not take it back. A hole (loss run)
counts for the trial whose device deletion came at most 0.35 s before it
(its port is deleted 0.4 s after; holes at plugging and port deletion
are counted apart).

    python bench/bench_teardown_race.py [--rounds 2] [--trials 30]
"""
import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Api, echo_wire, write_result               # noqa: E402

from vwlab import Lab                                          # noqa: E402
from vwlab.shell import sh                                     # noqa: E402

VARIANTS = {'none': None, 'at +0 ms': 0.0, 'at +10 ms': 0.010,
            'at +150 ms': 0.150}
# Matches nothing (an unused EtherType): changing it changes no path.
FLOW = 'table=0,priority=1,dl_type=0x88b5'
ACTIONS = 'actions=drop'
# After the device goes, before its port is deleted (0.4 s).
WINDOW = 0.35


def trial(host, name, delay):
    """One tap's life and teardown; returns when its device went (Unix s).
    The deletion and the flow change run in one shell in the host's
    namespace, so the delay between them is the sleep, not two process
    starts."""
    sh(['ip', 'tuntap', 'add', name, 'mode', 'tap'], ns=host.ns)
    sh(['ip', 'link', 'set', name, 'up'], ns=host.ns)
    host.vsctl('add-port', 'br-int', name)
    time.sleep(0.3)
    mgmt = 'unix:%s/br-phy.mgmt' % host.dir
    change = '' if delay is None else (
        '; sleep %.3f; ovs-ofctl add-flow %s %s,%s' % (delay, mgmt, FLOW,
                                                      ACTIONS))
    out = sh(['sh', '-c', 'date +%%s.%%N; ip link del %s%s' % (name, change)],
             ns=host.ns)
    gone = float(out.split()[0])
    time.sleep(0.4)
    host.vsctl('--if-exists', 'del-port', 'br-int', name)
    if delay is not None:
        host.ofctl('del-flows', '--strict', FLOW, bridge='br-phy')
    time.sleep(0.3)
    return gone


def one_round(trials):
    with Lab(3) as lab:
        h1 = lab.hosts[0]
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(3)
        _a, b, srv = echo_wire(lab, api, 't', '10.78.0')
        try:
            st = b.tool_bg('udp-echo', '--dst', '10.78.0.1', '--rate', 1000,
                           '--seconds', 3600, realtime=True)
            time.sleep(0.5)
            done = []
            for i in range(trials):
                for v, delay in VARIANTS.items():
                    done.append((trial(h1, 'td%d' % (len(done) % 100),
                                       delay), v))
            time.sleep(0.5)
            st.send_signal(signal.SIGINT)
            r = json.loads(st.communicate(timeout=60)[0].splitlines()[-1])
        finally:
            srv.kill()
    return attribute(done, r)


def attribute(done, report):
    """{variant: trials, holes, lost}: each loss run to the trial whose
    device deletion came at most WINDOW s before the run began."""
    out = {v: {'trials': 0, 'holes': 0, 'lost': 0,
               'ms_after_deletion': []} for v in VARIANTS}
    for _t, v in done:
        out[v]['trials'] += 1
    unattributed = 0
    for run in report['lost_runs']:
        owner = [(t, v) for t, v in done if 0 <= run['from'] - t <= WINDOW]
        if not owner:
            unattributed += 1
            continue
        t, v = owner[-1]
        out[v]['holes'] += 1
        out[v]['lost'] += run['packets']
        out[v]['ms_after_deletion'].append(round((run['from'] - t) * 1e3, 1))
    gaps = [g for _a, g in report['send_gaps']]
    return {'variants': out, 'unattributed_holes': unattributed,
            'sent': report['sent'],
            'max_send_gap_ms': round(max(gaps or [0]) * 1000, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--trials', type=int, default=30,
                    help='per variant and round (default: %(default)s)')
    args = ap.parse_args()
    rounds = []
    for i in range(args.rounds):
        r = one_round(args.trials)
        rounds.append(r)
        print('round %d: sent %d, max send gap %.1f ms, %d holes outside '
              'any trial' % (i + 1, r['sent'], r['max_send_gap_ms'],
                             r['unattributed_holes']), flush=True)
        for v, x in r['variants'].items():
            print('  %-11s %3d trials: %2d holes, %3d lost, at %s ms after '
                  'the device went' % (v, x['trials'], x['holes'], x['lost'],
                                       x['ms_after_deletion']), flush=True)
    total = {v: {m: sum(r['variants'][v][m] for r in rounds)
                 for m in ('trials', 'holes', 'lost')} for v in VARIANTS}
    for v, x in total.items():
        print('%-11s %3d trials: %3d holes, %4d lost' % (
            v, x['trials'], x['holes'], x['lost']))
    write_result('teardown_race', {'rounds': rounds, 'total': total,
                                   'flow_change': FLOW})


if __name__ == '__main__':
    main()
