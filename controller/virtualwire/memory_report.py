"""Where a daemon's memory goes: the lines that hold the most, from a
tracemalloc snapshot (`process` writes one on SIGUSR2 when tracing).

    python -m virtualwire.memory_report FILE [--top N] [--per N]
"""
import argparse
import sys
import tracemalloc


def report(path, top=25, per=0, group='lineno', frames=1):
    snap = tracemalloc.Snapshot.load(path)
    snap = snap.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
    stats = snap.statistics(group)
    total = sum(s.size for s in stats)
    lines = ['total %.1f MiB in %d blocks' % (
        total / 2**20, sum(s.count for s in stats))]
    for s in stats[:top]:
        each = ' %6d B each of %d' % (s.size // per, per) if per else ''
        lines.append('%9.1f MiB %5.1f%%%s  %s' % (
            s.size / 2**20, 100.0 * s.size / max(total, 1), each,
            s.traceback[0]))
        lines += ['%30s%s' % ('', f) for f in list(s.traceback)[1:frames]]
    return '\n'.join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('file')
    p.add_argument('--top', type=int, default=25)
    p.add_argument('--per', type=int, default=0,
                   help='also divide each line by this (e.g. wires)')
    p.add_argument('--by', choices=('lineno', 'filename', 'traceback'),
                   default='lineno')
    p.add_argument('--frames', type=int, default=1,
                   help='callers shown per line (with --by traceback)')
    a = p.parse_args(argv)
    print(report(a.file, a.top, a.per, a.by, a.frames))


if __name__ == '__main__':
    sys.exit(main())
