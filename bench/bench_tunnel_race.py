"""The OVS 3.1 userspace tunnel race at a tap's link event, and what a host
setting can do about it.

A wire h1 <-> h3 carries a 1 kHz sequenced UDP echo (h3 sends, clock-paced,
SCHED_FIFO). On h1 a tap is created, plugged and brought up, then removed,
--taps times per variant (as libvirt plugs a migrating guest's destination
tap). Variants, in this order on a fresh lab each round (the static route
cannot be taken back without deleting the kernel's route with it):

  baseline        link up, then add-port (what libvirt does)
  add-port first  add-port, then link up
  static route    `ovs-appctl ovs/route/add <underlay cidr> br-phy` on every
                  host first (a user route survives OVS's route-table flush
                  on link events; system routes do not)
  no system routes  in a second lab, each round: every ovs-vswitchd started
                  with --disable-system-route, the tunnels routed by that
                  user route alone (a flush then has no route through
                  br-phy to delete, so it never drops the tunnel ports'
                  addresses with it); taps plugged as in baseline

Per variant: datagrams lost and in how many holes, and how many taps there
were (the sender's report proves it sent throughout: no send gap over 2 ms).

    python bench/bench_tunnel_race.py [--rounds 3] [--taps 20]
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
from vwlab.link_events import cycle_taps                       # noqa: E402

UNDERLAY = '198.19.0.0/24'


VARIANTS = (('baseline', False, False), ('add-port first', True, False),
            ('static route', False, True))
NO_SYSTEM_ROUTES = (('no system routes', False, False),)


def one_round(taps, variants=VARIANTS, system_routes=True):
    out = {}
    with Lab(3, system_routes=system_routes) as lab:
        h1 = lab.hosts[0]
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(3)
        _a, b, srv = echo_wire(lab, api, 'r', '10.77.0')
        try:
            for name, plug_first, route in variants:
                if route:
                    for h in lab.hosts:
                        h.appctl('ovs/route/add', UNDERLAY, 'br-phy')
                st = b.tool_bg('udp-echo', '--dst', '10.77.0.1', '--rate',
                               1000, '--seconds', 300, realtime=True)
                time.sleep(0.5)
                cycle_taps(h1, taps, name[:2], plug_first)
                time.sleep(0.5)
                st.send_signal(signal.SIGINT)
                r = json.loads(st.communicate(timeout=60)[0].splitlines()[-1])
                out[name] = {'taps': taps, 'lost': r['lost'],
                             'holes': len(r['lost_runs']),
                             # Each hole: its size, and when in the
                             # variant it began (s from the stream's start:
                             # taps begin at 0.5 s, one every 0.5 s).
                             'hole_sizes': [x['packets']
                                            for x in r['lost_runs']],
                             'hole_at_s': [round(x['from'] -
                                                 r['sent_times'][0], 3)
                                           for x in r['lost_runs']],
                             'sent': r['sent'],
                             'max_send_gap_ms': round(max(
                                 [g for _a, g in r['send_gaps']] or [0]) *
                                 1000, 1)}
                print('  %-15s %2d taps: lost %4d in %2d holes %s (sent %d, '
                      'max send gap %.1f ms)' % (
                          name, taps, r['lost'], len(r['lost_runs']),
                          out[name]['hole_sizes'], r['sent'],
                          out[name]['max_send_gap_ms']),
                      flush=True)
        finally:
            srv.kill()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--taps', type=int, default=20)
    args = ap.parse_args()
    rounds = []
    for i in range(args.rounds):
        print('round %d' % (i + 1), flush=True)
        r = one_round(args.taps)
        r.update(one_round(args.taps, NO_SYSTEM_ROUTES, system_routes=False))
        rounds.append(r)
    total = {k: {m: sum(r[k][m] for r in rounds)
                 for m in ('taps', 'lost', 'holes')} for k in rounds[0]}
    for k, v in total.items():
        print('%-15s %3d taps: %4d lost in %3d holes' % (
            k, v['taps'], v['lost'], v['holes']))
    write_result('tunnel_race', {'rounds': rounds, 'total': total,
                                 'underlay': UNDERLAY})


if __name__ == '__main__':
    main()
