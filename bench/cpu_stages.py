"""Where a bench's CPU goes, stage by stage: every thread's CPU time over a
window, grouped by network namespace and command ("xa boringtun-cli",
"h1 ovs-vswitchd"), and the machine's own totals from /proc/stat.

On one machine every stage of a path shares its cores, so a path's rate
is set by the sum of its stages' costs; on separate machines by its
busiest stage alone. `capacity()` gives, from one window, what each
stage could carry given a core of its own: the rate measured divided by
the share of a core its busiest thread used. That is a projection from
measured costs (it assumes a stage's cost per bit does not change with
its rate, and leaves out the kernel's softirq time, which /proc/stat
counts apart: reported as `machine`), not a measurement of separate
machines.

    with CpuWindow() as w:
        run_the_load()
    w.report()       # {'stages': {...}, 'machine': {...}, 'seconds': s}
"""
import os
import time
from typing import Dict, Tuple

TICK = os.sysconf('SC_CLK_TCK')
# A stage below this share of one core over the window is left out.
MIN_SHARE = 0.01


def _namespaces(run='/run/netns') -> Dict[int, str]:
    """{netns inode: name} of the named namespaces; a lab's names lose
    their lab prefix ('vw584d4f-h2' -> 'h2')."""
    out = {}
    try:
        names = os.listdir(run)
    except OSError:
        return out
    for name in names:
        try:
            out[os.stat(os.path.join(run, name)).st_ino] = \
                name.split('-', 1)[1] if name.startswith('vw') and \
                '-' in name else name
        except OSError:
            continue
    return out


def _ticks(stat_line: str) -> int:
    """utime + stime of one /proc/.../stat line (after the comm)."""
    f = stat_line.rsplit(')', 1)[1].split()
    return int(f[11]) + int(f[12])


def threads(proc='/proc') -> Dict[Tuple[int, int], Tuple[int, str, int]]:
    """{(pid, tid): (netns inode, command, CPU ticks)} of every thread."""
    out = {}
    for pid in os.listdir(proc):
        if not pid.isdigit():
            continue
        try:
            ns = os.stat('%s/%s/ns/net' % (proc, pid)).st_ino
            with open('%s/%s/comm' % (proc, pid)) as f:
                comm = f.read().strip()
            tids = os.listdir('%s/%s/task' % (proc, pid))
        except OSError:
            continue
        for tid in tids:
            try:
                with open('%s/%s/task/%s/stat' % (proc, pid, tid)) as f:
                    out[(int(pid), int(tid))] = (ns, comm, _ticks(f.read()))
            except (OSError, IndexError, ValueError):
                continue
    return out


def machine(path='/proc/stat') -> Dict[str, int]:
    """The machine's CPU ticks by kind, all cores together."""
    with open(path) as f:
        f0 = f.readline().split()
    keys = ('user', 'nice', 'system', 'idle', 'iowait', 'irq', 'softirq',
            'steal')
    return {k: int(v) for k, v in zip(keys, f0[1:])}


class CpuWindow:
    """Threads' and the machine's CPU over a `with` block."""

    def __init__(self):
        self.t0 = self.t1 = 0.0
        self.before: dict = {}
        self.after: dict = {}
        self.m0: Dict[str, int] = {}
        self.m1: Dict[str, int] = {}
        self.names: Dict[int, str] = {}

    def __enter__(self):
        self.names = _namespaces()
        self.t0, self.before, self.m0 = time.time(), threads(), machine()
        return self

    def __exit__(self, *exc):
        self.t1, self.after, self.m1 = time.time(), threads(), machine()

    def report(self) -> dict:
        seconds = self.t1 - self.t0
        stages: Dict[str, dict] = {}
        for key, (ns, comm, ticks) in self.after.items():
            used = (ticks - self.before.get(key, (ns, comm, 0))[2]) / TICK
            if used <= 0:
                continue
            name = '%s %s' % (self.names.get(ns, 'root'), comm)
            s = stages.setdefault(name, {'cpu_s': 0.0, 'busiest_thread_s':
                                         0.0, 'threads': 0})
            s['cpu_s'] += used
            s['busiest_thread_s'] = max(s['busiest_thread_s'], used)
            s['threads'] += 1
        kept = {}
        for name, s in sorted(stages.items(), key=lambda kv: -kv[1]['cpu_s']):
            if s['cpu_s'] / seconds < MIN_SHARE:
                continue
            kept[name] = {'cores': round(s['cpu_s'] / seconds, 3),
                          'busiest_thread_cores': round(
                              s['busiest_thread_s'] / seconds, 3),
                          'threads': s['threads']}
        total = sum(self.m1.values()) - sum(self.m0.values())
        share = {k: round((self.m1[k] - self.m0[k]) / total, 3)
                 for k in self.m1} if total else {}
        return {'seconds': round(seconds, 2), 'stages': kept,
                'machine': share, 'cores': os.cpu_count()}


def capacity(report: dict, rate: float, stages) -> Dict[str, float]:
    """{stage: the rate it could carry with a core of its own}: `rate`
    over its busiest thread's share of a core, for the named stages
    present in `report` (e.g. ('h1 ovs-vswitchd', 'xa boringtun-cli'))."""
    out = {}
    for name in stages:
        s = report['stages'].get(name)
        if s and s['busiest_thread_cores'] > 0:
            out[name] = round(rate / s['busiest_thread_cores'], 1)
    return out
