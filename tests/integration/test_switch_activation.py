"""A moving vNIC's destination switch delivers on the guest's first frame by
itself (its learn action), with the controller stopped; the controller's
cleanup follows after its settle time. Namespace VMs, no QEMU: the switch
and the controller are what is under test (bench/bench_activation.py
measures the same path)."""
import json
import signal
import subprocess
import sys
import time

import pytest

from vwtest import seq, wait_until

# The guest's first frame activates (the defaults activate at the
# source's STOP and hold frames: tests/integration/test_held_frame_
# switchover.py).
pytestmark = pytest.mark.usefixtures('first_frame_activation')

PORT = 9000


def _arrival(vm, *args):
    return ['ip', 'netns', 'exec', vm.ns, sys.executable, '-m',
            'vwlab.arrival'] + [str(a) for a in args]


def test_the_destination_switches_over_on_its_own_learn(lab, api):
    h1, h2, h3 = lab.hosts
    n = next(seq)
    mac = '52:54:00:ad:%02x:01' % (n & 255)
    vnic = 'sw%d-nic' % n
    far = h3.add_vm('swf%d' % n, [('swf%d-nic' % n, '10.95.0.2/24')])
    src = h1.add_paused_vm('sws%d' % n, [(vnic, mac)])
    src.sh(['ip', 'addr', 'add', '10.95.0.1/24', 'dev', 'eth0'])
    wid = api.connect(vnic, 'swf%d-nic' % n)['id']
    dst = stream = None
    try:
        api.wait_state(wid, 'tunnelled')
        stream = subprocess.Popen(
            _arrival(far, 'stream', '--dst', '10.95.0.1', '--port', PORT,
                     '--rate', 1000, '--mac', mac),
            stdout=subprocess.PIPE, text=True)
        # The vNIC's port appears on h2 while h1 still has it: a move.
        dst = h2.add_paused_vm('swd%d' % n, [(vnic, mac)])
        wait_until(lambda: 'priority=110,' in h2.dump_flows(), 20,
                   what="the move's activation flow on h2")
        lab.controller.send_signal(signal.SIGSTOP)
        try:
            p = subprocess.run(_arrival(dst, 'arrive', 'eth0', '--port',
                                        PORT, '--timeout', 3),
                               capture_output=True, text=True, timeout=30)
        finally:
            lab.controller.send_signal(signal.SIGCONT)
        r = json.loads(p.stdout.strip().splitlines()[-1])
        # Held while the guest was silent: nothing in the 100 ms before
        # its announce ...
        assert r['before'] == 0, r
        # ... then delivered, with the controller stopped, well before the
        # switch's periodic revalidation (500 ms) could have done it, and
        # nothing lost from the first delivery on.
        assert r['first_at'] is not None, (r, p.stderr)
        assert r['first_at'] - r['sent_at'] < 0.1, r
        seqs = [d[0] for d in r['delivered']]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
        # The controller, running again, records the activation, waits its
        # settle time and moves the other switches; the source leaving
        # completes the move. (Leaving only once the activation is
        # recorded: the switch's message, sent while the controller was
        # stopped, and the host OVSDB's news of the source leaving race on
        # its return; CI once saw the second first, 'source-left'.)
        wait_until(lambda: any(
            m.get('activated_by', {}).get(vnic)
            for m in api.ok('GET', '/v1/migrations')['migrations']
            if vnic in m['vnics'] and m['destination'] == 'h2'), 15,
            what='the activation recorded')
        h1.remove_vm(src)
        src = None
        wait_until(lambda: {api.wire(wid)['host_a'],
                            api.wire(wid)['host_b']} == {'h2', 'h3'}, 15,
                   what='the wire follows to h2')
        [m] = [m for m in api.ok('GET', '/v1/migrations')['migrations']
               if vnic in m['vnics'] and m['destination'] == 'h2']
        assert m['activated_by'] == {vnic: 'rarp'}, m
        assert m['found_by'] == 'ovsdb' and m['state'] == 'completed', m
        settle = m['steps'][vnic]['sisters_moved'] - m['activated'][vnic]
        assert settle >= 0.02, m
    finally:
        if stream is not None:
            stream.send_signal(signal.SIGINT)
            stream.communicate(timeout=30)
        api.req('DELETE', '/v1/wires/%d' % wid)
        for h, vm in ((h1, src), (h2, dst)):
            if vm is not None:
                h.remove_vm(vm)


def test_one_vnics_first_frame_switches_its_whole_guest_over(lab, api):
    """A guest with two vNICs moves; with the controller stopped, the RARP
    on one vNIC alone makes the destination deliver on both (the guest
    runs there), in the same revalidation: no second vNIC waiting for its
    own announce and for OVS's next pass."""
    h1, h2, h3 = lab.hosts
    n = next(seq)
    guest = '%032x' % (0xab0000 + n)
    nics = [('sg%d-a' % n, '52:54:00:ae:%02x:01' % (n & 255)),
            ('sg%d-b' % n, '52:54:00:ae:%02x:02' % (n & 255))]
    fars = [h3.add_vm('sgf%d%s' % (n, x), [('sgf%d%s-nic' % (n, x),
                                            '10.9%d.0.2/24' % (6 + i))])
            for i, x in enumerate('ab')]
    src = h1.add_paused_vm('sgs%d' % n, nics, vm_uuid=guest)
    for i in range(2):
        src.sh(['ip', 'addr', 'add', '10.9%d.0.1/24' % (6 + i), 'dev',
                'eth%d' % i])
    wids = [api.connect(v, far.name + '-nic')['id']
            for (v, _m), far in zip(nics, fars)]
    dst, streams = None, []
    try:
        for w in wids:
            api.wait_state(w, 'tunnelled')
        streams = [subprocess.Popen(
            _arrival(far, 'stream', '--dst', '10.9%d.0.1' % (6 + i),
                     '--port', PORT, '--rate', 1000, '--mac', nics[i][1]),
            stdout=subprocess.PIPE, text=True)
            for i, far in enumerate(fars)]
        dst = h2.add_paused_vm('sgd%d' % n, nics, vm_uuid=guest)
        wait_until(lambda: h2.dump_flows().count('priority=110,') >= 2, 20,
                   what="both vNICs' activation flows on h2")
        lab.controller.send_signal(signal.SIGSTOP)
        try:
            quiet = subprocess.Popen(
                _arrival(dst, 'arrive', 'eth1', '--port', PORT, '--timeout',
                         3, '--no-announce'),
                stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)         # eth1 listens (and holds) before eth0
            p = subprocess.run(_arrival(dst, 'arrive', 'eth0', '--port',
                                        PORT, '--timeout', 3),
                               capture_output=True, text=True, timeout=30)
            q = quiet.communicate(timeout=30)[0]
        finally:
            lab.controller.send_signal(signal.SIGCONT)
        a = json.loads(p.stdout.strip().splitlines()[-1])
        b = json.loads(q.strip().splitlines()[-1])
        # Both held before the announce on eth0 ...
        assert a['before'] == 0 and b['before'] == 0, (a, b)
        # ... then both delivered, though only eth0 announced.
        assert a['first_at'] is not None and b['first_at'] is not None, \
            (a, b)
        assert 0 < b['first_at'] - a['sent_at'] < 0.1, (a, b)
        # The controller, back, says which frame activated each vNIC.
        names = {v for v, _m in nics}

        def activated_by():
            for m in api.ok('GET', '/v1/migrations')['migrations']:
                if set(m['vnics']) == names:
                    return m.get('activated_by')
            return None
        want = {nics[0][0]: 'rarp', nics[1][0]: 'sibling-frame'}
        wait_until(lambda: activated_by() == want, 10,
                   what='activations recorded as %s' % want)
    finally:
        for s in streams:
            s.send_signal(signal.SIGINT)
            s.communicate(timeout=30)
        for w in wids:
            api.req('DELETE', '/v1/wires/%d' % w)
        for h, vm in ((h1, src), (h2, dst)):
            if vm is not None:
                h.remove_vm(vm)
        for far in fars:
            h3.remove_vm(far)
