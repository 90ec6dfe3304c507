"""Stand-in VMs (namespaces) and real QEMU guests of a lab host."""
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict

from vwlab.shell import LabError, kill_pidfile, read_text, sh

if TYPE_CHECKING:
    from vwlab.host import LabHost


@dataclass
class Vm:
    name: str
    host: 'LabHost'
    ns: str
    nics: Dict[str, dict] = field(default_factory=dict)   # vnic_id -> info
    uuid: str = ''           # libvirt's vm-id, as its NICs carry it

    def sh(self, cmd, check=True, timeout=60):
        return sh(cmd, ns=self.ns, check=check, timeout=timeout)

    def tool_cmd(self, *args):
        return ['ip', 'netns', 'exec', self.ns, sys.executable, '-m',
                'vwlab.traffic'] + [str(a) for a in args]

    def tool(self, *args, timeout=60):
        """Run a traffic tool in this VM; returns its last JSON line."""
        p = subprocess.run(self.tool_cmd(*args), capture_output=True,
                           text=True, timeout=timeout)
        if p.returncode != 0:
            raise LabError('traffic %s in %s failed: %s'
                           % (args[0], self.name, p.stderr.strip()))
        lines = [l for l in p.stdout.splitlines() if l.strip()]
        return json.loads(lines[-1]) if lines else None

    def tool_bg(self, *args, realtime=False):
        """Start a traffic tool in this VM. realtime: run it SCHED_FIFO, so
        that a probe keeps its schedule while a migration loads the
        machine (a 2-core host running two TCG guests starved a normal
        1 kHz sender for over a second)."""
        p = subprocess.Popen(self.tool_cmd(*args), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        if realtime:
            os.sched_setscheduler(p.pid, os.SCHED_FIFO, os.sched_param(10))
        return p

    def ping(self, dst, count=3, interval=0.2, size=56, df=False, wait=2):
        cmd = ['ping', '-n', '-q', '-c', str(count), '-i', str(interval),
               '-s', str(size), '-W', str(wait), dst]
        if df:
            cmd[1:1] = ['-M', 'do']
        p = subprocess.run(['ip', 'netns', 'exec', self.ns] + cmd,
                           capture_output=True, text=True,
                           timeout=count * (interval + wait) + 10)
        import re
        m = re.search(r'(\d+) packets transmitted, (\d+) received', p.stdout)
        return (int(m.group(1)), int(m.group(2))) if m else (count, 0)


def wait_booted(guest, timeout):
    """Until the guest's /init has said it is ready on the console."""
    end = time.time() + timeout
    while 'vw-guest: ready' not in guest.console_text():
        if time.time() > end:
            raise LabError('guest %s did not boot in %ds; console:\n%s'
                           % (guest.name, timeout,
                              guest.console_text()[-2000:]))
        time.sleep(0.1)


@dataclass
class Guest:
    """A real QEMU guest (the lab guest image, TCG) whose NICs are taps
    plugged into the host bridge as libvirt plugs them. Inside it,
    vw-responder echoes UDP on port 7000."""
    name: str
    host: 'LabHost'
    pidfile: str
    console: str
    nics: Dict[str, dict] = field(default_factory=dict)   # vnic_id -> info
    uuid: str = ''           # libvirt's vm-id, as its NICs carry it

    def console_text(self):
        return read_text(self.console)

    def stop(self):
        """Stop QEMU and unplug its taps, as libvirt does when a guest
        stops. A stale port left in OVSDB would be re-added under the same
        name by the next tap's `del-port; add-port`, and the userspace
        datapath keeps the dead device open: frames to it vanish."""
        kill_pidfile(self.pidfile)
        for info in self.nics.values():
            self.host.vsctl('--if-exists', 'del-port', 'br-int', info['port'])


@dataclass
class LibvirtGuest:
    """A lab guest run by libvirt (it may move between hosts)."""
    name: str
    console: str
    xml: str
    uuid: str = ''
    nics: Dict[str, dict] = field(default_factory=dict)   # vnic_id -> info
    uuid: str = ''           # libvirt's vm-id, as its NICs carry it

    def console_text(self):
        return read_text(self.console)
