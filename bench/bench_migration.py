"""Network-added outage of live migration: what the wire costs beyond the
guest's own pause.

A libvirt/QEMU guest on h1 has one wire to a far end on h3 and one to a
co-located end; it is migrated h1 -> h2 -> h1 ... --migrations times with
`virsh migrate --live` while each far end runs a 1 kHz sequenced UDP echo
stream through it. Per migration:

  pause        QEMU STOP (source) to RESUME (destination), from QMP events:
               the outage no network can avoid (the baseline, same run)
  lost window  from the first to the last lost datagram (send times) + 1 ms
  added        lost window - pause (by send times alone)
  causes       each lost datagram followed through packet captures and
               vswitchd's datapath flow log (vwlab.loss_audit):
               pause / guest (reached the running guest, never answered) /
               ovs-race (OVS 3.1 userspace tunnel race) / network (lost by
               the network outside the pause: the figure that must be 0)
  silent       ms of the pause in which the stream's sender sent nothing
               (not scheduled): a stream silent for over half the pause
               did not probe it ("unprobed" in the summary)

    python bench/bench_migration.py [--migrations 20] [--rt-sender]
"""
import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Api, summary, write_result               # noqa: E402

from vwlab import Lab, loss_audit                   # noqa: E402
from vwlab.capture import HostCaptures, guest_taps  # noqa: E402
from vwlab.qemu_events import (EventWatch,          # noqa: E402
                                         stop_resume_windows)

RATE = 1000


MARGIN = 0.005     # see tests/integration/test_migration.py


def outside(report, stop, resume):
    """Datagrams lost outside the pause (+ margin): the network's doing."""
    return sum(r['packets'] for r in report['lost_runs']
               if r['from'] < stop - MARGIN or r['to'] > resume + MARGIN)


def sender_silent(report, stop, resume):
    """Seconds of the pause during which the stream's sender sent nothing
    (not scheduled): those seconds were not probed at all."""
    return sum(max(0.0, min(a + gap, resume) - max(a, stop))
               for a, gap in report.get('send_gaps', ()))


def lost_window(report):
    runs = report['lost_runs']
    if not runs:
        return 0.0
    return runs[-1]['to'] - runs[0]['from'] + 1.0 / RATE


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--migrations', type=int, default=20)
    ap.add_argument('--rt-sender', action='store_true',
                    help='run the streams\' senders SCHED_FIFO, so that they '
                         'keep sending if the migration stalls the machine')
    args = ap.parse_args()
    with Lab(3, libvirt=True) as lab:
        h1, h2, h3 = lab.hosts
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(3)
        e0, e1 = str(uuid.uuid4()), str(uuid.uuid4())
        g = h1.define_guest('bench-g', [(e0, '10.91.0.1/24'),
                                        (e1, '10.92.0.1/24')])
        far = h3.add_vm('bench-far', [('bench-far', '10.91.0.2/24')])
        near = h1.add_vm('bench-near', [('bench-near', '10.92.0.2/24')])
        api.call('POST', '/v1/wires', {'a': e0, 'b': 'bench-far'})
        api.call('POST', '/v1/wires', {'a': e1, 'b': 'bench-near'})
        ends = {'far (tunnelled)': (far, '10.91.0.1'),
                'near (collapsed/expanded)': (near, '10.92.0.1')}
        for vm, dst in ends.values():
            for _ in range(200):
                if vm.ping(dst, count=1, wait=1)[1]:
                    break
        peers = {'far (tunnelled)': '10.91.0.2',
                 'near (collapsed/expanded)': '10.92.0.2'}
        rows = {k: [] for k in ends}
        pauses = []
        where, other = h1, h2
        for h in lab.hosts:
            h.log_datapath_flow_changes()
        for i in range(args.migrations):
            capdir = tempfile.mkdtemp(prefix='vw-bench-cap-')
            caps = HostCaptures(lab.hosts, capdir).__enter__()
            taps = guest_taps(where, g.name)
            streams = {k: vm.tool_bg('udp-echo', '--dst', dst, '--rate', RATE,
                                     '--seconds', 5)
                       for k, (vm, dst) in ends.items()}
            if args.rt_sender:
                for p in streams.values():
                    os.sched_setscheduler(p.pid, os.SCHED_FIFO,
                                          os.sched_param(10))
            time.sleep(1.0)
            with EventWatch([where, other]) as ev:
                took = lab.migrate(g, where, other)
                taps |= guest_taps(other, g.name)
                caps.note_interfaces()
                time.sleep(0.5)
            windows = stop_resume_windows(ev.events, g.name)
            (stop, _s, resume, _d), = windows
            pause = resume - stop
            pauses.append(pause)
            line = ['%2d %s->%s %.2fs pause %6.1f ms' % (
                i + 1, where.name, other.name, took, pause * 1000)]
            reports = {k: json.loads(p.communicate(timeout=60)[0]
                                     .splitlines()[-1])
                       for k, p in streams.items()}
            caps.stop()
            grams = caps.datagrams({q.to_bytes(8, 'big')
                                    for r in reports.values()
                                    for q, _ in r['lost_sent_at']})
            shutil.rmtree(capdir, ignore_errors=True)
            glitches = {h.name: loss_audit.ovs_glitches(h.vswitchd_log())
                        for h in lab.hosts}
            for k, r in reports.items():
                lw = lost_window(r)
                out = outside(r, stop, resume)
                verdicts = loss_audit.explain(
                    [tuple(x) for x in r['lost_sent_at']], grams, ends[k][1],
                    peers[k], 7000, taps,
                    {(h.name, 'br-phy') for h in lab.hosts}, windows, MARGIN,
                    glitches)
                causes = collections.Counter(v.cause for v in verdicts)
                # Where the losses that are not the pause itself happened:
                # runs as (datagrams, first ms, last ms) from the STOP.
                odd = {c: r for c, r in
                       loss_audit.summary(verdicts, windows).items()
                       if c != 'pause'}
                silent = sender_silent(r, stop, resume)
                rows[k].append({'pause': pause, 'lost_window': lw,
                                'sender_silent_in_pause': silent,
                                'added': lw - pause, 'lost': r['lost'],
                                'lost_outside_pause': out,
                                'causes': dict(causes),
                                'not_pause_runs_ms_from_stop': odd,
                                'duplicates': r['duplicates']})
                line.append('%s: lost %d (%.1f ms) added %.1f ms silent %.0f '
                            'ms %s dup %d%s' % (
                    k.split()[0], r['lost'], lw * 1000, (lw - pause) * 1000,
                    silent * 1000,
                    ' '.join('%s=%d' % kv for kv in sorted(causes.items())),
                    r['duplicates'], ' %s' % odd if odd else ''))
            print('  '.join(line), flush=True)
            where, other = other, where
            time.sleep(0.5)
        doc = {'migrations': args.migrations, 'rate_hz': RATE,
               'pause_ms': summary(pauses, 1000, 1)}
        print('\n%-28s %10s %10s %10s %8s %9s  %s' % (
            '', 'pause p50', 'lost p50', 'added p50', 'add max',
            'unprobed', 'lost datagrams by cause (all migrations)'))
        for k, rs in rows.items():
            added = [r['added'] for r in rs]
            lost = [r['lost_window'] for r in rs]
            doc[k] = {'added_ms': summary(added, 1000, 1),
                      'lost_window_ms': summary(lost, 1000, 1),
                      'duplicates': sum(r['duplicates'] for r in rs),
                      'lost_outside_pause': [r['lost_outside_pause']
                                             for r in rs],
                      'lost_by_cause': dict(sum(
                          (collections.Counter(r['causes']) for r in rs),
                          collections.Counter())),
                      'network_lost_outside_pause_per_migration': [
                          r['causes'].get('network', 0) for r in rs],
                      'not_pause_runs_ms_from_stop': [
                          r['not_pause_runs_ms_from_stop'] for r in rs],
                      # Streams whose sender sent nothing for most of the
                      # pause did not probe it (the machine stalled them).
                      'sender_silent_in_pause_ms': summary(
                          [r['sender_silent_in_pause'] for r in rs], 1000, 1),
                      'pause_not_probed': sum(
                          r['sender_silent_in_pause'] > r['pause'] / 2
                          for r in rs),
                      'ratio_lost_to_pause_p50': round(
                          summary(lost, 1, 4)['p50'] /
                          summary(pauses, 1, 4)['p50'], 2)}
            print('%-28s %9.1f  %9.1f  %9.1f  %7.1f %9s  %s' % (
                k, doc['pause_ms']['p50'], doc[k]['lost_window_ms']['p50'],
                doc[k]['added_ms']['p50'], doc[k]['added_ms']['max'],
                '%d/%d' % (doc[k]['pause_not_probed'], len(rs)),
                doc[k]['lost_by_cause']))
        write_result('migration', doc)


if __name__ == '__main__':
    main()
