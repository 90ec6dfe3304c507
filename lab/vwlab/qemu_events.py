"""QEMU's own timeline of a migration, from its QMP events.

QEMU's reported downtime understates the outage (lab notes, section 7): the
guest is really away from its STOP event on the source to its RESUME event
on the destination. `virsh qemu-monitor-event --timestamp` prints each
event with QEMU's timestamp; one watcher per libvirt host collects them.
"""
import datetime
import re
import subprocess
import time

_LINE = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\+0000: event '
                   r'(\S+) for domain \'([^\']*)\'')


def parse(text, host):
    """[(unix time, host, event, domain)] from qemu-monitor-event output."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m:
            t = datetime.datetime.strptime(m.group(1), '%Y-%m-%d %H:%M:%S.%f'
                                           ).replace(
                tzinfo=datetime.timezone.utc).timestamp()
            out.append((t, host, m.group(2), m.group(3)))
    return out


def stop_resume_windows(events, domain):
    """[(stop time, source host, resume time, destination host)]: each STOP
    paired with the next RESUME of the domain on another host."""
    out, stop = [], None
    for t, host, ev, dom in sorted(events):
        if dom != domain:
            continue
        if ev == 'STOP':
            stop = (t, host)
        elif ev == 'RESUME' and stop and host != stop[1]:
            out.append((stop[0], stop[1], t, host))
            stop = None
    return out


class EventWatch:
    """Collect QMP events from the given lab hosts' libvirtd while open."""

    def __init__(self, hosts):
        self.hosts = list(hosts)
        self.procs = []
        self.events = []

    def __enter__(self):
        for h in self.hosts:
            self.procs.append((h.name, subprocess.Popen(
                ['virsh', '-c', h.libvirt.uri, 'qemu-monitor-event',
                 '--loop', '--timestamp'],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL, text=True)))
        time.sleep(0.3)          # registered before anything happens
        return self

    def __exit__(self, *exc):
        time.sleep(0.2)
        for name, p in self.procs:
            p.terminate()
            self.events += parse(p.communicate(timeout=10)[0], name)
        self.events.sort()
