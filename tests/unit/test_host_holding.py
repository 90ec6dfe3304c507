"""Held frames kept on the destination host (pipeline.host_hold,
control.host_rings, core.host_release), on the fake switch: the
destination's flows put a moving vNIC's frames in its ring, tagged with
its slot; activation sends the ring one release naming the last frames
the guest read on its source, and the flows that deliver directly wait
for the ring's answer."""
import json
import uuid

from virtualwire.control.host_rings import (ANSWER_WAIT, BEAT_EVERY,
                                            message_frame)
from virtualwire.core.held_frames import digest
from virtualwire.pipeline.host_hold import ANSWER_SLOT, ETHERTYPE
from virtualwire.testing.harness import Harness

HOLD = 65003
RARP = 0x8035


def _moving(hold=True):
    h = Harness(hold=hold, hold_frames=64)
    h.host('h1', ('g', 1))
    h.host('h2', hold_port=HOLD)
    h.host('h3', ('f', 5))
    w = h.connect('g', 'f')
    h.call(h.ctl.moves.announce_migration, {
        'vm': 'guest', 'vm_uuid': str(uuid.uuid4()), 'vnics': ['g'],
        'destination': 'h2'})
    h.host('h2', ('g', 2), hold_port=HOLD)
    return h, w


def _moving_at_stop():
    """_moving's, with the defaults: held on hosts, activation at STOP;
    (harness, the guest's uuid)."""
    from virtualwire.core.shared_settings import HOLD_HOSTS
    h = Harness(hold=HOLD_HOSTS, hold_frames=64, activate_at_stop=True)
    h.host('h1', ('g', 1))
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


def _frame(n):
    # As the source's copy shows it (the fake switch's Ethernet header).
    return bytes.fromhex('ffffffffffff020000000000') + b'\x08\x00' + \
        _datagram(n)


def _messages(h):
    """[(host, port, message)] of the packet-outs to rings."""
    out = []
    for host, port, frame in h.fabric.packet_outs:
        assert int.from_bytes(frame[12:14], 'big') == ETHERTYPE
        out.append((host, port, json.loads(frame[14:])))
    return out


def _release_sent(h):
    """The one message sent that is not a beat."""
    [(host, port, doc)] = [m for m in _messages(h) if m[2]['op'] != 'beat']
    assert (host, port) == ('h2', HOLD)
    return doc


def _answer(h, doc):
    h.send('h2', HOLD, vlan_vid=ANSWER_SLOT, eth_type=ETHERTYPE,
           payload=json.dumps(doc).encode())


def _bundles(h, host):
    return [type(m).__name__ for m in h.fabric.switches[host].sent].count(
        'OFPBundleCtrlMsg')


def test_the_destination_keeps_the_frames_in_its_ring_not_the_controller():
    h, w = _moving()
    h.fabric.packet_in_log.clear()
    # The source's guest gets the frame; the destination's ring, slot 2.
    assert h.send('h3', 5, payload=_datagram(1)) == [('h1', 1), ('h2', HOLD)]
    [(_, _, pkt)] = [d for d in h.fabric.send('h3', 5, payload=_datagram(2))
                     if d[0] == 'h2']
    assert pkt.vlan_vid == 2
    # Only the source's short copy reaches the controller.
    assert {dp.name for dp, _ in h.fabric.packet_in_log} == {'h1'}
    # What the ring sends back for slot 2 reaches the guest's port, and
    # the ring's answers (its own tag) reach the controller.
    assert h.send('h2', HOLD, vlan_vid=2) == [('h2', 2)]
    assert h.send('h2', HOLD, vlan_vid=7) == []


def test_activation_names_the_last_frames_read_and_waits_for_the_answer():
    h, w = _moving()
    src = h.fabric.switches['h1']
    src.tap_reads[1] = 700
    h.call(h.ctl.poll_held)
    for n in range(10):
        h.send('h3', 5, payload=_datagram(n))
    src.tap_reads[1] = 706                  # it read six, then stopped
    h.call(h.ctl.poll_held)
    h.fabric.packet_outs.clear()
    bundles = _bundles(h, 'h2')
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.settle()
    doc = _release_sent(h)
    assert doc == {'op': 'release', 'slot': 2, 'id': doc['id'],
                   'after': [digest(_frame(n)).hex() for n in range(6)],
                   'skip': 0, 'absent': 'wait', 'port': 'vnet2'}
    # No flow that delivers directly before the ring has answered: frames
    # still go to the ring, which passes them on behind the held ones.
    assert _bundles(h, 'h2') == bundles
    assert ('h2', HOLD) in h.send('h3', 5, payload=_datagram(10))
    _answer(h, {'op': 'released', 'slot': 2, 'id': doc['id'],
                'found': True, 'delivered': 4, 'held': 11, 'evicted': 0})
    h.settle()
    assert _bundles(h, 'h2') > bundles
    assert h.send('h3', 5, payload=_datagram(11)) == [('h2', 2)]
    [m] = h.call(h.ctl.views.migration_views)
    held = m['held']['g']
    assert {k: held[k] for k in ('held_on', 'delivered', 'held', 'found',
                                 'read_copies', 'unread_copies',
                                 'source_reads')} == {
        'held_on': 'host', 'delivered': 4, 'held': 11, 'found': True,
        'read_copies': 6, 'unread_copies': 4, 'source_reads': 'answered'}
    assert h.ctl.shared.stats['held_delivered'] == 4
    # The timeline says when the release went and when the ring answered.
    steps = m['steps']['g']
    assert steps['held_released'] <= steps['held_delivered'], steps


def test_a_ring_that_never_answers_holds_the_switch_over_no_longer_than_its_bound():
    h, w = _moving()
    h.fabric.switches['h1'].tap_reads[1] = 0
    h.call(h.ctl.poll_held)
    h.send('h3', 5, payload=_datagram(0))
    bundles = _bundles(h, 'h2')
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.settle()
    assert _release_sent(h)['after'] == []        # read none: all goes
    assert _bundles(h, 'h2') == bundles
    h.now += ANSWER_WAIT
    h.tick(0)
    h.settle()
    assert _bundles(h, 'h2') > bundles
    [m] = h.call(h.ctl.views.migration_views)
    assert m['held']['g']['error'] == 'no answer from the ring'
    # Released, never said delivered.
    assert 'held_released' in m['steps']['g']
    assert 'held_delivered' not in m['steps']['g']


def test_an_answer_to_no_release_awaited_changes_nothing():
    h, w = _moving()
    before = h.call(h.ctl.views.migration_views)
    _answer(h, {'op': 'released', 'slot': 2, 'id': 99, 'delivered': 500})
    h.settle()
    assert h.call(h.ctl.views.migration_views) == before
    assert h.ctl.shared.stats['held_delivered'] == 0


def test_without_a_ring_the_controller_holds_as_before():
    h = Harness(hold=True, hold_frames=64)
    h.host('h1', ('g', 1))
    h.host('h2')
    h.host('h3', ('f', 5))
    h.connect('g', 'f')
    h.call(h.ctl.moves.announce_migration, {
        'vm': 'guest', 'vm_uuid': str(uuid.uuid4()), 'vnics': ['g'],
        'destination': 'h2'})
    h.host('h2', ('g', 2))
    h.fabric.packet_in_log.clear()
    assert h.send('h3', 5, payload=_datagram(1)) == [('h1', 1)]
    assert {dp.name for dp, _ in h.fabric.packet_in_log} == {'h1', 'h2'}


def test_the_message_frame_is_what_the_ring_parses():
    from virtualwire.host.hold_port import classify
    from virtualwire.host.hold_ring import parse_message
    kind, slot, payload = classify(message_frame(
        {'op': 'close', 'slot': 3, 'id': 1}))
    assert (kind, slot) == ('message', None)
    assert parse_message(payload).op == 'close'


def test_by_default_moves_hold_where_the_destination_keeps_a_ring():
    """--hold hosts (the default): a move to a host with vw-hold holds, a
    move to one without does not (its destination drops, as --hold off)."""
    from virtualwire.core.shared_settings import HOLD_HOSTS
    for ring, held in ((HOLD, [('h1', 1), ('h2', HOLD)]), (None, [('h1', 1)])):
        h = Harness(hold=HOLD_HOSTS, hold_frames=64)
        h.host('h1', ('g', 1))
        h.host('h2', hold_port=ring)
        h.host('h3', ('f', 5))
        h.connect('g', 'f')
        h.call(h.ctl.moves.announce_migration, {
            'vm': 'guest', 'vm_uuid': str(uuid.uuid4()), 'vnics': ['g'],
            'destination': 'h2'})
        h.host('h2', ('g', 2), hold_port=ring)
        h.fabric.packet_in_log.clear()
        assert h.send('h3', 5, payload=_datagram(1)) == held
        # Copies only while held; no frame of the destination's either way.
        assert {dp.name for dp, _ in h.fabric.packet_in_log} == (
            {'h1'} if ring else set())


def test_held_on_the_host_a_move_is_shed_only_when_the_ring_may_lose_it():
    """Behind its switches' packet-ins (the source's copies), the
    controller sheds moves held on their hosts later than its own: a
    release past the copies skips what the count says was read, as long
    as the ring still holds the run it names."""
    from virtualwire.control.lag_guard import FAR_BEHIND, RING_BEHIND
    h, w = _moving()
    h.fabric.switches['h1'].tap_reads[1] = 0
    h.loop.call(h.ctl.poll_held)
    h.now += FAR_BEHIND + 0.1          # its own ring would shed here
    h.settle()
    assert set(h.ctl.holding.holding) == {'g'}
    h.loop.call(h.ctl.poll_held)
    h.now += RING_BEHIND + 0.1
    h.settle()
    assert not h.ctl.holding.holding
    [m] = h.call(h.ctl.views.migration_views)
    assert m['held']['g']['abandoned'].startswith(
        'the controller ran %d ms behind' % round((RING_BEHIND + 0.1) * 1e3))


def test_a_count_past_the_copies_skips_the_frames_it_read():
    from virtualwire.core.held_frames import HeldFrames
    from virtualwire.core.host_release import release_doc
    hf = HeldFrames()
    hf.polled(100, 0)                  # base 100
    for n in range(5):
        hf.copied(_frame(n))
    doc, view = release_doc(hf, 108, 2048)     # read 8: 3 past the copies
    assert doc == {'after': [digest(_frame(n)).hex() for n in range(5)],
                   'skip': 3, 'absent': 'wait'}
    assert view['extrapolated'] == 3 and view['read_copies'] == 5


def test_a_guest_that_runs_before_the_rings_answer_gets_nothing_newer_first():
    """With activation at STOP (the default) a destination without a ring
    keeps the switch's own learn as the fallback. One with a ring does
    not: the guest's first frame there (QEMU's announce at RESUME) came
    before the ring's release in all 4 moves captured (docs/live-
    migration.rst), and the learned flow delivered newer frames ahead of
    the released ones.
    Until the answer, frames still go to the ring."""
    h, vm = _moving_at_stop()
    assert not any('learn' in str(f.actions)
                   for f in h.fabric.switches['h2'].flows())
    h.fabric.switches['h1'].tap_reads[1] = 0
    h.call(h.ctl.poll_held)
    for n in range(5):
        h.send('h3', 5, payload=_datagram(n))
    h.fabric.packet_outs.clear()
    h.call(h.ctl.moves.source_stopped, vm, 'h1', {'g': 3})
    h.settle()
    doc = _release_sent(h)
    assert doc['after'][-1] == digest(_frame(2)).hex()
    # It runs: its announce goes to the far end, the controller, and (a
    # copy tagged with its slot, priority 7) the ring, which lets frames
    # through on its own if no release follows (host.hold_ring).
    out = h.fabric.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.settle()
    assert [(p.vlan_vid, p.vlan_pcp) for host, port, p in out
            if (host, port) == ('h2', HOLD)] == [(2, 7)]
    got = h.send('h3', 5, payload=_datagram(5))
    assert ('h2', HOLD) in got and ('h2', 2) not in got
    _answer(h, {'op': 'released', 'slot': 2, 'id': doc['id'],
                'found': True, 'delivered': 2, 'held': 6, 'evicted': 0})
    h.settle()
    assert h.send('h3', 5, payload=_datagram(6)) == [('h2', 2)]


def test_a_count_at_stop_past_the_copies_is_released_at_once():
    """The agent says the guest read 8 at STOP; 6 copies have come, the
    rest wait behind the source switch's backlog (stalled here). A ring
    holds those frames after the 6th in order: the release goes at once,
    naming the copies come and skipping the 2 read past them, instead of
    waiting for the copies."""
    h, vm = _moving_at_stop()
    src = h.fabric.switches['h1']
    src.tap_reads[1] = 700
    h.call(h.ctl.poll_held)
    for n in range(10):
        if n < 6:
            h.send('h3', 5, payload=_datagram(n))
        else:
            h.fabric.deliveries('h3', 5, payload=_datagram(n))
    src.stall()
    h.fabric.packet_outs.clear()
    h.call(h.ctl.moves.source_stopped, vm, 'h1', {'g': 708})
    h.settle()
    doc = _release_sent(h)
    assert doc['after'] == [digest(_frame(n)).hex() for n in range(6)]
    assert (doc['skip'], doc['absent']) == (2, 'wait')
    _answer(h, {'op': 'released', 'slot': 2, 'id': doc['id'],
                'found': True, 'delivered': 2, 'held': 10, 'evicted': 0})
    h.settle()
    [m] = h.call(h.ctl.views.migration_views)
    held = m['held']['g']
    assert held['source_reads'] == 'agent at STOP (ahead of its copies)'
    assert held['extrapolated'] == 2 and held['delivered'] == 2


def test_while_it_holds_a_move_the_controller_beats_its_ring_and_stops_after():
    """Every BEAT_EVERY (not every poll) a beat to the destination's ring
    names the slot; none once the release went; none to a host whose
    vw-frame-hold takes no beats (older: it answers with an error)."""
    h, w = _moving()
    h.fabric.packet_outs.clear()
    for _ in range(4):                      # polls 0.05 s apart
        h.call(h.ctl.poll_held)
        h.now += BEAT_EVERY / 2
    beats = [m for m in _messages(h) if m[2]['op'] == 'beat']
    assert [(host, port) for host, port, _ in beats] == [('h2', HOLD)] * 2
    assert {d['slot'] for _, _, d in beats} == {2}
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.settle()
    doc = _release_sent(h)
    _answer(h, {'op': 'released', 'slot': doc['slot'], 'id': doc['id'],
                'found': True, 'delivered': 0, 'held': 0, 'evicted': 0})
    h.settle()
    h.fabric.packet_outs.clear()
    h.now += BEAT_EVERY
    h.call(h.ctl.poll_held)
    assert not [m for m in _messages(h) if m[2]['op'] == 'beat']


def test_a_ring_that_takes_no_beats_gets_none_after_it_says_so():
    h, w = _moving()
    h.call(h.ctl.poll_held)
    _answer(h, {'op': 'error', 'error': "op must be release, drop or "
                                        "close, not 'beat'"})
    h.settle()
    h.fabric.packet_outs.clear()
    h.now += BEAT_EVERY
    h.call(h.ctl.poll_held)
    assert not [m for m in _messages(h) if m[2]['op'] == 'beat']

