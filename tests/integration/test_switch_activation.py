"""A moving vNIC's destination switch delivers on the guest's first frame by
itself (its learn action), with the controller stopped; the controller's
cleanup follows after its settle time. Namespace VMs, no QEMU: the switch
and the controller are what is under test (bench/bench_activation.py
measures the same path)."""
import json
import signal
import subprocess
import time

import pytest

from vwtest import seq, wait_until
from vwtest.paused_move import (PORT, arrival, arrive, completed,
                                controller_stopped, in_order, paused_move)

# The guest's first frame activates (the defaults activate at the
# source's STOP and hold frames: tests/integration/test_held_frame_
# switchover.py).
pytestmark = pytest.mark.usefixtures('first_frame_activation')


def test_the_destination_switches_over_on_its_own_learn(lab, api):
    with paused_move(lab, api, 'sw', 95, 0xad) as m:
        with controller_stopped(lab):
            r = arrive(m.dst, 'eth0', '--port', PORT, '--timeout', 3)
        # Held while the guest was silent: nothing in the 100 ms before
        # its announce ...
        assert r['before'] == 0, r
        # ... then delivered, with the controller stopped, well before the
        # switch's periodic revalidation (500 ms) could have done it, and
        # nothing lost from the first delivery on.
        assert r['first_at'] is not None, r
        assert r['first_at'] - r['sent_at'] < 0.1, r
        assert in_order(r), r
        # The controller, running again, records the activation, waits its
        # settle time and moves the other switches; the source leaving
        # completes the move.
        rec = completed(lab, api, m)
        assert rec['activated_by'] == {m.vnic: 'rarp'}, rec
        assert rec['found_by'] == 'ovsdb' and rec['state'] == 'completed', \
            rec
        settle = rec['steps'][m.vnic]['sisters_moved'] - \
            rec['activated'][m.vnic]
        assert settle >= 0.02, rec


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
            arrival(far, 'stream', '--dst', '10.9%d.0.1' % (6 + i),
                     '--port', PORT, '--rate', 1000, '--mac', nics[i][1]),
            stdout=subprocess.PIPE, text=True)
            for i, far in enumerate(fars)]
        dst = h2.add_paused_vm('sgd%d' % n, nics, vm_uuid=guest)
        wait_until(lambda: h2.dump_flows().count('priority=110,') >= 2, 20,
                   what="both vNICs' activation flows on h2")
        lab.controller.send_signal(signal.SIGSTOP)
        try:
            quiet = subprocess.Popen(
                arrival(dst, 'arrive', 'eth1', '--port', PORT, '--timeout',
                         3, '--no-announce'),
                stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)         # eth1 listens (and holds) before eth0
            p = subprocess.run(arrival(dst, 'arrive', 'eth0', '--port',
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
