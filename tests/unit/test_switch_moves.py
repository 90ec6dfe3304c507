"""A provider switch moved make-before-break (`control.switch_moves`),
stepped one controller round at a time on the fake fabric: nothing is
sent until the old host's MACs are read; then only new flows (the
switch on its new host, with the MACs carried); only once those are
confirmed do the senders turn to it; the old switch keeps forwarding
until drained, then goes with what it learned. Frames cross the switch
exactly once at every step."""
import pytest

from virtualwire.pipeline.tables import SWITCH_IN, SWITCH_MAC
from switch_lan import BROADCAST, hosts, mac, send



@pytest.fixture
def h():
    h = hosts()
    h.intent.switches.create('web', 'shop', 'h1', ['p1', 'p2', 'p3', 'p4'])
    h.loop.post(h.ctl.on_switches, h.intent.switches.switches())
    h.settle()
    for i, v in enumerate('abcd', 1):
        h.connect(v, 'sw:web/p%d' % i)
    for v in 'abcd':                  # every MAC learned on h1
        send(h, v, BROADCAST)
    return h


def entered(h, host):
    """Frames that entered the switch's port 3 (c's) on `host`."""
    return sum(f.packets for f in h.fabric.switches[host].table.values()
               if f.table_id == SWITCH_IN.id and
               dict(f.match).get('reg5') == 3)


def switch_on(h, host):
    return any(f.table_id == SWITCH_IN.id
               for f in h.fabric.switches[host].table.values())


def macs(h, host):
    return sorted(dict(f.match)['eth_dst'] for f in
                  h.fabric.switches[host].table.values()
                  if f.table_id == SWITCH_MAC.id)


def step(h):
    """One round: the switches' answers to the controller, its events
    and the sync after them."""
    h._deliver()
    h.loop.run_pending()


def test_a_move_goes_make_before_break_and_frames_cross_once(h):
    assert macs(h, 'h1') == [mac(v) for v in 'abcd']
    h.intent.switches.place('web', 'h3')
    h.loop.post(h.ctl.on_switches, h.intent.switches.switches())
    h.loop.run_pending()
    # read: nothing sent anywhere yet.
    assert not switch_on(h, 'h3') and switch_on(h, 'h1')
    step(h)
    # make: the switch on h3 with every MAC, nothing sending to it yet.
    assert switch_on(h, 'h3') and macs(h, 'h3') == macs(h, 'h1')
    before = entered(h, 'h1'), entered(h, 'h3')
    assert send(h, 'c', mac('d')) == [('h3', 4)]
    assert (entered(h, 'h1'), entered(h, 'h3')) == (before[0] + 1,
                                                    before[1])
    step(h)
    # switch: c's host now sends to h3's switch, and only there.
    before = entered(h, 'h1'), entered(h, 'h3')
    assert send(h, 'c', BROADCAST) == [('h1', 1), ('h1', 2), ('h3', 4)]
    assert (entered(h, 'h1'), entered(h, 'h3')) == (before[0],
                                                    before[1] + 1)
    h.settle()
    # drain: the old switch still forwards what reaches it.
    assert switch_on(h, 'h1')
    h.tick(1.0)
    assert not switch_on(h, 'h1') and macs(h, 'h1') == []
    assert send(h, 'a', mac('c')) == [('h2', 3)]
    assert h.ctl.shared.stats['switch_moves'] == 1


def test_a_second_move_before_the_first_is_over_finishes_it_first(h):
    h.intent.switches.place('web', 'h3')
    h.loop.post(h.ctl.on_switches, h.intent.switches.switches())
    h.loop.run_pending()
    h.intent.switches.place('web', 'h2')
    h.loop.post(h.ctl.on_switches, h.intent.switches.switches())
    h.settle()
    h.tick(1.0)
    assert [host for host in ('h1', 'h2', 'h3') if switch_on(h, host)] \
        == ['h2']
    assert send(h, 'd', BROADCAST) == [('h1', 1), ('h1', 2), ('h2', 3)]
    assert h.ctl.switch_moves.moves == {}
