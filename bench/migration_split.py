"""Where each system's added outage fell, from bench_migration results:
lost before QEMU's STOP (the source side: its switch, the guest's last
moments) and after RESUME (the destination's switch-over), p50/p90/max
over the probed, non-crashed migrations (vwlab.outage.split_added).

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
        for system in ('virtualwire', 'ovn'):
            for end in ('far', 'near'):
                rows = [r for r in doc[system][end]['rows']
                        if not r['guest_crashed'] and split_added(r)]
                print('  %-11s %-4s n=%2d  added %-16s before STOP %-16s '
                      'after RESUME %s' % (
                          system, end, len(rows),
                          _f(dist([r['added_ms'] for r in rows])),
                          _f(dist([split_added(r)[0] for r in rows])),
                          _f(dist([split_added(r)[1] for r in rows]))))


if __name__ == '__main__':
    main(sys.argv[1:] or ['migration'])
