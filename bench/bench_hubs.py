"""The os-ken hubs side by side in one run: eventlet (what the packaged
services run) and native (os-ken 4's default, on plain threads), through
the scale, failover and migration benches.

Each bench runs as it always does, once per hub per round, with
OSKEN_HUB_TYPE set for it: the controllers and the collector process it
starts inherit it. Each result records the hub its controllers reported
in their own virtualwire_build_info (bench.common), and a round whose
controllers ran another hub than asked fails: a figure cannot be of the
other hub. The order of the hubs alternates each round, so neither is
always first on a cooler machine.

    python bench/bench_hubs.py [--rounds 2] [--wires 10000] [--hosts 50]
                               [--kills 3] [--migrations 5]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS, summary, write_result                # noqa: E402

HUBS = ('eventlet', 'native')
HERE = os.path.dirname(os.path.abspath(__file__))


def run(script, args, hub, name, reuse=False):
    """Run bench `script` with `hub`; its result document (with `reuse`,
    one already written on that hub is taken as it is: its own commit is
    inside it)."""
    path = os.path.join(RESULTS, name + '.json')
    if reuse and os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
        if doc.get('controller_hubs') == [hub]:
            print('== %s: %s reused' % (hub, name), flush=True)
            return doc
    env = dict(os.environ, OSKEN_HUB_TYPE=hub)
    cmd = [sys.executable, os.path.join(HERE, script)] + args
    print('== %s: %s' % (hub, ' '.join(cmd[1:])), flush=True)
    subprocess.run(cmd, check=True, env=env)
    with open(os.path.join(RESULTS, name + '.json')) as f:
        doc = json.load(f)
    if doc.get('controller_hubs') != [hub]:
        raise SystemExit('%s ran on %s, not %s' % (
            name, doc.get('controller_hubs'), hub))
    return doc


def figures(scale, failover, migration):
    far = migration['virtualwire']['far']
    return {
        'scale_seconds': scale['ours_seconds'],
        'scale_ratio_to_ofctl_floor': scale['ratio_ours_to_baseline'],
        'connect_call_ms_p50': scale['connect_call_ms']['p50'],
        'connect_call_ms_p99': scale['connect_call_ms']['p99'],
        'failover_connect_programmed_s_p50':
            failover['ha_leader_kill']['connect_programmed_s']['p50'],
        'failover_connect_programmed_s_max':
            failover['ha_leader_kill']['connect_programmed_s']['max'],
        'failover_lost_max': failover['ha_leader_kill']['lost']['max'],
        'migration_added_ms_p50': far['added_ms']['p50'],
        'migration_added_ms_max': far['added_ms']['max'],
        'migration_controller_ms_after_frame_p50':
            far['controller_ms_after_frame']['p50'],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--wires', type=int, default=10000)
    ap.add_argument('--hosts', type=int, default=50)
    ap.add_argument('--kills', type=int, default=3)
    ap.add_argument('--migrations', type=int, default=5)
    ap.add_argument('--reuse', action='store_true',
                    help='take results already written on the right hub '
                         '(an interrupted run goes on)')
    a = ap.parse_args()
    per_hub = {h: [] for h in HUBS}
    for r in range(1, a.rounds + 1):
        for hub in HUBS if r % 2 else tuple(reversed(HUBS)):
            tag = 'hubs-%s-r%d' % (hub, r)
            scale = run('bench_scale.py', [
                '--hosts', str(a.hosts), '--wires', str(a.wires),
                '--out', tag + '-scale'], hub, tag + '-scale', a.reuse)
            failover = run('bench_failover.py', [
                '--kills', str(a.kills), '--raft-kills', '0',
                '--result', tag + '-failover'], hub, tag + '-failover',
                           a.reuse)
            migration = run('bench_migration.py', [
                '--migrations', str(a.migrations),
                '--result', tag + '-migration'], hub, tag + '-migration',
                            a.reuse)
            per_hub[hub].append(figures(scale, failover, migration))
    out = {}
    for hub, rows in per_hub.items():
        out[hub] = {k: summary([row[k] for row in rows], digits=3)
                    for k in rows[0]}
    # native over eventlet, of the medians: below 1, native is faster.
    out['ratio_native_to_eventlet_p50'] = {
        k: round(out['native'][k]['p50'] / out['eventlet'][k]['p50'], 2)
        if out['eventlet'][k]['p50'] else None for k in out['native']}
    out['rounds'] = per_hub
    print(json.dumps({k: v for k, v in out.items() if k != 'rounds'},
                     indent=2))
    write_result('hubs', out)


if __name__ == '__main__':
    main()
