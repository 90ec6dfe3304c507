"""What the guest's taps say at a live migration's two edges, measured on
real OVS, libvirt and QEMU: where each datagram lost around STOP died, and
how soon after RESUME the destination's QEMU read what was waiting for it.

A lab guest on h1 wired to a VM on h3 moves h1 <-> h2 --moves times under a
1 kHz echo stream (64-byte datagrams). Per move:

- STOP. Captures on both hosts say which lost datagrams the switch handed
  to the source tap (and to the destination's); the tap's kernel counter
  (frames QEMU read: `forensics.tap_reads`) gives how many it handed and
  QEMU never read (`unread_at_stop`, the last ones handed). A lost
  datagram whose rank from the last handed is at most `unread_at_stop`
  was never read: the network's to deliver (held frames do). One ranked
  just above it was *read* by the source QEMU and never reached the
  guest: the guest's own NIC counter (eth0 rx) did not count it either
  (`guest_nic_missed`: reads on both taps minus the NIC's count, beside
  the same figure for the datagrams lost).
- RESUME. The destination tap's first read after QEMU's RESUME event
  (`first_read_ms_after_resume`), with the count already waiting in the
  tap (held frames delivered before RESUME wait there).

    python bench/probe_stop_edges.py [--moves 10] [--hold on|off]
        [--activate-at-stop on|off] [--result NAME]
"""
import argparse
import os
import struct
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, '..', 'lab'),
                os.path.join(HERE, '..', 'controller'),
                os.path.join(HERE, '..', 'tests')]

from common import write_result                                # noqa: E402
from vwlab.guest_drops import guest_counters              # noqa: E402
from forensics.tap_reads import TapReads                       # noqa: E402
from vwlab import Lab                                          # noqa: E402
from vwlab.capture import HostCaptures, guest_taps             # noqa: E402
from vwlab.qemu_events import EventWatch, stop_resume_windows  # noqa: E402
from vwtest import Api, wait_until                             # noqa: E402
from vwtest.held_move import held_record                        # noqa: E402
from vwtest.migration import probe_report                      # noqa: E402

GUEST_IP, FAR_IP, PORT = '10.87.0.1', '10.87.0.2', 7000


def seq_of(d):
    return struct.unpack('!Q', d.payload[:8])[0]


def eth0_rx(c):
    return sum(v['rx_packets'] for k, v in c['dev'].items() if k != 'lo')


def one_move(lab, api, g, far, nic, src, dst, capdir, hold):
    mac = g.nics[nic]['mac']
    [(_h, stap)] = guest_taps(src, g.name, mac)
    since = time.time()
    caps = HostCaptures([src, dst], capdir, bpf='').__enter__()
    try:
        # The destination's tap comes during the copy: every new one is
        # followed from its first count.
        with TapReads(src, stap) as sreads, \
                TapReads(dst, 'vnet', prefix=True) as dall:
            before = guest_counters(far, GUEST_IP)
            with EventWatch([src, dst]) as watch:
                stream = far.tool_bg('udp-echo', '--dst', GUEST_IP,
                                     '--rate', 1000, '--seconds', 60,
                                     '--size', 64, realtime=True)
                time.sleep(1)
                lab.migrate(g, src, dst)
                time.sleep(1.5)
                stream.send_signal(2)
                r = probe_report(stream)
                time.sleep(0.3)
                after = guest_counters(far, GUEST_IP)
    finally:
        caps.stop()
    [(_h, dtap)] = guest_taps(dst, g.name, mac)
    dreads = dall.of(dtap)
    [(stop, _s, resume, _d)] = stop_resume_windows(watch.events, g.name)
    grams = [d for d in caps.datagrams() if d.dport == PORT and
             len(d.payload) >= 8]
    handed = sorted(f.time for f in caps.frames_on({(src.name, stap)})
                    if f.outgoing and f.time >= sreads.changes[0][0])
    at_src = {seq_of(d): d.time for d in grams if d.host == src.name and
              d.iface == stap and d.outgoing}
    on_dst = {seq_of(d) for d in grams if d.host == dst.name and
              d.iface == dtap and d.outgoing}
    src_reads = sreads.changes[-1][1] - sreads.changes[0][1]
    dst_reads = dreads.changes[-1][1]
    unread = len(handed) - src_reads
    lost = [q for q, _t in r['lost_sent_at']]
    rank = {q: sum(1 for t in handed if t >= at_src[q]) for q in lost
            if q in at_src}
    # Its first reading is 0 (a new tap): reads counted by RESUME are the
    # one frame a paused QEMU takes and keeps.
    first = dreads.first_after(resume)
    last = sreads.changes[-1] if len(sreads.changes) > 1 else None
    m = held_record(api, g.name, since) if hold else None
    return {
        'held': m and m['held'].get(nic),
        'source_count_at_stop': sreads.count_at(stop) - sreads.changes[0][1],
        'source_reads_after_stop': src_reads - (
            sreads.count_at(stop) - sreads.changes[0][1]),
        'pause_ms': round((resume - stop) * 1e3, 1),
        'sent': r['sent'], 'lost': r['lost'],
        'lost_on_the_way_in': r['lost_on_the_way_in'],
        'duplicates': r['duplicates'], 'reordered': r['reordered'],
        'lost_ms_from_stop': [round((t - stop) * 1e3, 1)
                              for _q, t in r['lost_sent_at']][:20],
        # STOP
        'source_last_read_ms_from_stop': (round((last[0] - stop) * 1e3, 2)
                                          if last else None),
        'handed_to_source_tap': len(handed), 'source_reads': src_reads,
        'unread_at_stop': unread,
        'lost_rank_from_last_handed': [rank.get(q) for q in lost],
        # Ranked over every datagram lost, either way: one lost on the
        # way back (its echo) reached the guest, so its rank says only
        # that QEMU read it; read these beside lost_on_the_way_in.
        'lost_read_by_source_qemu': sum(
            1 for q in lost if q in rank and rank[q] > unread),
        'lost_never_read': sum(1 for q in lost if q in rank and
                               rank[q] <= unread),
        'lost_not_at_source_tap': sum(1 for q in lost if q not in rank),
        'lost_delivered_to_destination_tap': sum(1 for q in lost
                                                 if q in on_dst),
        'guest_nic_missed': src_reads + dst_reads - (
            eth0_rx(after) - eth0_rx(before)),
        # RESUME
        'destination_read_before_resume': dreads.count_at(resume),
        'first_read_ms_after_resume': (round((first[0] - resume) * 1e3, 2)
                                       if first else None),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--moves', type=int, default=10)
    ap.add_argument('--hold', choices=('on', 'off'), default='on')
    ap.add_argument('--activate-at-stop', choices=('on', 'off'),
                    default='on')
    ap.add_argument('--result', default='stop-edges-run1')
    args = ap.parse_args()
    rows = []
    with Lab(3, libvirt=True) as lab:
        lab.start_controller(extra=['--hold', args.hold, '--activate-at-stop',
                                    args.activate_at_stop])
        api = Api(lab)
        wait_until(api.synced, 60, what='controller and hosts')
        for h in lab.hosts:
            h.libvirt.install_hook(hold=args.hold == 'on')
        h1, h2, h3 = lab.hosts
        nic = str(uuid.uuid4())
        g = h1.define_guest('se', [(nic, GUEST_IP + '/24')])
        far = h3.add_vm('sef', [('sef-nic', FAR_IP + '/24')])
        api.wait_state(api.connect(nic, 'sef-nic')['id'], 'tunnelled')
        wait_until(lambda: far.ping(GUEST_IP, count=1)[1] == 1, 20,
                   what='the guest answers')
        at = [h1, h2]
        for i in range(args.moves):
            with tempfile.TemporaryDirectory(prefix='vw-edges-') as d:
                row = dict(one_move(lab, api, g, far, nic, at[i % 2],
                                    at[(i + 1) % 2], d, args.hold == 'on'),
                           move=i + 1)
            rows.append(row)
            print(row, flush=True)
    lost = [x for x in rows if x['lost']]
    write_result(args.result, {
        'moves': rows, 'hold': args.hold,
        'activate_at_stop': args.activate_at_stop,
        'lost': sum(x['lost'] for x in rows),
        'lost_read_by_source_qemu': sum(x['lost_read_by_source_qemu']
                                        for x in rows),
        'lost_never_read': sum(x['lost_never_read'] for x in rows),
        'lost_not_at_source_tap': sum(x['lost_not_at_source_tap']
                                      for x in rows),
        'moves_with_loss': len(lost),
        'duplicates': sum(x['duplicates'] for x in rows),
        'first_read_ms_after_resume': sorted(
            x['first_read_ms_after_resume'] for x in rows
            if x['first_read_ms_after_resume'] is not None),
    })


if __name__ == '__main__':
    main()
