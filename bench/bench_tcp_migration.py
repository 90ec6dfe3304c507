"""A TCP flow towards a live-migrating guest: VirtualWire, VirtualWire with
held frames, and OVN side by side (the systems of bench_migration.py, one
lab, alternating migration by migration).

Each far end (a VM on h3) sends TCP as fast as the path takes to its
guest's sink (vw-responder's, port 7001) through each migration h1 <-> h2,
sampling its own TCP_INFO every 5 ms (vwlab.tcp_probe). Per move:

  rate_mbit_s       the flow's rate before (median of 100 ms windows in the
                    2 s before STOP)
  stall_ms          the longest time without an acknowledgement moving,
                    from 0.5 s before STOP to 1 s after RESUME
  recovered_ms_after_resume
                    RESUME -> the first 100 ms window at 90% of that rate
                    (to within ~10 ms)
  retransmissions, rto
                    segments retransmitted around the move, and whether a
                    retransmission timeout struck (congestion state Loss)
  guest_first_ack_ms_after_resume
                    RESUME -> the guest's first acknowledgement into its
                    tap on the destination (a capture there): the time the
                    guest took to answer, apart from the network's
  sender_rto_ms     the sender's retransmission timeout at STOP, and
  rto_ms_after_resume
                    when it ran out: before RESUME (negative) the guest
                    was paused and could acknowledge nothing, whatever the
                    network did with the segments

Without held frames the segments sent during the pause are lost and TCP
must retransmit them; with them they arrive late, and TCP sees delay.

With --rate-mbit the sender is paced (10 Mbit/s: ~850 segments a second,
a 250 ms pause's worth well inside held frames' bound and rate).

    python bench/bench_tcp_migration.py [--migrations 5] [--rate-mbit M]
"""
import argparse
import json
import os
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Api, write_result                          # noqa: E402
from migration_evidence import last_record                     # noqa: E402
from migration_systems import console_marks, setup            # noqa: E402

from vwlab import Lab, outage                                  # noqa: E402
from vwlab.capture import Capture, frames, guest_taps          # noqa: E402
from vwlab.capture import ifindexes_of                         # noqa: E402
from vwlab.ovn import Ovn                                      # noqa: E402
from vwlab.qemu_events import EventWatch, stop_resume_windows  # noqa: E402
from vwlab.tcp_probe import judge                              # noqa: E402

SINK_PORT = 7001        # vw-responder's TCP sink in the guest


def migrate_once(lab, sysm, rate_mbit, workdir):
    h1, h2, _h3 = lab.hosts
    src = sysm.where
    dst = h2 if src is h1 else h1
    g = sysm.guest
    vm, ip, nic = sysm.ends['far']
    stream = vm.tool_bg('tcp-stream', '--dst', ip, '--seconds', 120,
                        '--rate-mbit', rate_mbit)
    marks = console_marks(g)
    time.sleep(3.0)                   # the rate before, 2 s of it judged
    sysm.before(src, dst)
    # The guest's acknowledgements on its destination (the sink's port;
    # tunnelled frames do not match): when its first one left the guest.
    acks = Capture(dst.ns, dst.name, os.path.join(workdir, 'acks.pcap'),
                   'tcp src port %d' % SINK_PORT, snaplen=96)
    with EventWatch([src, dst]) as ev, acks:
        took = lab.migrate(g, src, dst)
        dst_taps = guest_taps(dst, g.name)
        acks.note_interfaces()
        sysm.after(dst)
        time.sleep(3.0)
    stream.send_signal(signal.SIGINT)
    samples = json.loads(stream.communicate(timeout=60)[0]
                         .splitlines()[-1])['samples']
    sysm.where = dst
    [(stop, _s, resume, _d)] = stop_resume_windows(ev.events, g.name)
    row = judge(samples, stop, resume)
    taps = ifindexes_of(acks, {t for _h, t in dst_taps})
    first = next((t for t, _p, i, out in frames(acks.path)
                  if t > stop and not out and i in taps), None)
    os.unlink(acks.path)
    row.update({'pause_ms': round((resume - stop) * 1000, 1),
                # RESUME -> the guest's first acknowledgement into its
                # destination tap: what the guest took to answer.
                'guest_first_ack_ms_after_resume': round(
                    (first - resume) * 1000, 1) if first else None,
                'took_s': round(took, 2),
                'guest_crashed': console_marks(g) > marks,
                'held': (last_record(sysm).get('held') or {}).get(nic)})
    sysm.rows['far'].append(row)
    print('%-11s %s->%s pause %6.1f rate %s stall %s recovered %s '
          'retrans %s rto %s (timeout %s ms, ran out %s ms after '
          'RESUME)%s%s' % (
              sysm.name, src.name, dst.name, row['pause_ms'],
              row['rate_mbit_s'], row['stall_ms'],
              row['recovered_ms_after_resume'], row['retransmissions'],
              row['rto'], row['sender_rto_ms'], row['rto_ms_after_resume'],
              ' first ack %s ms after RESUME' %
              row['guest_first_ack_ms_after_resume'],
              ' GUEST CRASHED' if row['guest_crashed'] else ''),
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--migrations', type=int, default=5,
                    help='per system (default: %(default)s)')
    ap.add_argument('--rate-mbit', type=float, default=0,
                    help='pace each flow at most this fast (default: as '
                         'fast as the path takes)')
    ap.add_argument('--result', default='tcp_migration')
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix='vw-tcpmig-')
    with Lab(3, libvirt=True) as lab:
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(3)
        ovn = Ovn(lab)
        ovn.start()
        systems = setup(lab, api, ovn, held=True)
        for i in range(args.migrations):
            for s in (systems if i % 2 == 0 else systems[::-1]):
                migrate_once(lab, s, args.rate_mbit, workdir)
                if s.rows['far'][-1]['guest_crashed']:
                    s.make_guest(lab, lab.hosts[0])
                time.sleep(0.5)
        doc = {'migrations_per_system': args.migrations,
               'rate_mbit': args.rate_mbit or 'unpaced'}
        print('\n%-11s %s' % ('', 'recovered after RESUME ms p50/p90/max; '
                              'stall ms p50/max; moves with an RTO (of '
                              'them in the pause)'))
        for s in systems:
            rows = [r for r in s.rows['far'] if not r['guest_crashed']]
            rec = outage.dist([r['recovered_ms_after_resume'] for r in rows])
            stall = outage.dist([r['stall_ms'] for r in rows])
            doc[s.name] = {'recovered_ms_after_resume': rec, 'stall_ms': stall,
                           'rto_moves': sum(1 for r in rows if r['rto']),
                           # ... of which the timer ran out before RESUME,
                           # the guest paused
                           'rto_moves_in_the_pause': sum(
                               1 for r in rows if r['rto'] and
                               r['rto_ms_after_resume'] < 0),
                           'never_recovered': sum(
                               1 for r in rows
                               if r['recovered_ms_after_resume'] is None),
                           'guest_crashed': len(s.rows['far']) - len(rows),
                           'rows': s.rows['far']}
            print('%-11s %s/%s/%s  %s/%s  %d of %d (%d)' % (
                s.name, rec['p50'], rec['p90'], rec['max'], stall['p50'],
                stall['max'], doc[s.name]['rto_moves'], len(rows),
                doc[s.name]['rto_moves_in_the_pause']))
        write_result(args.result, doc)


if __name__ == '__main__':
    main()
