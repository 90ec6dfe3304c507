"""Every installed command answers --version with setup.py's version, so
an operator can tell what a host runs; the shell tools too."""
import os
import subprocess
import sys
from importlib import metadata

import pytest

BIN = os.path.dirname(sys.executable)
COMMANDS = ['virtualwire-controller', 'virtualwire-collector', 'vwctl',
            'virtualwire-extender', 'virtualwire-intent-db', 'vw-host-agent',
            'vw-frame-hold', 'vw-host-setup', 'vw-pki', 'vwlab']


def _console_scripts():
    eps = metadata.distribution('virtualwire').entry_points
    return sorted(e.name for e in eps if e.group == 'console_scripts')


def test_every_tool_is_a_console_script():
    assert _console_scripts() == sorted(COMMANDS)


@pytest.mark.parametrize('cmd', COMMANDS)
def test_version_is_the_packages(cmd):
    p = subprocess.run([os.path.join(BIN, cmd), '--version'],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == '%s %s\n' % (cmd, metadata.version('virtualwire'))
    # Nothing the user cannot act on (eventlet's deprecation notice).
    assert p.stderr == ''


def test_the_shell_tools_still_say_what_is_wrong():
    p = subprocess.run([os.path.join(BIN, 'vw-host-setup'), '--name', 'h1'],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert 'vw-host-setup: --tunnel-ip is required' in p.stderr
