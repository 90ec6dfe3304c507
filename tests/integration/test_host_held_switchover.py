"""Held frames kept on the destination host itself, on real OVS, libvirt
and QEMU, at the product's defaults: with `vw-hold` and vw-frame-hold on
both hypervisors (vw-host-setup's default) and the controller at its
own (--hold hosts), a guest moving under a 1 kHz echo stream gets,
once it runs on its destination, every datagram sent during its pause,
once each and in order; the destination's switch put them in its ring,
and the controller's one release (at the source's STOP) named where the
guest stopped reading (control.host_rings). No held frame crosses the
controller's connection.

Excused, each by its own evidence: up to QEMU_AT_STOP datagrams the source
QEMU read just before STOP, or just after it right before the first held
one (it stops with them: QEMU's loss, not the network's), each printed."""
import os
import time

import pytest

from virtualwire.host.hold_ring import BEAT_LOST
from vwtest import seq, wait_until
from vwtest.held_move import brief, move
from vwtest.api import set_shared
from vwtest.fixtures import hold_port_seen
from vwtest.paused_move import (PORT, arrive, completed, controller_stopped,
                                in_order, paused_move)

QEMU_AT_STOP = 3
PROBE_SIZE = 64


@pytest.fixture(scope='module')
def rings(lab, api):
    """h1 and h2 keep held frames themselves, as the lab's hypervisors do
    by default (vw-host-setup's `vw-hold`, vw-frame-hold running on it);
    the controller, at its default (--hold hosts), holds every move to
    them."""
    hosts = lab.hosts[:2]
    assert all(h.ring is not None and h.ring.running for h in hosts)
    wait_until(lambda: all(hold_port_seen(api, h) for h in hosts), 30,
               what='the controller sees both rings')
    return hosts


def test_with_copies_to_the_controller_held_frames_reach_the_guest_once_in_order(
        lab, api, rings, wired_guest, guest_retry):
    """copy-log off (the behaviour before it was the default): the
    source's copies go to the controller, which names the cut."""
    set_shared(api, 'copy-log', 'off')
    try:
        guest_retry.run(lambda _d: _there_and_back(
            lab, api, wired_guest, next(seq) % 250))
    finally:
        set_shared(api, 'copy-log', 'on')


def _moves(lab, api, wired_guest, net, label):
    """A wired guest moved h1 -> h2 -> h1 under the stream: each move's
    (probe report, its held record, what a failure shows, STOP, RESUME),
    printed; then its wire is checked tunnelled."""
    h1, h2, _h3 = lab.hosts
    g, far, wid = wired_guest(net)
    [nic] = g.nics
    for src, dst in ((h1, h2), (h2, h1)):
        r, m, stop, resume = move(lab, api, g, far, net + '.1', src, dst,
                                  PROBE_SIZE)
        held = m['held'][nic]
        why = dict(brief(r, held, stop, resume, g), to=dst.name)
        print('%s, move to %s: %s' % (label, dst.name, why))
        yield r, m, held, why, stop, resume
    assert api.wire(wid)['state'] == 'tunnelled'


def _there_and_back(lab, api, wired_guest, k):
    for r, m, held, why, stop, resume in _moves(
            lab, api, wired_guest, '10.89.%d' % k, 'held on hosts'):
        # Held by default, by the ring on the destination, which said so;
        # the cut placed by us, from copies that came to us.
        assert m['hold'] is None, str(why)
        assert held['held_on'] == 'host' and 'error' not in held, str(why)
        assert held.get('copies_on') != 'host', str(why)
        # (The ring's bound evicts frames from early in the move, which
        # the guest read: the run it was told of is found after them.)
        assert held['found'] is True, str(why)
        # Every frame its source was handed and never read, at least
        # (a guest that had read all but 7 at STOP gets 7: CI's 10 was
        # a guess).
        assert 0 < held['delivered'] <= held['held'] and \
            held['delivered'] >= held['unread_copies'], str(why)
        # Once, and in order.
        assert r['duplicates'] == 0 and r['reordered'] == 0, str(why)
        # Nothing sent during the pause lost; before STOP, only what the
        # source QEMU read and stopped with.
        # (QEMU reads one more frame after its STOP is said and keeps it:
        # one sent just after STOP is excused when it is among the last
        # the count says were read, right before the first held one.)
        held = sorted(q for q, t in r['late_echoes'] if t >= resume)
        lost = r['lost_sent_at']
        assert not [(q, t) for q, t in lost if t >= stop and not any(
            0 < h - q <= QEMU_AT_STOP for h in held)], str(why)
        assert len(lost) <= QEMU_AT_STOP, str(why)
        after = [t for _q, t in r['late_echoes'] if t >= resume]
        assert after, str(why)
        print('first held echo %.1f ms after RESUME' % (
            (min(after) - resume) * 1e3))


def test_with_the_copy_log_the_source_host_places_the_cut_itself(
        lab, api, rings, wired_guest, guest_retry):
    """At the default (copy-log on): the source switch copies into its
    own vw-frame-hold, which placed the cut from the agent's count at
    STOP within ms, its tap readings settled by markers sent back through
    the switch (so no reading counts a frame whose copy is still to
    come), and the held frames reach the guest once, in order."""
    guest_retry.run(lambda _d: _with_copy_log(
        lab, api, wired_guest, next(seq) % 250))


def _with_copy_log(lab, api, wired_guest, k):
    for r, m, held, why, _stop, _resume in _moves(
            lab, api, wired_guest, '10.87.%d' % k, 'copy log'):
        # The source's own log placed it (no copy crossed to us), from
        # the count at STOP, having read the tap while copies came: the
        # agent's, or lower, its own reading taken after QEMU's STOP (its
        # QMP event's time, which the agent sent) when QEMU read one more
        # frame before libvirt's event came (host.copy_log).
        assert held['copies_on'] == 'host' and 'cut_error' not in held, \
            str(why)
        # (QEMU's STOP comes on the agent's second connection, in no
        # fixed order with libvirt's event: 8 of 120 bench moves and one
        # CI move went without it, cut at the agent's count as before.)
        if held['stopped_at'] is None:
            assert held['reads_from'] == 'agent', str(why)
        assert held['reads'] <= held['agent_reads'] and \
            held['reads_from'] == ('agent' if held['reads'] ==
                                   held['agent_reads'] else
                                   'log after STOP'), str(why)
        assert held['samples'] > 0 and held['readings_marked'] > 0 and \
            held['copies'] > 0 and held['aligned'] is True, str(why)
        assert held['cut_ms'] < 200 and held['ring_ms'] < 350, str(why)
        assert held['found'] is True and \
            held['unread_copies'] <= held['delivered'] > 0, str(why)
        # Each reading set against the copies once its marker was back
        # through the switch: none counted a frame whose copy was late.
        assert r['reordered'] == 0 and r['duplicates'] == 0, str(why)
        # And the port did not count those markers dropped: the kernel
        # did, every one, until vw-frame-hold gave their EtherType a
        # handler (host.hold_port.QUIETED). (Benches still see 2-4 in a
        # move whose word came after the guest's first frame: not placed,
        # so not asserted away; a count of the markers' size fails.)
        at_hold = {h: sum(n for k, n in c.items()
                          if k.startswith('port vw-hold '))
                   for h, c in m['switches']['counters'].items()}
        assert max(at_hold.values(), default=0) < held['samples'] / 2, \
            str(dict(why, at_hold=at_hold))


def test_with_the_controller_away_the_ring_lets_frames_through_after_its_bound(
        lab, api, rings):
    """A ring destination learns no delivery (the controller's release
    and bundle must come first, or newer frames overtake the released
    ones). With the controller stopped when the guest runs there, the
    switch's copy of the guest's first frame tells the ring, which, its
    controller's beats gone, after BEAT_LOST drops what it held (a loss,
    never a duplicate) and lets later frames through: in order, none sent
    before the bound. Back, the
    controller converges the move. Namespace VMs: the ring and the switch
    are under test, not QEMU."""
    h2 = lab.hosts[1]
    with paused_move(lab, api, 'ro', 94, 0xaf) as m:
        [act] = [f for f in h2.dump_flows().splitlines()
                 if 'priority=110,' in f]
        assert 'learn(' not in act and 'set_field:7->vlan_pcp' in act, act
        # The controller holding the move has beaten the ring (its poll
        # runs every 50 ms; stopped before its first, none came and the
        # ring waited ORPHAN_AFTER: CI run 54).
        time.sleep(0.3)
        with controller_stopped(lab):
            r = arrive(m.dst, 'eth0', '--port', PORT, '--timeout',
                       BEAT_LOST + 3)
        assert r['before'] == 0, r
        assert r['first_at'] is not None, r
        waited = r['first_at'] - r['sent_at']
        assert BEAT_LOST - 0.05 <= waited < BEAT_LOST + 0.5, r
        # None of what the ring held (its guest may have read it on the
        # source): the first frame through was sent after the bound.
        assert r['first_sent'] >= r['sent_at'] + BEAT_LOST - 0.05, r
        assert in_order(r), r
        with open(os.path.join(h2.dir, 'frame-hold.log')) as f:
            assert 'no release came' in f.read()
        # The controller, back, activates the move on the guest's next
        # frame; the source leaving completes it, and frames then come
        # straight from the switch, in order.
        completed(lab, api, m)
        r = arrive(m.dst, 'eth0', '--port', PORT, '--timeout', 2,
                   '--collect', 0.3, '--no-announce')
        assert len(r['delivered']) >= 100 and in_order(r), r
