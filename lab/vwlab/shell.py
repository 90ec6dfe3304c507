"""Shell helpers and the lab's fixed addresses."""
import os
import shlex
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
HOST_SETUP = os.path.join(REPO, 'controller', 'virtualwire', 'host',
                          'vw-host-setup')
LAB_ROOT = os.environ.get('VW_LAB_ROOT', '/tmp/virtualwire-labs')
MGMT_NET, UL_NET = '198.18.0', '198.19.0'
CONTROLLER_IP = MGMT_NET + '.1'
UNDERLAY_MTU = 1600
# ovs-ctl, which Debian's openvswitch-switch service runs, starts
# ovsdb-server and ovs-vswitchd at nice -10 so that forwarding on the
# userspace datapath is not queued behind guests; lab hosts do the same.
OVS_NICE = -10


def niced(nice, cmd):
    """`cmd` (a list) run at niceness `nice`."""
    return ['nice', '-n', str(nice)] + list(cmd)


class LabError(Exception):
    pass


def sh(cmd, ns=None, check=True, env=None, timeout=60):
    """Run a command (a list, or a string for sh -c), optionally in a netns."""
    if isinstance(cmd, str):
        cmd = ['sh', '-c', cmd]
    if ns:
        cmd = ['ip', 'netns', 'exec', ns] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=timeout)
    if check and p.returncode != 0:
        text = ' '.join(shlex.quote(c) for c in cmd)
        if len(text) > 300:
            text = text[:300] + '...'
        raise LabError('%s failed (%d): %s' % (
            text, p.returncode,
            (p.stderr or p.stdout).strip()))
    return p.stdout


def read_text(path):
    try:
        with open(path, errors='replace') as f:
            return f.read()
    except OSError:
        return ''


def gone(pid):
    """Exited: no such process, or a zombie nobody has reaped yet (a lab
    tool's child of this process: it will never go by itself)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rpartition(')')[2].split()[0] == 'Z'
    except OSError:
        return True


def kill_pidfiles(paths, wait=5.0):
    """SIGTERM every process named in `paths` at once, give them `wait`
    seconds together, then SIGKILL what is left. One by one, a lab of
    seven hosts took over a minute to go."""
    pids = []
    for path in paths:
        try:
            with open(path) as f:
                pids.append(int(f.read().strip()))
        except (OSError, ValueError):
            continue
    live = []
    for pid in pids:
        try:
            os.kill(pid, 15)
            live.append(pid)
        except OSError:
            pass
    end = time.time() + wait
    while live and time.time() < end:
        live = [p for p in live if not gone(p)]
        if live:
            time.sleep(0.02)
    for pid in live:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def kill_pidfile(path, wait=5.0):
    kill_pidfiles([path], wait)


def tail(path, n):
    try:
        with open(path, errors='replace') as f:
            return ''.join(f.readlines()[-n:])
    except OSError as e:
        return '(%s)' % e


def free_port():
    import socket
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port
