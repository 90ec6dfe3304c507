"""Ensemble migration across clouds: N = 1, 2, 4 guests of one topology
moved together (`vwctl migrate --topology T --to HOST --parallel N`) and
the same guests moved one after another (`--parallel 1`), in one run.

One lab: cloud-a (h1, h3, extender xa behind a NAT), cloud-b (h2,
extender xb behind a NAT); the migration streams routed through the
extenders' encrypted link (vwlab.sites.route_sites), each held to
--bandwidth MiB/s. Each guest (QEMU TCG, 128 MiB) has one NIC wired to its
own far VM on h3 (cloud-a), all in one topology applied with vwctl. Each
far VM runs a sequenced echo stream (--rate, 250 a second: 4 ms apart;
SCHED_FIFO) to its guest
through every move; QEMU's STOP/RESUME events give each guest's pause.

Per move of the group: total (the vwctl command, first migration started
to last done), split (the first guest's RESUME to the last one's: how long
the group is divided between the clouds), and per wire the outage the
network added to its guest's pause (vwlab.outage.judge: the main hole by
send times minus the pause; probed runs only). Moves alternate direction
and order (together h1->h2, one by one h2->h1, one by one h1->h2,
together h2->h1, ...), so both modes see both directions.

    python bench/bench_ensemble.py [--sizes 1,2,4] [--rounds 1]
        [--bandwidth 10] [--name ensemble_migration-run1]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cloud_lab import two_clouds, wait                    # noqa: E402
from common import keep_logs, write_result                # noqa: E402

from vwlab import guest_report, outage                     # noqa: E402
from vwlab.qemu_events import EventWatch, stop_resume_windows  # noqa: E402



def vwctl(lab, *args, timeout=900):
    return subprocess.run([sys.executable, '-m', 'virtualwire.cli',
                           '--config', lab.vwctl_config] + list(args),
                          capture_output=True, text=True, timeout=timeout)


def topology(name, guests, fars):
    nodes = ''.join('  g%d: {vm: %s}\n  f%d: {vm: %s}\n' % (
        i, g.name, i, f.name) for i, (g, f) in enumerate(zip(guests, fars)))
    links = ''.join('  - endpoints: ["g%d:eth0", "f%d:eth0"]\n' % (i, i)
                    for i in range(len(guests)))
    return 'name: %s\nnodes:\n%slinks:\n%s' % (name, nodes, links)


class Group:
    """N guests on h1, each wired to its own far VM on h3 by a topology."""

    def __init__(self, lab, n, tag, rate):
        self.lab, self.n, self.tag, self.rate = lab, n, tag, rate
        h1, _h2, h3 = lab.hosts[:3]
        self.ips = ['10.95.%d.1' % i for i in range(n)]
        self.guests, self.fars = [], []
        for i in range(n):
            nic = str(uuid.uuid4())
            g = h1.define_guest('%s-g%d' % (tag, i), [
                (nic, self.ips[i] + '/24')])
            far = h3.add_vm('%s-f%d' % (tag, i), [(
                '%s-f%d-nic' % (tag, i), '10.95.%d.2/24' % i)])
            guest_report.report(h3, far)
            # The far end keeps probing a guest that stalls.
            far.sh(['ip', 'neigh', 'replace', self.ips[i], 'lladdr',
                    g.nics[nic]['mac'], 'dev', far.nics[list(far.nics)[0]][
                        'ifname'], 'nud', 'permanent'])
            self.guests.append(g)
            self.fars.append(far)
        path = os.path.join(lab.dir, '%s.yaml' % tag)
        with open(path, 'w') as f:
            f.write(topology(tag, self.guests, self.fars))
        p = vwctl(lab, 'topology', 'apply', path, '--wait')
        if p.returncode != 0:
            raise SystemExit('apply failed: %s' % p.stderr)
        self.where = h1

    def answering(self):
        return all(wait(lambda: far.ping(ip, count=1)[1] == 1, 60)
                   for far, ip in zip(self.fars, self.ips))

    def move(self, dst, parallel, bandwidth):
        """One move of the whole group; rows per guest and the figures."""
        lab, src = self.lab, self.where
        marks = [g.console_text().count('is not a head')
                 for g in self.guests]
        streams = [far.tool_bg('udp-echo', '--dst', ip, '--rate', self.rate,
                               '--seconds', 900, realtime=True)
                   for far, ip in zip(self.fars, self.ips)]
        time.sleep(1.0)
        with EventWatch([src, dst]) as ev:
            t0 = time.time()
            p = vwctl(lab, 'migrate', '--topology', self.tag, '--to',
                      dst.name, '--parallel', str(parallel), '--bandwidth',
                      str(bandwidth), *sum((['--vm', 'g%d' % i]
                                           for i in range(self.n)), []))
            total = time.time() - t0
            time.sleep(2.0)
        for s in streams:
            s.send_signal(signal.SIGINT)
        reports = [json.loads(s.communicate(timeout=60)[0].splitlines()[-1])
                   for s in streams]
        if p.returncode != 0:
            raise SystemExit('vwctl migrate failed: %s' % p.stderr)
        self.where = dst
        rows, resumes = [], []
        for g, r, m in zip(self.guests, reports, marks):
            [window] = stop_resume_windows(ev.events, g.name)
            row = outage.judge(r, window, self.rate)
            row['guest'] = g.name
            row['guest_crashed'] = \
                g.console_text().count('is not a head') > m
            resumes.append(window[2])
            rows.append(row)
        return {'parallel': parallel, 'move': '%s->%s' % (src.name,
                                                          dst.name),
                'total_s': round(total, 2),
                'split_s': round(max(resumes) - min(resumes), 2),
                'rows': rows, 'progress': p.stderr}

    def destroy(self):
        p = vwctl(self.lab, 'topology', 'destroy', self.tag)
        for g in self.guests:
            self.lab.destroy_guest(g)
        for f in self.fars:
            self.lab.hosts[2].remove_vm(f)
        return p.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--sizes', default='1,2,4')
    ap.add_argument('--rounds', type=int, default=1,
                    help='each round: 2 moves together, 2 one by one')
    ap.add_argument('--bandwidth', type=int, default=10,
                    help='MiB/s for each migration stream')
    ap.add_argument('--rate', type=int, default=250,
                    help='datagrams per second of each echo stream (1 kHz '
                    'streams through the userspace extenders slowed the '
                    'moves tenfold on 2 cores)')
    ap.add_argument('--keep-logs', metavar='DIR',
                    help='copy every lab log here at the end (the '
                    'controller says what each release delivered)')
    ap.add_argument('--name', default='ensemble_migration',
                    help='result file name (bench/results/NAME.json)')
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(',')]
    out = {}
    with two_clouds() as (lab, api):
        h1, h2 = lab.hosts[0], lab.hosts[1]
        rebuilt = {}
        for n in sizes:
            group = Group(lab, n, 'ens%d' % n, args.rate)
            moves = []
            for r in range(args.rounds):
                for parallel in (n, 1, 1, n):
                    if not group.answering():
                        # A guest QEMU's TCG fault broke (or one that never
                        # answered again): new guests go on from h1; the
                        # move before is kept, marked.
                        rebuilt[n] = rebuilt.get(n, 0) + 1
                        print('N=%d: a guest does not answer: new guests'
                              % n, flush=True)
                        group.destroy()
                        group = Group(lab, n, 'ens%dr%d' % (n, rebuilt[n]),
                                      args.rate)
                        if not group.answering():
                            raise SystemExit('new guests do not answer')
                    dst = h2 if group.where is h1 else h1
                    m = group.move(dst, parallel, args.bandwidth)
                    m['round'] = r + 1
                    moves.append(m)
                    added = [x['added_ms'] for x in m['rows']]
                    print('N=%d %s %-10s total %6.1f s split %5.1f s added '
                          'ms %s pauses ms %s%s' % (
                              n, m['move'], 'together' if
                              (len(moves) - 1) % 4 in (0, 3)
                              else 'one by one', m['total_s'],
                              m['split_s'], added,
                              [x['pause_ms'] for x in m['rows']],
                              ' CRASHED' if any(x['guest_crashed'] for x in
                                                m['rows']) else ''),
                          flush=True)
            group.destroy()
            out[n] = moves
            write_result(args.name + '-partial', {'moves': {
                k: [{x: y for x, y in m.items() if x != 'progress'}
                    for m in v] for k, v in out.items()}})
        if args.keep_logs:
            keep_logs(lab, args.keep_logs)
    doc = {'guests_rebuilt': rebuilt, 'sizes': sizes, 'rounds': args.rounds,
           'stream_rate': args.rate, 'bandwidth_mib_s': args.bandwidth, 'summary': {}, 'moves': {}}
    for n, moves in out.items():
        by = {'together': [m for i, m in enumerate(moves) if i % 4 in (0, 3)],
              'one_by_one': [m for i, m in enumerate(moves)
                             if i % 4 in (1, 2)]}
        s = {}
        for mode, ms in by.items():
            rows = [x for m in ms for x in m['rows']
                    if not x['guest_crashed']]
            s[mode] = {'total_s': [m['total_s'] for m in ms],
                       'split_s': [m['split_s'] for m in ms],
                       'added_ms': outage.dist([x['added_ms'] for x in rows
                                                if x['probed']]),
                       'pause_ms': outage.dist([x['pause_ms'] for x in rows]),
                       'lost_outside_pause': sum(x['lost_outside_pause']
                                                 for x in rows),
                       'duplicates': sum(x['duplicates'] for x in rows),
                       'unprobed': sum(not x['probed'] for x in rows),
                       'crashed': sum(x['guest_crashed'] for m in ms
                                      for x in m['rows'])}
        tog, seq = s['together']['total_s'], s['one_by_one']['total_s']
        s['total_ratio_together_vs_one_by_one'] = round(
            (sum(tog) / len(tog)) / (sum(seq) / len(seq)), 2)
        doc['summary'][n] = s
        doc['moves'][n] = [{k: v for k, v in m.items() if k != 'progress'}
                           for m in moves]
        doc.setdefault('progress_example', moves[0]['progress'])
    write_result(args.name, doc)
    for n, s in doc['summary'].items():
        print('N=%d: together total %s s split %s s added p50 %s max %s ms | '
              'one by one total %s s split %s s added p50 %s max %s ms | '
              'ratio %.2f' % (
                  n, s['together']['total_s'], s['together']['split_s'],
                  s['together']['added_ms']['p50'],
                  s['together']['added_ms']['max'],
                  s['one_by_one']['total_s'], s['one_by_one']['split_s'],
                  s['one_by_one']['added_ms']['p50'],
                  s['one_by_one']['added_ms']['max'],
                  s['total_ratio_together_vs_one_by_one']))


if __name__ == '__main__':
    main()
