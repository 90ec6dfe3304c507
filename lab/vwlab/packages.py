"""The Debian packages as an operator gets them: built from the checkout
with Debian's own tools (dpkg-buildpackage, debhelper, dh-virtualenv),
checked by lintian, installed into a fresh Debian 12 root made by
mmdebstrap from the archive, and booted under real systemd with
`systemd-nspawn --boot` inside a lab namespace, so the services see the
lab's management network as a controller machine sees its own.

Booting here needs two things a systemd host would not (measured; the
brief's first try printed nothing for 30 s): PID 1 of this machine is not
systemd and there is no system bus, so nspawn must neither register with
machined nor ask for a scope (`--register=no --keep-unit`), else it exits
with "Failed to open system bus"; and /run is not a tmpfs, where nspawn
refuses to clean its propagation directory, so one is mounted on
/run/systemd/nspawn. The container then boots silently (its console is
not a terminal): readiness is asked of its systemd
(`systemctl is-system-running --wait`), not read off the console.
"""
import concurrent.futures
import glob
import os
import shutil
import signal
import subprocess
import time

from vwlab.shell import REPO, LabError

SUITE = 'bookworm'
# What a controller machine or a hypervisor has besides our packages.
BASE = ['systemd', 'systemd-sysv', 'dbus', 'openvswitch-common',
        'openvswitch-switch', 'python3', 'openssl', 'iproute2',
        'wireguard-go', 'wireguard-tools', 'ca-certificates',
        # virtualwire-python's libvirt-python (vw-host-agent) links it.
        'libvirt0',
        # virtualwire-host's OVSDB guard (vw-host-setup --manager-from).
        'nftables']


def _run(cmd, log=None, timeout=900, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=timeout, **kw)
    if log:
        with open(log, 'a') as f:
            f.write('$ %s\n%s%s' % (' '.join(cmd), p.stdout, p.stderr))
    if p.returncode != 0:
        raise LabError('%s failed (%d):\n%s' % (
            ' '.join(cmd[:3]), p.returncode,
            (p.stdout + p.stderr)[-3000:]))
    return p.stdout


def source_tree(dest):
    """The checkout as a clean clone would have it (tracked files and new
    ones not ignored): no .venv, no caches."""
    files = subprocess.run(
        ['git', 'ls-files', '-co', '--exclude-standard', '-z'], cwd=REPO,
        capture_output=True, check=True).stdout.split(b'\0')
    for f in filter(None, files):
        src = os.path.join(REPO, f.decode())
        if not os.path.lexists(src):
            continue                    # deleted, not yet committed
        dst = os.path.join(dest, f.decode())
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)
    return dest


def build(out):
    """dpkg-buildpackage -b in out/: (the .changes path, [.deb paths])."""
    shutil.rmtree(out, ignore_errors=True)
    tree = source_tree(os.path.join(out, 'virtualwire'))
    _run(['dpkg-buildpackage', '-us', '-uc', '-b'], cwd=tree,
         log=os.path.join(out, 'build.log'))
    changes = glob.glob(os.path.join(out, '*.changes'))
    debs = sorted(glob.glob(os.path.join(out, '*.deb')))
    if len(changes) != 1 or not debs:
        raise LabError('dpkg-buildpackage made %s' % os.listdir(out))
    return changes[0], debs


def lintian(changes):
    """[(severity, package, tag, detail)] lintian reports."""
    p = subprocess.run(['lintian', '--no-tag-display-limit', changes],
                       capture_output=True, text=True, timeout=600)
    out = []
    for line in p.stdout.splitlines():
        sev, _, rest = line.partition(': ')
        if sev in ('E', 'W', 'I') and ': ' in rest:
            pkg, _, tag = rest.partition(': ')
            name, _, detail = tag.partition(' ')
            out.append((sev, pkg, name, detail))
    return out


def make_root(root, debs, log, install=True):
    """A fresh Debian root with BASE, and the packages in its /srv/debs
    (not /tmp: the booted root mounts a tmpfs there). install=True:
    installed by apt, as an operator installs them (their maintainer
    scripts run); False: left for the operator's steps
    (docs/install.rst) to install. No debs: an empty /srv/debs, for
    `copy_debs` once they are built (the root is made meanwhile)."""
    shutil.rmtree(root, ignore_errors=True)
    names = [os.path.basename(d) for d in debs]
    hooks = ['--customize-hook=mkdir -p "$1/srv/debs"']
    if names:
        hooks += ['--customize-hook=copy-in %s /srv/debs' % ' '.join(names)]
    if install and names:
        hooks += ['--customize-hook=chroot "$1" apt-get install -y -q '
                  + ' '.join('/srv/debs/' + n for n in names)]
    _run(['mmdebstrap', '--variant=apt', '--include=' + ','.join(BASE)] +
         hooks + [SUITE, root], cwd=os.path.dirname(debs[0]) if debs
         else None, log=log, timeout=1200)
    return root


def copy_debs(root, debs):
    """The built packages into a root `make_root` made without them."""
    for d in debs:
        shutil.copy(d, os.path.join(root, 'srv', 'debs'))


def prepare(work, parallel=True):
    """What a machine needs before it boots, in `work`: a fresh root
    (work/root) with the packages built from this checkout in its
    /srv/debs, for the operator's steps to install. (root, .changes
    path, [.deb paths]). parallel: the root downloads and unpacks while
    the packages build (about a minute each, apart); else one after the
    other, on one core (`python -m vwlab.packages prepare`, beside a
    single-threaded test run)."""
    args = (os.path.join(work, 'root'), [], os.path.join(work, 'root.log'))
    if parallel:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            made = pool.submit(make_root, *args, install=False)
            changes, debs = build(os.path.join(work, 'build'))
            root = made.result()
    else:
        root = make_root(*args, install=False)
        changes, debs = build(os.path.join(work, 'build'))
    copy_debs(root, debs)
    return root, changes, debs


def main(argv=None):
    """`python -m vwlab.packages prepare WORK`: `prepare`, one step after
    the other; prints {"root", "changes", "debs"} (JSON)."""
    import argparse
    import json
    a = argparse.ArgumentParser(prog='python -m vwlab.packages')
    a.add_argument('verb', choices=['prepare'])
    a.add_argument('work')
    args = a.parse_args(argv)
    root, changes, debs = prepare(args.work, parallel=False)
    print(json.dumps({'root': root, 'changes': changes, 'debs': debs}))


def doc_blocks(path):
    """[(where, script)] of an .rst file's ``.. code-block:: sh`` blocks,
    in order; `where` is the block's first line ('# on the controller
    machine' -> 'controller', '# on a hypervisor' -> 'hypervisor', '# on
    an extender' -> 'extender')."""
    out, lines, i = [], open(path).read().splitlines(), 0
    while i < len(lines):
        if lines[i].strip() != '.. code-block:: sh':
            i += 1
            continue
        i += 1
        body = []
        while i < len(lines) and (not lines[i].strip() or
                                  lines[i].startswith('   ')):
            body.append(lines[i][3:])
            i += 1
        text = '\n'.join(body).strip('\n') + '\n'
        first = text.splitlines()[0].strip()
        where = {'# on the controller machine': 'controller',
                 '# on a hypervisor': 'hypervisor',
                 '# on an extender': 'extender'}.get(first)
        if where is None:
            raise LabError('%s: a sh block must start with "# on the '
                           'controller machine", "# on a hypervisor" or '
                           '"# on an extender", not %r' % (path, first))
        out.append((where, text))
    return out


def _nspawn_runtime_dir():
    d = '/run/systemd/nspawn'
    os.makedirs(d, exist_ok=True)
    if subprocess.run(['findmnt', '-n', '-t', 'tmpfs', d],
                      capture_output=True).returncode != 0:
        _run(['mount', '-t', 'tmpfs', '-o', 'mode=0755', 'tmpfs', d])


class Machine:
    """The root booted under systemd in network namespace `netns`."""

    def __init__(self, root, netns, name, binds=(), log=None):
        self.root, self.netns, self.name = root, netns, name
        self.binds = list(binds)          # [(host path, container path)]
        self.log = log
        self.proc = None

    def boot(self, timeout=120):
        _nspawn_runtime_dir()
        # Not `ip netns exec`: it remounts /sys without the cgroup tree
        # nspawn needs ("Failed to determine whether the unified cgroups
        # hierarchy is used").
        cmd = ['systemd-nspawn', '--network-namespace-path=/run/netns/' +
               self.netns, '-D', self.root, '-M', self.name, '--boot',
               '--register=no', '--keep-unit', '--console=pipe'] + \
            ['--bind=%s:%s' % b for b in self.binds]
        out = open(self.log, 'a') if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=out,
                                     stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout
        while self.init_pid() is None:
            if self.proc.poll() is not None:
                raise LabError('systemd-nspawn exited %d' %
                               self.proc.returncode)
            if time.monotonic() > deadline:
                raise LabError('no init in the container')
            time.sleep(0.2)
        # systemctl cannot reach a manager that is still setting itself
        # up (it prints nothing then): ask again until it answers.
        state, why = '', ''
        while state not in ('running', 'degraded'):
            if time.monotonic() > deadline:
                raise LabError('the container did not boot: %r %s'
                               % (state, why))
            p = self.run(['systemctl', 'is-system-running', '--wait'],
                         check=False, timeout=timeout)
            state, why = p.stdout.strip(), p.stderr.strip()
            if state not in ('running', 'degraded'):
                time.sleep(0.5)
        return state

    def init_pid(self):
        """PID (here) of the container's systemd: nspawn's child."""
        if self.proc is None:
            return None
        try:
            with open('/proc/%d/task/%d/children' % (self.proc.pid,
                                                     self.proc.pid)) as f:
                kids = [int(x) for x in f.read().split()]
            for pid in kids:
                with open('/proc/%d/comm' % pid) as f:
                    if f.read().strip() == 'systemd':
                        return pid
        except OSError:
            return None
        return None

    def run(self, cmd, check=True, timeout=120, input=None):
        """cmd inside the container (all its namespaces), as root."""
        p = subprocess.run(
            ['nsenter', '-t', str(self.init_pid()), '-m', '-u', '-i', '-n',
             '-p', '--', 'env', '-i',
             'PATH=/usr/sbin:/usr/bin:/sbin:/bin', 'LANG=C.UTF-8'] +
            list(cmd), capture_output=True, text=True, timeout=timeout,
            input=input)
        if check and p.returncode != 0:
            raise LabError('in %s: %s failed (%d): %s' % (
                self.name, ' '.join(cmd), p.returncode,
                (p.stdout + p.stderr)[-2000:]))
        return p

    def systemctl(self, *args, check=True):
        return self.run(['systemctl'] + list(args), check=check)

    def active(self, unit):
        return self.systemctl('is-active', unit, check=False) \
            .stdout.strip()

    def main_pid(self, unit):
        return int(self.systemctl('show', '-p', 'MainPID', '--value',
                                  unit).stdout.strip())

    def journal(self, unit, lines=60):
        return self.run(['journalctl', '-u', unit, '-n', str(lines),
                         '--no-pager'], check=False).stdout

    def write(self, path, text, mode=0o644):
        dst = os.path.join(self.root, path.lstrip('/'))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, 'w') as f:
            f.write(text)
        os.chmod(dst, mode)

    def halt(self, timeout=60):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)       # a clean poweroff
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


if __name__ == '__main__':
    main()
