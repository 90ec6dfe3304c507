"""Compare two versions of the controller, each measured with its own
in-run baseline, runs alternated on one machine: is the newer one slower
beyond noise?

    python bench/compare_versions.py bench/results/reshape

reads DIR/{before,after}-N-KIND.json, KIND one of: scale
(bench_scale.py), latency (bench_latency.py), migration
(bench_migration.py: added outage per move, ours and OVN's in the same
run), failover (bench_failover.py: a leader killed under a stream);
prints a table per run and the medians of what both versions have,
writes DIR/summary.json. A version is run from its own checkout with
PYTHONPATH=<checkout>/controller:<checkout>/lab.
"""
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import commit                                   # noqa: E402

KINDS = ('scale', 'latency', 'migration', 'failover')


def load(folder):
    runs = {}
    for fn in sorted(os.listdir(folder)):
        m = re.fullmatch(r'(before|after)-(\d+)-(%s)\.json' % '|'.join(KINDS),
                         fn)
        if m:
            with open(os.path.join(folder, fn)) as f:
                runs.setdefault((m.group(1), int(m.group(2))), {})[
                    m.group(3)] = json.load(f)
    return runs


def _scale(s):
    return {'scale_s': s['ours_seconds'],
            'scale_ratio': s['ratio_ours_to_baseline'],
            'connect_p50_ms': s['connect_call_ms']['p50'],
            'connect_p99_ms': s['connect_call_ms']['p99']}


def _latency(lat):
    return {'tunnelled_p50_ms': lat['tunnelled']['ours_ms']['p50'],
            'tunnelled_ratio': lat['tunnelled']['ratio_p50'],
            'collapsed_p50_ms': lat['collapsed']['ours_ms']['p50'],
            'collapsed_ratio': lat['collapsed']['ratio_p50']}


def _migration(m):
    out = {}
    for end in ('far', 'near'):
        ours, ovn = m['virtualwire'][end], m['ovn'][end]
        for q in ('p50', 'max'):
            out['mig_%s_%s_ms' % (end, q)] = ours['added_ms'][q]
            out['ovn_%s_%s_ms' % (end, q)] = ovn['added_ms'][q]
    return out


def _failover(f):
    ha = f['ha_leader_kill']
    return {'failover_p50_s': ha['connect_programmed_s']['p50'],
            'failover_max_s': ha['connect_programmed_s']['max'],
            'failover_lost_max': ha['lost']['max'],
            'failover_ratio': f['ratio_connect_p50_baseline_over_ha']}


FIGURES = {'scale': _scale, 'latency': _latency, 'migration': _migration,
           'failover': _failover}


def figures(r):
    out: dict = {}
    for kind in [k for k in KINDS if k in r]:
        doc = r[kind]
        out.update(FIGURES[kind](doc))
        out.setdefault('when', doc['when'])
    return out


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'results', 'reshape')
    loaded = load(folder)
    runs = {k: figures(v) for k, v in loaded.items()}
    cols: list = []
    for f in runs.values():
        cols += [c for c in f if c != 'when' and c not in cols]
    print('%-10s %-21s' % ('run', 'when') + ''.join('%17s' % c for c in cols))
    for (version, n), f in sorted(runs.items(), key=lambda kv: kv[1]['when']):
        print('%-10s %-21s' % ('%s %d' % (version, n), f['when']) +
              ''.join('%17s' % f.get(c, '-') for c in cols))
    summary = {}
    for version in ('before', 'after'):
        fs = [f for (v, _), f in runs.items() if v == version]
        if fs:
            summary[version] = {
                c: round(statistics.median(f[c] for f in fs if c in f), 3)
                for c in cols if any(c in f for f in fs)}
            summary[version]['runs'] = len(fs)
    if len(summary) == 2:
        both = [c for c in cols if c in summary['after'] and
                c in summary['before']]
        summary['after_over_before'] = {
            c: round(summary['after'][c] / summary['before'][c], 3)
            if summary['before'][c] else None for c in both}
        print('%-32s' % 'median after / before' + ''.join(
            '%17s' % summary['after_over_before'].get(c, '-') for c in cols))
    # Derived, not measured: what it was derived from, and how.
    summary['sources'] = {'%s-%d-%s' % (v, n, kind): doc.get('commit')
                          for (v, n), docs in sorted(loaded.items())
                          for kind, doc in sorted(docs.items())}
    summary['command'] = ' '.join(['python'] + sys.argv)
    summary['commit'] = commit()          # the code that derived it
    with open(os.path.join(folder, 'summary.json'), 'w') as f:
        json.dump(summary, f, indent=1)


if __name__ == '__main__':
    main()
