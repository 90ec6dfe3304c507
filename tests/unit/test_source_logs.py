"""Copies kept on the source host (pipeline.host_hold.to_log,
host.copy_log, control.source_logs), on the fake switch: where both
hosts of a move keep frames themselves, what the source tap is handed is
copied into the source's own vw-hold (its slot, priority 6), never to the
controller; activation asks that log where the guest stopped and hands
its answer to the destination's ring."""
import json
import uuid

from virtualwire.control.holding import CUT_WAIT, READ_WAIT
from virtualwire.core.held_frames import digest
from virtualwire.host.copy_log import CONFIRM, CopyLogs
from virtualwire.pipeline.host_hold import (ANSWER_SLOT, COPY_PCP, ETHERTYPE,
                                            MARK_SLOT)
from virtualwire.testing.harness import Harness

HOLD = 65003


def _moving(source_hold=True, copy_log='on'):
    from virtualwire.control.shared_settings import apply
    from virtualwire.core.shared_settings import HOLD_HOSTS
    h = Harness(hold=HOLD_HOSTS, hold_frames=64, activate_at_stop=True)
    h.call(apply, h.ctl, {'copy-log': copy_log})
    h.host('h1', ('g', 1), hold_port=HOLD if source_hold else None)
    h.host('h2', hold_port=HOLD)
    h.host('h3', ('f', 5))
    h.connect('g', 'f')
    vm = str(uuid.uuid4())
    h.call(h.ctl.moves.announce_migration, {
        'vm': 'guest', 'vm_uuid': vm, 'vnics': ['g'], 'destination': 'h2'})
    h.host('h2', ('g', 2), hold_port=HOLD)
    return h, vm


def _datagram(n):
    return b'\x45' + n.to_bytes(4, 'big') * 10


def _messages(h, host):
    """The JSON messages the controller sent `host`'s vw-hold."""
    out = []
    for to, port, frame in h.fabric.packet_outs:
        if (to, port) == (host, HOLD) and \
                int.from_bytes(frame[12:14], 'big') == ETHERTYPE:
            out.append(json.loads(frame[14:]))
    return out


def _to_controller(h, host, answer: bytes):
    h.send(host, HOLD, vlan_vid=ANSWER_SLOT, eth_type=ETHERTYPE,
           payload=answer)


def _stream(h, log, n0, n1, now=0.0):
    """Frames n0..n1-1 from the far end; the source's copies into `log`
    (as vw-frame-hold gets them: its tag read off)."""
    for n in range(n0, n1):
        for host, port, p in h.fabric.send('h3', 5, payload=_datagram(n)):
            if (host, port) == ('h1', HOLD):
                assert (p.vlan_vid, p.vlan_pcp) == (1, COPY_PCP)
                log.copy(p.vlan_vid, p.frame(), now)
    h.settle()


def test_the_source_copies_into_its_own_log_not_to_the_controller():
    h, vm = _moving()
    # Nothing of the move reaches the controller, so the move itself
    # starts the poll that names the tap to the log.
    assert h.ctl.holding.polls_wanted
    h.fabric.packet_in_log.clear()
    got = h.send('h3', 5, payload=_datagram(1))
    # The guest's tap gets the frame, untagged; its copy goes to the
    # source's log; the destination's ring holds the frame.
    assert sorted(got) == [('h1', 1), ('h1', HOLD), ('h2', HOLD)]
    tap = [p for host, port, p in h.fabric.send(
        'h3', 5, payload=_datagram(2)) if (host, port) == ('h1', 1)]
    assert [p.vlan_vid for p in tap] == [None]
    assert h.fabric.packet_in_log == []
    # Its tap is named to the log; its port counters are not polled.
    h.fabric.packet_outs.clear()
    stats_before = _port_stats(h, 'h1')
    h.call(h.ctl.poll_held)
    [doc] = _messages(h, 'h1')
    assert (doc['op'], doc['slot'], doc['port']) == ('log', 1, 'vnet1')
    assert _port_stats(h, 'h1') == stats_before
    h.call(h.ctl.poll_held)
    assert len(_messages(h, 'h1')) == 1         # once a move


def test_a_long_move_names_its_tap_again_so_its_log_keeps_it():
    from virtualwire.control.source_logs import LOG_AGAIN
    from virtualwire.host.copy_log import MAX_AGE
    assert LOG_AGAIN < MAX_AGE / 2      # two chances before the log goes
    h, vm = _moving()
    h.call(h.ctl.poll_held)
    assert [d['op'] for d in _messages(h, 'h1')] == ['log']
    h.fabric.packet_outs.clear()
    h.now += LOG_AGAIN - 1
    h.call(h.ctl.poll_held)
    assert _messages(h, 'h1') == []
    h.now += 1
    h.call(h.ctl.poll_held)
    [doc] = _messages(h, 'h1')
    assert (doc['op'], doc['slot'], doc['port']) == ('log', 1, 'vnet1')


def _port_stats(h, host):
    return [type(m).__name__ for m in h.fabric.switches[host].sent].count(
        'OFPPortStatsRequest')


def test_at_stop_the_source_log_places_the_cut_and_the_ring_gets_it():
    h, vm = _moving()
    log = CopyLogs()
    h.call(h.ctl.poll_held)
    [opened] = _messages(h, 'h1')
    log.message(opened, 0.0)
    for k in range(CONFIRM):        # the tap's count before any copy
        log.sample(1, 700, 0, k)
        log.settle(k + 0.5)
    _stream(h, log, 0, 10)
    h.fabric.packet_outs.clear()
    # The agent read 706 at STOP: six of the ten were read.
    h.call(h.ctl.moves.source_stopped, vm, 'h1', {'g': 706})
    h.settle()
    [cut] = _messages(h, 'h1')
    assert (cut['op'], cut['slot'], cut['reads']) == ('cut', 1, 706)
    assert _messages(h, 'h2') == []         # nothing to the ring yet
    _to_controller(h, 'h1', log.message(cut, 2.0))
    [release] = _messages(h, 'h2')
    assert release == {
        'op': 'release', 'slot': 2, 'id': release['id'], 'port': 'vnet2',
        'after': [digest(p.frame()).hex() for p in _copies(h, range(6))],
        'skip': 0, 'absent': 'wait'}
    _to_controller(h, 'h2', json.dumps(
        {'op': 'released', 'slot': 2, 'id': release['id'], 'found': True,
         'delivered': 4, 'held': 10, 'evicted': 0}).encode())
    [m] = h.call(h.ctl.views.migration_views)
    held = m['held']['g']
    assert {k: held[k] for k in ('copies_on', 'copies', 'read_copies',
                                 'unread_copies', 'delivered', 'reads',
                                 'reads_from')} == {
        'copies_on': 'host', 'copies': 10, 'read_copies': 6,
        'unread_copies': 4, 'delivered': 4, 'reads': 706,
        'reads_from': 'agent'}
    assert held['source_reads'] == 'copy log (count: agent)'


def _copies(h, numbers):
    from virtualwire.testing.fakeswitch import Packet
    return [Packet(0, _datagram(n)) for n in numbers]


def test_a_source_log_that_never_answers_holds_the_release_no_longer_than_its_bound():
    """Only the source's log places the cut (its copies are there): past
    READ_WAIT the release still waits for it; past CUT_WAIT the move goes
    on unheld, a loss, never a duplicate (the agent's count alone, with
    no copies here, once delivered 1,169 datagrams twice: CI run 54)."""
    h, vm = _moving()
    h.call(h.ctl.poll_held)
    _stream(h, CopyLogs(), 0, 3)
    h.fabric.packet_outs.clear()
    h.call(h.ctl.moves.source_stopped, vm, 'h1', {'g': 2})
    h.settle()
    assert [d['op'] for d in _messages(h, 'h1')] == ['cut']
    h.now += READ_WAIT
    h.tick(0)
    h.settle()
    assert not [d for d in _messages(h, 'h2') if d['op'] == 'release']
    h.now += CUT_WAIT
    h.tick(0)
    h.settle()
    assert not [d for d in _messages(h, 'h2') if d['op'] == 'release']
    [m] = h.call(h.ctl.views.migration_views)
    assert "copy log did not answer the cut" in m['held']['g']['abandoned']


def test_without_a_hold_port_on_the_source_copies_go_to_the_controller():
    h, vm = _moving(source_hold=False)
    h.fabric.packet_in_log.clear()
    assert sorted(h.send('h3', 5, payload=_datagram(1))) == [
        ('h1', 1), ('h2', HOLD)]
    assert {dp.name for dp, _ in h.fabric.packet_in_log} == {'h1'}


def test_with_the_copy_log_off_copies_go_to_the_controller():
    h, vm = _moving(copy_log='off')
    h.fabric.packet_in_log.clear()
    assert sorted(h.send('h3', 5, payload=_datagram(1))) == [
        ('h1', 1), ('h2', HOLD)]
    assert {dp.name for dp, _ in h.fabric.packet_in_log} == {'h1'}
    h.fabric.packet_outs.clear()
    h.call(h.ctl.poll_held)
    assert _messages(h, 'h1') == []


def test_a_copy_logs_marker_goes_straight_back_to_vw_hold_and_nowhere_else():
    """The marker a reading sends itself (host.copy_log) returns through
    the switch to the port it came from, untouched; no guest and no
    controller sees it."""
    h, _vm = _moving()
    h.fabric.packet_in_log.clear()
    got = h.send('h1', HOLD, vlan_vid=MARK_SLOT, eth_type=ETHERTYPE,
                 payload=b'mark 9')
    assert sorted(got) == [('h1', HOLD)]
    assert not h.fabric.packet_in_log


def test_the_cut_is_asked_in_the_stop_event_itself_not_at_the_next_sync():
    """The agent's STOP asks the source's log at once: left to the sync
    after the event's burst, the ask waited behind the REST reply and
    other events (158 ms in 2 of 40 bench moves)."""
    h, vm = _moving()
    h.call(h.ctl.poll_held)
    h.fabric.packet_outs.clear()
    # On the loop, with no sync after it (the harness's call would run
    # one): the message is out already.
    h.loop.call(h.ctl.source_stopped, vm, 'h1', {'g': 706})
    [cut] = _messages(h, 'h1')
    assert (cut['op'], cut['reads']) == ('cut', 706)


def test_qemus_stop_time_goes_to_the_source_log_which_cuts_by_it():
    """The agent's word carries QEMU's own STOP time: the controller
    passes it to the source's copy log with the cut, and the log cuts at
    its lowest reading after that time (705: QEMU read one more after
    STOP, which the agent counted, and never handed it to the guest), so
    that frame reaches the guest on its destination."""
    h, vm = _moving()
    log = CopyLogs()
    h.call(h.ctl.poll_held)
    [opened] = _messages(h, 'h1')
    log.message(opened, 0.0)
    for k in range(CONFIRM):
        log.sample(1, 700, 0, k)
        log.settle(k + 0.5)
    _stream(h, log, 0, 10)
    log.sample(1, 705, 0, 5.0, wall=1000.002)    # frozen after STOP
    log.settle(5.5)
    h.fabric.packet_outs.clear()
    h.call(h.ctl.moves.source_stopped, vm, 'h1', {'g': 706}, 1000.0)
    h.settle()
    [cut] = _messages(h, 'h1')
    assert (cut['reads'], cut['stopped_at']) == (706, 1000.0)
    _to_controller(h, 'h1', log.message(cut, 6.0))
    [release] = _messages(h, 'h2')
    assert release['after'] == [digest(p.frame()).hex()
                                for p in _copies(h, range(5))]
    _to_controller(h, 'h2', json.dumps(
        {'op': 'released', 'slot': 2, 'id': release['id'], 'found': True,
         'delivered': 5, 'held': 10, 'evicted': 0}).encode())
    [m] = h.call(h.ctl.views.migration_views)
    assert (m['held']['g']['reads'], m['held']['g']['reads_from']) == (
        705, 'log after STOP')
