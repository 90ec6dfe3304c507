"""Compare scale and latency results of two versions of the controller,
each measured with its own in-run baseline (ovs-ofctl by hand), runs
alternated on one machine: is the newer one slower beyond noise?

    python bench/compare_versions.py bench/results/reshape

reads DIR/{before,after}-N-{scale,latency}.json, prints a table per run and
the medians, writes DIR/summary.json.
"""
import json
import os
import re
import statistics
import sys


def load(folder):
    runs = {}
    for fn in sorted(os.listdir(folder)):
        m = re.fullmatch(r'(before|after)-(\d+)-(scale|latency)\.json', fn)
        if m:
            with open(os.path.join(folder, fn)) as f:
                runs.setdefault((m.group(1), int(m.group(2))), {})[
                    m.group(3)] = json.load(f)
    return runs


def figures(r):
    s, lat = r['scale'], r['latency']
    return {
        'scale_s': s['ours_seconds'],
        'scale_ratio': s['ratio_ours_to_baseline'],
        'connect_p50_ms': s['connect_call_ms']['p50'],
        'connect_p99_ms': s['connect_call_ms']['p99'],
        'tunnelled_p50_ms': lat['tunnelled']['ours_ms']['p50'],
        'tunnelled_ratio': lat['tunnelled']['ratio_p50'],
        'collapsed_p50_ms': lat['collapsed']['ours_ms']['p50'],
        'collapsed_ratio': lat['collapsed']['ratio_p50'],
        'when': s['when'],
    }


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'results', 'reshape')
    runs = {k: figures(v) for k, v in load(folder).items()
            if {'scale', 'latency'} <= set(v)}
    cols = ['scale_s', 'scale_ratio', 'connect_p50_ms', 'connect_p99_ms',
            'tunnelled_p50_ms', 'tunnelled_ratio', 'collapsed_p50_ms',
            'collapsed_ratio']
    print('%-10s %-21s' % ('run', 'when') + ''.join('%17s' % c for c in cols))
    for (version, n), f in sorted(runs.items(), key=lambda kv: kv[1]['when']):
        print('%-10s %-21s' % ('%s %d' % (version, n), f['when']) +
              ''.join('%17s' % f[c] for c in cols))
    summary = {}
    for version in ('before', 'after'):
        fs = [f for (v, _), f in runs.items() if v == version]
        if fs:
            summary[version] = {c: round(statistics.median(f[c] for f in fs), 3)
                                for c in cols}
            summary[version]['runs'] = len(fs)
    if len(summary) == 2:
        summary['after_over_before'] = {
            c: round(summary['after'][c] / summary['before'][c], 3)
            for c in cols}
        print('%-32s' % 'median after / before' + ''.join(
            '%17s' % summary['after_over_before'][c] for c in cols))
    with open(os.path.join(folder, 'summary.json'), 'w') as f:
        json.dump(summary, f, indent=1)


if __name__ == '__main__':
    main()
