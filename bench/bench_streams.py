"""Loss with many parallel streams over tunnelled wires, GRE vs Geneve,
with the kernel's default packet-socket buffers (208 KiB) and with
ovs-config/99-virtualwire-netdev.conf's (4 MiB), side by side.

Per case a fresh 2-host lab (netdev OVS, the carrier every host offers:
vw-host-setup --carrier), --streams wires h1 -> h2, one sequenced UDP
stream each at --rate datagrams/s for --seconds, all at once. Where a
datagram was lost is read from three counters: the wire's own (entered at
h1's end, delivered at h2's: the collector), the kernel's drops on
ovs-vswitchd's packet sockets (a switch not scheduled in time: its
socket overran), and the receivers' sequence numbers.

    python bench/bench_streams.py [--streams 20] [--rate 1000] [--seconds 8]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Api, write_result                     # noqa: E402

from vwlab import Lab                                    # noqa: E402
from vwlab.overruns import Overruns                      # noqa: E402

DEFAULT_BUFFER = 212992          # the kernel's rmem/wmem default


def run_case(carrier, buffer, args):
    with Lab(2, carrier=carrier, packet_socket_buffer=buffer) as lab:
        h1, h2 = lab.hosts
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(2)
        pairs = []
        for i in range(args.streams):
            a = h1.add_vm('s%da' % i, [('s%da' % i, '10.%d.0.1/24' % (60 + i))])
            b = h2.add_vm('s%db' % i, [('s%db' % i, '10.%d.0.2/24' % (60 + i))])
            wid = api.call('POST', '/v1/wires', {'a': 's%da' % i,
                                                 'b': 's%db' % i})['id']
            pairs.append((a, b, wid, '10.%d.0.2' % (60 + i)))
        for a, b, wid, ip in pairs:
            deadline = time.time() + 30
            while a.ping(ip, count=1)[1] != 1:
                if time.time() > deadline:
                    raise RuntimeError('wire %d never answered' % wid)
        time.sleep(3)          # counters read once more before the streams
        before = {wid: api.call('GET', '/v1/wires/%d/stats' % wid)['a_to_b']
                  for _, _, wid, _ in pairs}
        with Overruns(lab.hosts) as over:
            recv = [b.tool_bg('udp-recv', '--port', 6500, '--seconds',
                              args.seconds + 3) for _, b, _, _ in pairs]
            time.sleep(1.5)
            t0 = time.time()
            send = [a.tool_bg('udp-send', '--dst', ip, '--port', 6500,
                              '--rate', args.rate, '--seconds', args.seconds,
                              '--size', args.size) for a, _, _, ip in pairs]
            sent = [_last_json(p) for p in send]
            t_sent = time.time() - t0
            got = [_last_json(p) for p in recv]
        time.sleep(4)          # every switch read again
        rows = []
        for (a, b, wid, ip), s, g in zip(pairs, sent, got):
            st = api.call('GET', '/v1/wires/%d/stats' % wid)['a_to_b']
            entered = st['entered_packets'] - before[wid]['entered_packets']
            delivered = st['delivered_packets'] - \
                before[wid]['delivered_packets']
            rows.append({'wire': wid, 'sent': s['sent'],
                         'received': g['received'],
                         'entered': entered, 'delivered': delivered})
        total = sum(r['sent'] for r in rows)
        lost = total - sum(r['received'] for r in rows)
        per = sorted(100.0 * (r['sent'] - r['received']) / r['sent']
                     for r in rows)
        doc = {
            'carrier': carrier, 'socket_buffer': buffer,
            'sent': total, 'received': total - lost,
            'lost_pct': round(100.0 * lost / total, 3),
            'per_stream_lost_pct': {'min': round(per[0], 2),
                                    'median': round(per[len(per) // 2], 2),
                                    'max': round(per[-1], 2)},
            # Where: before entering the switch (the sender's side), inside
            # the network between the two switches, after delivery.
            'lost_before_entering': sum(r['sent'] - r['entered']
                                        for r in rows),
            'lost_in_network': sum(r['entered'] - r['delivered']
                                   for r in rows),
            'lost_after_delivery': sum(r['delivered'] - r['received']
                                       for r in rows),
            'socket_overruns': {'%s/%s' % k: n
                                for k, n in over.counted().items()},
            # Proof the senders sent during the window judged.
            'senders_seconds': round(t_sent, 2),
            'senders_sent_all': all(r['sent'] == args.rate * args.seconds
                                    for r in rows),
        }
        print('%-7s %7d B buffers: %d sent, lost %.3f%% (before entering '
              '%d, network %d, after delivery %d), overruns %s' % (
                  carrier, buffer, total, doc['lost_pct'],
                  doc['lost_before_entering'], doc['lost_in_network'],
                  doc['lost_after_delivery'], doc['socket_overruns']),
              flush=True)
        return doc


def _last_json(p):
    import json
    out, err = p.communicate(timeout=120)
    lines = [x for x in out.splitlines() if x.strip()]
    if p.returncode != 0 or not lines:
        raise RuntimeError('traffic tool failed: %s' % err.strip()[-500:])
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--streams', type=int, default=20)
    ap.add_argument('--rate', type=int, default=1000)
    ap.add_argument('--seconds', type=int, default=8)
    ap.add_argument('--size', type=int, default=64)
    ap.add_argument('--out', default='streams')
    args = ap.parse_args()
    cases = []
    for buffer in (DEFAULT_BUFFER, 4 << 20):
        for carrier in ('gre', 'geneve'):
            cases.append(run_case(carrier, buffer, args))
    print('\n%-8s %10s %10s %12s %12s' % ('carrier', 'buffer', 'lost %',
                                          'in network', 'overruns'))
    for c in cases:
        print('%-8s %10d %10.3f %12d %12d' % (
            c['carrier'], c['socket_buffer'], c['lost_pct'],
            c['lost_in_network'], sum(c['socket_overruns'].values())))
    from vwlab.host import raise_packet_socket_buffers
    raise_packet_socket_buffers(4 << 20)      # the lab's setting again
    write_result(args.out, {'streams': args.streams, 'rate': args.rate,
                            'seconds': args.seconds, 'size': args.size,
                            'cases': cases})


if __name__ == '__main__':
    main()
