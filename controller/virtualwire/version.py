"""What this build is: one version for every command (`--version`) and
for the `virtualwire_build_info` metric, read from the installed
distribution's metadata so a package, a wheel and a checkout installed
with `pip install -e` all say the same thing as setup.py."""
import argparse
import os
import platform
import sys
from importlib import metadata

FALLBACK = '0+unknown'     # run from a tree that was never installed


def version():
    try:
        return metadata.version('virtualwire')
    except metadata.PackageNotFoundError:
        return FALLBACK


def _dist(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ''


def build_info():
    """The labels of virtualwire_build_info: ours and the parts that
    decide behaviour (the os-ken hub is read when the metric is made, so
    it says which hub this process actually runs)."""
    hub = sys.modules.get('os_ken.lib.hub')
    return {'version': version(),
            'python': platform.python_version(),
            'os_ken': _dist('os-ken'),
            'ovs_python': _dist('ovs'),
            'hub': getattr(hub, 'HUB_TYPE', None) or
            os.environ.get('OSKEN_HUB_TYPE', 'native')}


def add_argument(parser: argparse.ArgumentParser):
    parser.add_argument('--version', action='version',
                        version='%(prog)s ' + version())


def main(argv=None):
    """`python -m virtualwire.version`: the version alone, for scripts."""
    print(version())
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
