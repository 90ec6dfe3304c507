"""A topology file parsed in a process of its own (`topology_parsing`):
reads a pickled (text, source) on stdin, writes a pickled ('ok',
TopologyFile) or ('error', the exception) on stdout. The kernel stops it
after CPU_LIMIT seconds of CPU."""
import pickle
import resource
import sys


def main():
    from virtualwire.api.topology_parsing import CPU_LIMIT
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT, CPU_LIMIT + 1))
    from virtualwire.core import errors, topology_file
    text, source = pickle.load(sys.stdin.buffer)
    try:
        out: tuple = ('ok', topology_file.parse(text, source))
    except errors.VwError as e:
        out = ('error', e)
    pickle.dump(out, sys.stdout.buffer, protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == '__main__':
    main()
