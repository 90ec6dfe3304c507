"""A stand-in guest moving h1 -> h2 under a 1 kHz stream from a far VM on
h3, on namespace VMs (no QEMU): the switches' and the rings' part of a
switch-over, the guest's first frame sent by `vwlab.arrival` when a test
says so (often with the controller stopped)."""
import contextlib
import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Optional

from vwtest import seq, wait_until

PORT = 9000


def arrival(vm, *args):
    """The command that runs `vwlab.arrival` in the VM's namespace."""
    return ['ip', 'netns', 'exec', vm.ns, sys.executable, '-m',
            'vwlab.arrival'] + [str(a) for a in args]


def arrive(vm, *args):
    """`vwlab.arrival arrive` on the VM, its report (and its stderr)."""
    p = subprocess.run(arrival(vm, 'arrive', *args), capture_output=True,
                       text=True, timeout=30)
    lines = p.stdout.strip().splitlines()
    # No report: the tool itself failed (CI of 8e8c856 once); say how.
    assert lines, 'vwlab.arrival arrive on %s printed no report (exit %d): ' \
        '%s' % (vm.name, p.returncode, p.stderr.strip()[-2000:])
    return dict(json.loads(lines[-1]), stderr=p.stderr)


def in_order(report):
    """Did the datagrams delivered come one after another, none missing?"""
    seqs = [d[0] for d in report['delivered']]
    return bool(seqs) and seqs == list(range(seqs[0], seqs[0] + len(seqs)))


@contextlib.contextmanager
def controller_stopped(lab):
    lab.controller.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        lab.controller.send_signal(signal.SIGCONT)


@dataclass
class PausedMove:
    vnic: str
    wid: int
    src: Optional[Any]
    dst: Any


@contextlib.contextmanager
def paused_move(lab, api, name, net, tag):
    """The guest (`name`, MAC byte `tag`, 10.`net`.0.1) wired to a far VM
    on h3 that streams to it; its port appears on h2 while h1 still has
    it, and the move's activation flow is in. Undone afterwards."""
    h1, h2, h3 = lab.hosts
    n = next(seq)
    mac = '52:54:00:%02x:%02x:01' % (tag, n & 255)
    vnic = '%s%d-nic' % (name, n)
    far = h3.add_vm('%sf%d' % (name, n),
                    [('%sf%d-nic' % (name, n), '10.%d.0.2/24' % net)])
    src = h1.add_paused_vm('%ss%d' % (name, n), [(vnic, mac)])
    src.sh(['ip', 'addr', 'add', '10.%d.0.1/24' % net, 'dev', 'eth0'])
    wid = api.connect(vnic, '%sf%d-nic' % (name, n))['id']
    m = PausedMove(vnic, wid, src, None)
    stream = None
    try:
        api.wait_state(wid, 'tunnelled')
        stream = subprocess.Popen(
            arrival(far, 'stream', '--dst', '10.%d.0.1' % net, '--port',
                    PORT, '--rate', 1000, '--mac', mac),
            stdout=subprocess.PIPE, text=True)
        m.dst = h2.add_paused_vm('%sd%d' % (name, n), [(vnic, mac)])
        wait_until(lambda: 'priority=110,' in h2.dump_flows(), 20,
                   what="the move's activation flow on h2")
        yield m
    finally:
        if stream is not None:
            stream.send_signal(signal.SIGINT)
            stream.communicate(timeout=30)
        api.req('DELETE', '/v1/wires/%d' % wid)
        for h, vm in ((h1, m.src), (h2, m.dst)):
            if vm is not None:
                h.remove_vm(vm)
        h3.remove_vm(far)


def completed(lab, api, m):
    """The controller, running again, records the activation; the source
    leaving then completes the move, and the wire follows to h2. (Leaving
    only once the activation is recorded: the switch's message, sent while
    the controller was stopped, and the host OVSDB's news of the source
    leaving race on its return; CI once saw the second first,
    'source-left'.) The migration's record."""
    def record():
        return next((r for r in api.ok('GET', '/v1/migrations')['migrations']
                     if m.vnic in r['vnics'] and r['destination'] == 'h2'),
                    None)
    seen = {}

    def activated():
        seen['record'] = record()
        return (seen['record'] or {}).get('activated_by', {}).get(m.vnic)
    try:
        wait_until(activated, 15, what='the activation recorded')
    except AssertionError as e:
        # What the controller made of the move instead (shed? aborted?).
        raise AssertionError('%s; its record: %s' % (e, seen.get('record')))
    lab.hosts[0].remove_vm(m.src)
    m.src = None
    wait_until(lambda: {api.wire(m.wid)['host_a'],
                        api.wire(m.wid)['host_b']} == {'h2', 'h3'}, 15,
               what='the wire follows to h2')
    return record()
