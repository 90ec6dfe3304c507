"""vw-frame-hold on a lab hypervisor, as virtualwire-host's service runs
it (debian/virtualwire-host.virtualwire-frame-hold.service): on the port
`vw-hold` that vw-host-setup makes by default, at SCHED_FIFO 1. The lab
runs it on every hypervisor unless told not to (Lab(hold_frames=False),
or LabHost.keep_frames(False) for a while: the path where the controller
holds a moving guest's frames itself)."""
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Optional

from vwlab.shell import kill_pidfile, niced, sh

if TYPE_CHECKING:
    from vwlab.host import LabHost


def keep_frames(host: 'LabHost', on=True, ring=True):
    """Frames towards guests migrating in kept on this hypervisor (the
    product's default): vw-host-setup's port `vw-hold` (internal, pinned,
    silent, room for a slot's tag on a full tagged frame, OVS's
    vlan-limit at 2) and, with `ring`, vw-frame-hold on it. on=False:
    `vw-host-setup --no-hold-frames`, OVS's own vlan-limit back, the
    controller holds them itself."""
    host.keeps_frames = on
    if host.ring is not None and (not on or not ring):
        host.ring.stop()
        host.ring = None
    host.bootstrap()
    if not on:
        host.vsctl('remove', 'open_vswitch', '.', 'other_config',
                   'vlan-limit')
    elif ring and host.ring is None:
        host.ring = FrameHold(host).start()


class FrameHold:
    """One host's vw-frame-hold process. Its pid is kept in the host's
    folder, so the lab's teardown stops it with the host's switch."""

    def __init__(self, host: 'LabHost'):
        self.host = host
        self.proc: Optional[subprocess.Popen] = None

    @property
    def pidfile(self):
        return os.path.join(self.host.dir, 'frame-hold.pid')

    def start(self) -> 'FrameHold':
        """Started, logging to frame-hold.log in the host's folder. chrt,
        nice and `ip netns exec` each exec the next, so the pid is the
        daemon's own."""
        log = open(os.path.join(self.host.dir, 'frame-hold.log'), 'ab')
        try:
            self.proc = subprocess.Popen(['chrt', '-f', '1'] + niced(
                self.host.lab.ovs_nice, [
                    'ip', 'netns', 'exec', self.host.ns, sys.executable,
                    '-m', 'virtualwire.host.hold_port']),
                stdout=log, stderr=log)
        finally:
            log.close()
        with open(self.pidfile, 'w') as f:
            f.write('%d\n' % self.proc.pid)
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        kill_pidfile(self.pidfile)
        if self.proc is not None:
            self.proc.wait(timeout=10)
        try:
            os.unlink(self.pidfile)
        except FileNotFoundError:
            pass

    def bound_ifindex(self) -> Optional[int]:
        """The device its packet socket listens on (/proc/net/packet, in
        the host's namespace, matched to the process's own sockets), None
        if none is bound (the device it had went)."""
        mine = set()
        fds = '/proc/%d/fd' % self.proc.pid if self.proc else None
        for fd in os.listdir(fds) if fds else ():
            try:
                link = os.readlink(os.path.join(fds, fd))
            except OSError:
                continue
            if link.startswith('socket:['):
                mine.add(link[8:-1])
        for line in sh(['cat', '/proc/net/packet'],
                       ns=self.host.ns).splitlines()[1:]:
            f = line.split()     # sk RefCnt Type Proto Iface R Rmem User Inode
            if f[8] in mine and f[3] == '0003' and int(f[4]) > 0:
                return int(f[4])
        return None
