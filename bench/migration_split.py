"""Where each system's added outage fell, from bench_migration results:
lost before QEMU's STOP (the source side: its switch, the guest's last
moments) and after RESUME (the destination's switch-over), p50/p90/max
over the probed, non-crashed migrations (vwlab.outage.split_added).

The part before STOP is then split by the captures on the source's taps:
`network` is STOP minus the last datagram the switch handed into the
guest's tap (the switch stopped delivering that early: the network's), and
the rest of the probe's hole before STOP is the source QEMU's (datagrams
handed into its tap and never read by the guest before it stopped).

    python bench/migration_split.py migration [migration-realtime ...]
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'lab'))
from vwlab.outage import dist, split_added                    # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'results')


def _f(d):
    return '%s/%s/%s' % (d['p50'], d['p90'], d['max']) if d['n'] else '-'


def main(names):
    for name in names:
        with open(os.path.join(RESULTS, name + '.json')) as f:
            doc = json.load(f)
        print('%s (%s)' % (name, 'realtime' if doc.get('realtime')
                           else 'as run by users'))
        for system in [k for k in ('virtualwire', 'held', 'ovn') if k in doc]:
            for end in ('far', 'near'):
                rows = [r for r in doc[system][end]['rows']
                        if not r['guest_crashed'] and split_added(r)]
                before = [split_added(r)[0] for r in rows]
                net = [min(b, r['capture'].get('last_before_stop_ms') or 0.0)
                       for b, r in zip(before, rows)]
                print('  %-11s %-4s n=%2d  added %-16s before STOP %-16s '
                      '(network %-16s QEMU %-16s) after RESUME %s' % (
                          system, end, len(rows),
                          _f(dist([r['added_ms'] for r in rows])),
                          _f(dist(before)), _f(dist(net)),
                          _f(dist([round(b - n, 2)
                                   for b, n in zip(before, net)])),
                          _f(dist([split_added(r)[1] for r in rows]))))


if __name__ == '__main__':
    main(sys.argv[1:] or ['migration'])
