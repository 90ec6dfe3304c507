"""Live migration in the controller, against the fake fabric that consumes
the real OpenFlow messages it sends: activation in the switch on the
guest's first frame, the records of each step, the cleanup's order and
timing, aborts, and the last-resort activations."""
import time
import uuid

import pytest

from virtualwire.core import errors
from virtualwire.control.holding import READ_WAIT
from virtualwire.control.lag_guard import BEHIND, FAR_BEHIND
from virtualwire.core.model import Encap, Host, VnicPort
from virtualwire.testing.harness import TUN, Harness

RARP = 0x8035
_MAC = bytes.fromhex('020000000001')
_IP = bytes([10, 0, 0, 1])
# A guest's possible first frames on its destination: (eth_type, payload,
# the trigger the migration record names).
FIRST_FRAMES = {
    'rarp': (RARP, b'\0' * 28, 'rarp'),
    'garp': (0x0806, bytes.fromhex('000108000604') + b'\0\1' + _MAC + _IP
             + b'\0' * 6 + _IP, 'garp'),
    'ipv6-na': (0x86dd, bytes.fromhex('6000000000203aff') + b'\0' * 32
                + bytes([136, 0]) + b'\0' * 30, 'ipv6-na'),
    'data': (0x0800, b'\x45' + b'\0' * 40, 'ipv4'),
}


def tables(h):
    return {n: sw.flows() for n, sw in h.fabric.switches.items()}


def _migrating(move_timeout=900.0):
    """g on h1 wired to f on h3; the hook announces g's guest moving to h2."""
    h = Harness(move_timeout=move_timeout)
    h.host('h1', ('g', 1))
    h.host('h2')
    h.host('h3', ('f', 5))
    w = h.connect('g', 'f')
    vm = str(uuid.uuid4())
    view, ticket = h.call(h.ctl.moves.announce_migration, {
        'vm': 'guest', 'vm_uuid': vm, 'vnics': ['g'], 'destination': 'h2'})
    assert ticket.done() and view['state'] == 'prepared'
    return h, w, vm


@pytest.mark.parametrize('first', FIRST_FRAMES.values(),
                         ids=list(FIRST_FRAMES))
def test_migration_activates_in_the_switch_on_the_first_frame(first):
    eth_type, payload, trigger = first
    h, w, vm = _migrating()
    plain = tables(h)
    h.host('h2', ('g', 2))                         # destination tap plugged
    assert h.send('h3', 5) == [('h1', 1)]          # paused copy gets nothing
    moving = h.call(h.ctl.views.wire_view, w['id'])['moving']
    assert moving == {'g': {'source': 'h1', 'destination': 'h2',
                            'activated': False}}
    # The guest's first frame on h2, whatever its kind, goes on to the far
    # end; the switch learns delivery itself and tells the controller,
    # which cleans up.
    assert h.send('h2', 2, payload=payload, eth_type=eth_type) == [('h3', 5)]
    assert h.send('h3', 5) == [('h2', 2)]
    assert h.call(h.ctl.views.wire_view, w['id'])['moving']['g']['activated']
    h.host('h1')                                   # source port goes
    assert h.send('h3', 5) == [('h2', 2)]
    assert h.call(h.ctl.views.wire_view, w['id'])['moving'] == {}
    assert tables(h)['h1'] == plain['h1'] - {
        f for f in plain['h1'] if f.cookie & 0xFFFFFFFF}
    h.call(h.ctl.moves.migration_released, vm, 'h1')
    [m] = h.call(h.ctl.views.migration_views)
    assert m['state'] == 'completed' and set(m['activated']) == {'g'}
    assert m['activated_by'] == {'g': trigger}
    assert h.runtime.migration_rows[m['id']]['activated_by'] == {'g': trigger}


def test_a_migration_records_each_step_of_its_timeline_in_order():
    """What the dashboard draws: announced, the destination tap appeared,
    the guest's first frame activated it, the other switches confirmed
    their new flows (h1 stops receiving, h3 sends to h2 only), the source
    port left."""
    h, w, vm = _migrating()
    [m] = h.call(h.ctl.views.migration_views)
    assert m['steps'] == {}
    h.host('h2', ('g', 2))
    h.settle()
    [m] = h.call(h.ctl.views.migration_views)
    assert list(m['steps']['g']) == ['tap_appeared']
    h.send('h2', 2, payload=b'x' * 46, eth_type=0x8035)
    h.settle()
    [m] = h.call(h.ctl.views.migration_views)
    assert list(m['steps']['g']) == ['tap_appeared', 'sisters_moved']
    assert m['sisters'] == {'g': ['h1', 'h3']}
    h.host('h1')
    h.call(h.ctl.moves.migration_released, vm, 'h1')
    [m] = h.call(h.ctl.views.migration_views)
    steps = m['steps']['g']
    assert list(steps) == ['tap_appeared', 'sisters_moved', 'source_left']
    order = [m['started_at'], steps['tap_appeared'], m['activated']['g'],
             steps['sisters_moved'], steps['source_left']]
    assert order == sorted(order), order
    assert h.runtime.migration_rows[m['id']]['steps'] == m['steps']


def test_an_activated_destination_gets_its_bundle_before_the_sisters():
    h, w, vm = _migrating()
    h.host('h2', ('g', 2))
    h.settle()
    log = h.fabric.commit_log
    log.clear()
    h.send('h2', 2, payload=b'x' * 46, eth_type=0x8035)
    assert log[0] == 'h2' and set(log) == {'h1', 'h2', 'h3'}, log


def test_cleanup_after_an_activation_waits_for_the_settle_time():
    """The switch's learn has switched delivery over by itself; the
    controller's bundles (which stop a userspace switch's traffic for a
    moment) wait activation_settle, and a second vNIC activated meanwhile
    joins the same sync."""
    h = Harness()
    h.ctl.moves.activation_settle = 0.02
    h.host('h1', ('g', 1), ('g2', 3))
    h.host('h2')
    h.host('h3', ('f', 5), ('f2', 6))
    w = h.connect('g', 'f')
    h.connect('g2', 'f2')
    h.call(h.ctl.moves.announce_migration, {
        'vm': 'guest', 'vm_uuid': str(uuid.uuid4()), 'vnics': ['g', 'g2'],
        'destination': 'h2'})
    h.host('h2', ('g', 2), ('g2', 4))
    log = h.fabric.commit_log
    log.clear()
    h.send('h2', 2, payload=b'x' * 46, eth_type=0x8035)
    h.now += 0.01
    h.send('h2', 4, payload=b'x' * 46, eth_type=0x8035)
    assert log == []
    assert h.call(h.ctl.views.wire_view, w['id'])['moving']['g']['activated']
    # Delivery is the switch's own (learned) meanwhile.
    assert ('h2', 2) in h.send('h3', 5)
    assert ('h2', 4) in h.send('h3', 6)
    h.tick(0.011)
    assert log[0] == 'h2' and sorted(log) == ['h1', 'h2', 'h3'], log
    assert h.send('h3', 5) == [('h2', 2)]
    assert h.send('h3', 6) == [('h2', 4)]


@pytest.mark.parametrize('same_guest', [True, False])
def test_a_guests_first_frame_switches_all_its_vnics_over(same_guest):
    """The first frame on any of a guest's destination ports proves the
    whole guest runs there: the switch learns delivery for all its moving
    vNICs at once (one OVS revalidation pass, not one per vNIC, each at
    most every 5 ms). vNICs of different guests stay apart."""
    h = Harness()
    vm2 = 'guest-a' if same_guest else 'guest-b'
    h.host('h1', ('g', 1), ('g2', 3), vm='guest-a')
    h.host('h2')
    h.host('h3', ('f', 5), ('f2', 6))
    h.connect('g', 'f')
    w2 = h.connect('g2', 'f2')
    h.call(h.ctl.moves.announce_migration, {
        'vm': 'guest', 'vm_uuid': str(uuid.uuid4()), 'vnics': ['g', 'g2'],
        'destination': 'h2'})
    h.ctl.moves.activation_settle = 1.0       # only the switch acts meanwhile
    ports = [VnicPort('g', 'vnet2', 2, vm_id='guest-a'),
             VnicPort('g2', 'vnet4', 4, vm_id=vm2)]
    h.loop.post(h.ctl.on_hosts, 'tcp:h2', [Host(
        'h2', 2, (Encap('gre', h.ip('h2'), TUN),), vnics=tuple(ports))])
    h.settle()
    assert h.send('h3', 6) == [('h1', 3)]          # held on h2
    h.send('h2', 2, payload=b'x' * 46, eth_type=0x8035)   # g's RARP only
    assert sorted(h.send('h3', 5)) == [('h1', 1), ('h2', 2)]
    # The switch learned g2's delivery with g's frame (same guest) ...
    assert sorted(h.send('h3', 6)) == ([('h1', 3), ('h2', 4)] if same_guest
                                       else [('h1', 3)])
    # ... and the controller knows: g2 activated by its sibling's frame.
    view = h.call(h.ctl.views.wire_view, w2['id'])['moving']['g2']
    assert bool(view['activated']) is same_guest, view
    by = h.call(h.ctl.views.migration_views)[0]['activated_by']
    assert by == ({'g': 'rarp', 'g2': 'sibling-frame'} if same_guest
                  else {'g': 'rarp'}), by
    # The cleanup keeps it so: g2 to its destination only, or still held.
    h.tick(1.1)
    assert h.send('h3', 6) == ([('h2', 4)] if same_guest else [('h1', 3)])


def test_an_aborted_move_says_its_destination_left():
    h, w, vm = _migrating()
    h.host('h2', ('g', 2))
    h.host('h2')
    h.call(h.ctl.moves.migration_released, vm, 'h2')
    [m] = h.call(h.ctl.views.migration_views)
    assert list(m['steps']['g']) == ['tap_appeared', 'destination_left']
    assert 'sisters_moved' not in m['steps']['g']


def test_a_silent_guest_is_activated_by_its_sources_release_hook():
    """The last resort when the guest sends nothing on its destination (a
    QEMU whose announce sends nothing, a guest that disabled it): the
    source's libvirt hook says the guest left it."""
    h, w, vm = _migrating()
    h.host('h2', ('g', 2))
    assert h.send('h3', 5) == [('h1', 1)]
    h.call(h.ctl.moves.migration_released, vm, 'h1')
    assert h.send('h3', 5) == [('h2', 2)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['activated_by'] == {'g': 'release-hook'}
    assert h.fabric.switches['h2'].packet_ins == []


def test_a_silent_unannounced_guest_is_activated_when_its_source_leaves():
    """No hook reached the controller and the guest sent nothing: the
    source port leaving OVSDB ends the move, and the record says so."""
    h = Harness()
    h.host('h1', ('g', 1))
    h.host('h3', ('f', 5))
    h.connect('g', 'f')
    h.host('h2', ('g', 2))                         # seen in OVSDB only
    assert h.send('h3', 5) == [('h1', 1)]
    h.host('h1')
    assert h.send('h3', 5) == [('h2', 2)]
    [m] = h.call(h.ctl.views.migration_views)
    assert (m['found_by'], m['state']) == ('ovsdb', 'completed')
    assert m['activated_by'] == {'g': 'source-left'}


def test_aborted_migration_restores_the_exact_flows():
    h, w, vm = _migrating()
    before = tables(h)
    h.host('h2', ('g', 2))
    assert tables(h) != before
    h.host('h2')                                   # domjobabort: tap goes
    assert tables(h) == before
    assert h.send('h3', 5) == [('h1', 1)]
    h.call(h.ctl.moves.migration_released, vm, 'h2')
    assert h.call(h.ctl.views.migration_views)[0]['state'] == 'aborted'


def test_move_not_activated_in_time_goes_back_to_the_source():
    h, w, vm = _migrating(move_timeout=3)
    before = tables(h)
    h.host('h2', ('g', 2))
    h.tick(1)
    assert tables(h) != before
    h.tick(5)
    assert tables(h) == before                     # tap still plugged
    assert h.send('h3', 5) == [('h1', 1)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['state'] == 'timed-out'


def test_released_for_an_unknown_guest_is_not_found():
    h = Harness()
    with pytest.raises(errors.NotFound):
        h.call(h.ctl.moves.migration_released, str(uuid.uuid4()), 'h1')
    with pytest.raises(errors.Invalid):
        h.call(h.ctl.moves.migration_released, ' 5', 'h1')


def test_restart_mid_migration_reads_the_activation_from_the_switch():
    h, w, vm = _migrating()
    h.host('h2', ('g', 2))
    # The controller is gone when the guest's first frame arrives: the
    # switch activates by itself.
    h.fabric.deliveries('h2', 2, eth_type=RARP)
    h.fabric.inbox.clear()                         # nobody listening
    # Delivery switched in the switch (the far end still sends to both,
    # and the source's paused or gone guest is no one's concern).
    assert h.fabric.deliveries('h3', 5) == [('h1', 1), ('h2', 2)]
    n = Harness(intent=h.intent, runtime=h.runtime, fabric=h.fabric)
    for name in ('h1', 'h2', 'h3'):
        n.reconnect(name)
    n.host('h1', ('g', 1), connect=False)
    n.host('h2', ('g', 2), connect=False)
    n.host('h3', ('f', 5), connect=False)
    assert n.call(n.ctl.views.wire_view, w['id'])['moving']['g']['activated']
    assert n.send('h3', 5) == [('h2', 2)]
    [m] = n.call(n.ctl.views.migration_views)
    assert m['activated_by'] == {'g': 'found-in-table'}


def _holding(hold_frames=64, default=True, asked=None, hold_rate=5000):
    h = Harness(hold=default, hold_frames=hold_frames, hold_rate=hold_rate)
    h.host('h1', ('g', 1))
    h.host('h2')
    h.host('h3', ('f', 5))
    w = h.connect('g', 'f')
    vm = str(uuid.uuid4())
    doc = {'vm': 'guest', 'vm_uuid': vm, 'vnics': ['g'], 'destination': 'h2'}
    if asked is not None:
        doc['hold'] = asked
    h.call(h.ctl.moves.announce_migration, doc)
    h.host('h2', ('g', 2))
    return h, w, vm


def _datagram(n):
    return b'\x45' + n.to_bytes(4, 'big') * 10


def _sent_and_read(h, before, sent, read):
    """The source tap has read `before`; `sent` datagrams go to the moving
    guest (copied on the source, held on the destination), of which it
    reads `read`, then stops; both counts polled. Returns the source."""
    src = h.fabric.switches['h1']
    src.tap_reads[1] = before
    h.call(h.ctl.poll_held)
    for n in range(sent):
        h.send('h3', 5, payload=_datagram(n))
    src.tap_reads[1] = before + read
    h.call(h.ctl.poll_held)
    return src


def test_held_frames_the_guest_never_read_reach_it_first_in_order():
    h, w, vm = _holding()
    src = h.fabric.switches['h1']
    src.tap_reads[1] = 700                 # the source tap, guest caught up
    src.tap_drops[1] = 3                   # its queue overflowed before
    h.call(h.ctl.poll_held)
    for n in range(10):
        # The source guest gets each frame; the destination holds its copy.
        assert h.send('h3', 5, payload=_datagram(n)) == [('h1', 1)]
    src.tap_reads[1] = 706                 # it read six, then stopped
    src.tap_drops[1] = 5                   # and its queue overflowed twice
    h.fabric.packet_outs.clear()
    dst = h.fabric.switches['h2']
    dst.sent.clear()
    assert h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP) == [('h3', 5)]
    h.settle()
    outs = h.fabric.packet_outs
    assert [(sw, port) for sw, port, _ in outs] == [('h2', 2)] * 4
    assert [f[14:] for _, _, f in outs] == [_datagram(n) for n in range(6, 10)]
    # Out before the bundle that starts delivering: nothing overtakes them.
    kinds = [type(m).__name__ for m in dst.sent]
    assert kinds[:4] == ['OFPPacketOut'] * 4 and 'OFPBundleCtrlMsg' in kinds
    assert h.send('h3', 5, payload=_datagram(10)) == [('h2', 2)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['held']['g'] == {'delivered': 4, 'held': 10, 'read_on_source': 6,
                              'evicted': 0, 'skipped': 0, 'aligned': True,
                              'source_reads': 'answered',
                              # STOP lay among the ten copies since the
                              # poll before; the tap dropped two meanwhile,
                              # which no poll since the first copy places.
                              'stop_window': 10, 'source_dropped': 2,
                              'drops_placed': 0, 'drops_unplaced': 2,
                              'pending': 0, 'withheld': 0, 'extrapolated': 0,
                              'count_unplaced': 0, 'source_behind_ms': 0}


def test_a_flood_while_the_guest_is_paused_is_cut_at_the_bound_and_counted():
    h, w, vm = _holding(hold_frames=8)
    src = h.fabric.switches['h1']
    src.tap_reads[1] = 0
    h.call(h.ctl.poll_held)
    for n in range(30):
        h.send('h3', 5, payload=_datagram(n))
    src.tap_reads[1] = 2
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.settle()
    assert [f[14:] for _, _, f in h.fabric.packet_outs] == \
        [_datagram(n) for n in range(22, 30)]
    [m] = h.call(h.ctl.views.migration_views)
    assert (m['held']['g']['delivered'], m['held']['g']['evicted']) == (8, 20)


def test_a_flow_faster_than_the_hold_rate_is_no_longer_held():
    h, w, vm = _holding(hold_rate=100)
    h.fabric.switches['h1'].tap_reads[1] = 0
    h.call(h.ctl.poll_held)
    for n in range(5):                      # 50/s: held
        h.send('h3', 5, payload=_datagram(n))
    h.now += 0.1
    h.call(h.ctl.poll_held)
    assert h.ctl.holding.holding and not h.ctl.shared.stats['held_abandoned']
    for n in range(30):                     # 300/s: too fast
        h.send('h3', 5, payload=_datagram(n))
    h.now += 0.1
    h.call(h.ctl.poll_held)
    h.settle()
    # Back to what --hold off does: the destination drops, the source does
    # not copy, the switch's learn activates.
    h.fabric.packet_in_log.clear()
    assert h.send('h3', 5, payload=_datagram(99)) == [('h1', 1)]
    h.settle()
    assert not h.fabric.packet_in_log
    assert any(a[0] == 'learn' for f in tables(h)['h2'] for a in f.actions)
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.settle()
    assert not h.fabric.packet_outs
    assert h.send('h3', 5, payload=_datagram(100)) == [('h2', 2)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['held']['g'].pop('abandoned_at') >= time.time() - 60
    assert m['held']['g'] == {
        'abandoned': '300 frames/s, above --hold-rate 100'}
    assert h.ctl.shared.stats['held_abandoned'] == 1


def _two_held():
    """Two guests on h1, each with one vNIC wired to h3, moving to h2
    together, held."""
    h = Harness(hold=True)
    h.host('h1', ('g', 1), ('k', 3))
    h.host('h2')
    h.host('h3', ('f', 5), ('e', 6))
    h.connect('g', 'f')
    h.connect('k', 'e')
    for name, vnic in (('guest', 'g'), ('other', 'k')):
        h.call(h.ctl.moves.announce_migration, {
            'vm': name, 'vm_uuid': str(uuid.uuid4()), 'vnics': [vnic],
            'destination': 'h2'})
    h.host('h2', ('g', 2), ('k', 4))
    h.fabric.switches['h1'].tap_reads.update({1: 0, 3: 0})
    return h


def _held_views(h):
    """{vNIC: its held record}, without when it was let go (wall time)."""
    return {v: {k: x for k, x in held.items() if k != 'abandoned_at'}
            for m in h.call(h.ctl.views.migration_views)
            for v, held in (m['held'] or {}).items()}


def test_behind_its_switches_the_controller_stops_holding_the_newest():
    h = _two_held()
    h.loop.call(h.ctl.poll_held)       # both sources' taps asked
    h.now += BEHIND + 0.1              # the answers come behind packet-ins
    h.settle()
    # The newest move stops holding (once: the older's answer was asked
    # before), the oldest goes on.
    assert set(h.ctl.holding.holding) == {'g'}
    assert _held_views(h) == {'k': {'abandoned': (
        "the controller ran 600 ms behind its switches' packet-ins, "
        'holding 2 vNICs')}}
    assert h.ctl.shared.stats['held_abandoned'] == 1
    # k's frames are no longer sent to us; g's still are.
    h.fabric.packet_in_log.clear()
    h.send('h3', 6, payload=_datagram(1))
    assert not h.fabric.packet_in_log
    h.send('h3', 5, payload=_datagram(2))
    assert h.fabric.packet_in_log
    # Behind again, alone: the last held vNIC keeps holding; far behind,
    # it stops too.
    h.loop.call(h.ctl.poll_held)
    h.now += BEHIND + 0.1
    h.settle()
    assert set(h.ctl.holding.holding) == {'g'}
    h.loop.call(h.ctl.poll_held)
    h.now += FAR_BEHIND + 0.1
    h.settle()
    assert not h.ctl.holding.holding
    assert _held_views(h)['g']['abandoned'].startswith(
        'the controller ran %d ms behind' % round(
            (FAR_BEHIND + 0.1) * 1e3))


def test_a_poll_unanswered_too_long_sheds_before_its_answer_comes():
    h = _two_held()
    h.loop.call(h.ctl.poll_held)       # asked; the answers are queued
    h.now += BEHIND + 0.1
    h.loop.call(h.ctl.poll_held)       # the next tick: none came yet
    assert set(h.ctl.holding.holding) == {'g'}
    assert _held_views(h)['k']['abandoned'].startswith(
        'the controller ran 600 ms behind')
    h.settle()
    assert set(h.ctl.holding.holding) == {'g'}


def test_keeping_up_every_vnic_stays_held_and_the_record_says_the_lag():
    h = _two_held()
    h.loop.call(h.ctl.poll_held)
    h.now += BEHIND - 0.1
    h.settle()
    assert set(h.ctl.holding.holding) == {'g', 'k'}
    h.send('h3', 5, payload=_datagram(1))
    h.fabric.switches['h1'].tap_reads[1] = 1
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.settle()
    assert _held_views(h)['g']['source_behind_ms'] == 400


def test_without_an_answer_from_the_source_everything_held_goes():
    h, w, vm = _holding()
    h.call(h.ctl.poll_held)               # no reads known: no base
    for n in range(3):
        h.send('h3', 5, payload=_datagram(n))
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.settle()
    assert len(h.fabric.packet_outs) == 3
    [m] = h.call(h.ctl.views.migration_views)
    assert m['held']['g']['aligned'] is False


def test_holding_moves_send_the_destinations_frames_to_the_controller():
    h, w, vm = _holding()
    h.send('h3', 5, payload=_datagram(1))
    ins = {(dp.name, m.match['in_port'], len(m.data))
           for dp, m in h.fabric.packet_in_log}
    # The destination's whole frame; the source's copy, cut short.
    assert ('h2', TUN, 14 + len(_datagram(1))) in ins
    assert any(n == 'h1' and size <= 128 for n, _p, size in ins)


@pytest.mark.parametrize('default,asked,holds', [
    (False, True, True), (True, False, False), (True, None, True),
    (False, None, False)])
def test_a_migration_asks_to_hold_or_not_over_the_default(
        default, asked, holds):
    h, w, vm = _holding(default=default, asked=asked)
    h.send('h3', 5, payload=_datagram(1))
    h.settle()
    got = {dp.name for dp, _m in h.fabric.packet_in_log}
    assert (got == {'h1', 'h2'}) == holds and (not got) == (not holds)
    [m] = h.call(h.ctl.views.migration_views)
    assert m['hold'] == asked
    # Without holding, the switch activates itself (learn), as before.
    learns = any('NXActionLearn' in str(f) or f.actions and
                 any(a[0] == 'learn' for a in f.actions)
                 for f in tables(h)['h2'])
    assert learns != holds


def test_hold_must_be_true_or_false():
    h = Harness()
    h.host('h1', ('g', 1))
    h.host('h2')
    with pytest.raises(errors.Invalid, match='hold must be true or false'):
        h.call(h.ctl.moves.announce_migration, {
            'vm': 'guest', 'vm_uuid': str(uuid.uuid4()), 'vnics': ['g'],
            'destination': 'h2', 'hold': 'yes'})


@pytest.mark.parametrize('gone,why', [
    ('port', 'last-poll (no answer)'),
    # OVS still lists the port but reports all ones ('unavailable') for
    # every counter: read as a count it put the cut past every copy (241
    # datagrams lost in bench/results/held_frames-run2.json, moves 8, 9).
    ('counters', 'last-poll (tap gone)')])
def test_a_source_gone_before_activation_is_read_from_its_last_poll(
        gone, why):
    h, w, vm = _holding()
    src = _sent_and_read(h, 50, 6, 4)      # read four, then stopped
    if gone == 'port':                     # its tap gone (QEMU quit)
        del src.tap_reads[1]
    else:
        src.tap_reads[1] = src.tap_drops[1] = (1 << 64) - 1
        h.call(h.ctl.poll_held)            # a poll once it went: no count
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.settle()
    assert [f[14:] for _, _, f in h.fabric.packet_outs] == \
        [_datagram(4), _datagram(5)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['held']['g']['source_reads'] == why
    assert m['held']['g']['source_dropped'] == 0


def test_the_fast_poll_runs_only_while_a_move_holds_something():
    h, w, vm = _holding()
    assert not h.ctl.holding.polls_wanted           # the timer posts nothing yet
    h.send('h3', 5, payload=_datagram(1))
    h.settle()
    assert h.ctl.holding.polls_wanted               # a copy arrived: read the source
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.host('h1')                            # the source port goes
    h.call(h.ctl.poll_held)
    assert not h.ctl.holding.polls_wanted and not h.ctl.holding.holding


def test_frames_the_destination_still_hands_us_after_the_move_are_delivered():
    # migration-held-run4, move 12: the destination's switch took our
    # bundle only ~450 ms after the guest's first frame; meanwhile its
    # source QEMU quit and the move ended, and the frames that switch
    # still sent us (its held flows) were dropped: 165 lost a stream.
    h, w, vm = _holding()
    dst = h.fabric.switches['h2']
    _sent_and_read(h, 10, 3, 2)             # read two, then stopped
    dst.stall()                             # busy: takes nothing from us
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.send('h3', 5, payload=_datagram(3))   # activated, not yet in place
    h.host('h1')                            # the source QEMU quits
    h.tick(0.05)
    h.call(h.ctl.poll_held)                 # the move is over
    assert not h.ctl.tables.placement.moves
    for n in range(4, 7):
        h.send('h3', 5, payload=_datagram(n))
    # The guest's own frame, sent on by the flow that saw its first: not
    # handed back to it.
    assert h.send('h2', 2, payload=b'from the guest') == [('h3', 5)]
    dst.catch_up()
    h.settle()
    assert [(sw, port, f[14:]) for sw, port, f in h.fabric.packet_outs] == \
        [('h2', 2, _datagram(n)) for n in range(2, 7)]
    assert not h.ctl.shared.stats['held_late_dropped']
    assert h.send('h3', 5, payload=_datagram(7)) == [('h2', 2)]


def test_frames_arriving_while_the_source_is_read_are_kept_if_the_move_ends():
    h, w, vm = _holding()
    src = _sent_and_read(h, 10, 1, 0)       # the guest stopped before it
    src.stall()                             # its reads will not come
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.send('h3', 5, payload=_datagram(1))
    h.host('h1')                            # its QEMU quits: move over
    assert not h.ctl.tables.placement.moves
    h.send('h3', 5, payload=_datagram(2))
    h.tick(0.25)                            # past READ_WAIT: all go
    assert [(sw, port, f[14:]) for sw, port, f in h.fabric.packet_outs] == \
        [('h2', 2, _datagram(n)) for n in range(3)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['held']['g']['source_reads'] == 'last-poll (timeout)'


def test_a_poll_lost_with_its_connection_is_not_a_lag():
    """The source's switch connected again while a poll was out: that
    answer never comes, and its age is no measure of how far behind the
    controller runs (it would stop holding every vNIC in 2 s)."""
    h = _two_held()
    h.loop.call(h.ctl.poll_held)         # both asked
    old = h.ctl.shared.session_of('h1')
    h.loop.post(h.ctl.on_switch_up, h.fabric.switches['h1'])
    h.loop.call(lambda: None)
    assert h.ctl.shared.session_of('h1') is not old
    h.now += FAR_BEHIND + 0.1
    h.loop.call(h.ctl.poll_held)
    assert set(h.ctl.holding.holding) == {'g', 'k'}
    assert all('abandoned' not in v for v in _held_views(h).values())


def test_held_frames_go_when_the_source_leaves_before_the_guest_speaks():
    """The guest's first frame on its destination never reached us (its
    switch dropped the packet-in, its queue full of held frames): the
    move ends when the source leaves, and what was held still goes, and
    is recorded (it was dropped unsaid, and the held test waited for a
    record that never came)."""
    h, w, vm = _holding()
    _sent_and_read(h, 100, 10, 6)
    h.fabric.packet_outs.clear()
    h.host('h1')                          # the source port goes
    h.settle()
    assert [(sw, port) for sw, port, _ in h.fabric.packet_outs] == \
        [('h2', 2)] * 4
    [m] = h.call(h.ctl.views.migration_views)
    assert m['activated_by'] == {'g': 'source-left'}
    assert m['held']['g']['delivered'] == 4


def test_a_count_that_cannot_come_in_time_lets_the_move_go_on_unheld():
    """The source's polls came back 300 ms late: when its count at
    activation does not come within READ_WAIT, the last poll answered
    may predate STOP, and a cut from it would go wrong (a flood move 571
    ms behind lost 80 beyond the bound). Nothing held goes; the move
    goes on as without holding, and the record says why."""
    h, w, vm = _holding()
    src = h.fabric.switches['h1']
    src.tap_reads[1] = 100
    h.loop.call(h.ctl.poll_held)          # asked
    h.now += READ_WAIT + 0.1              # answered 300 ms later
    h.settle()
    for n in range(5):
        h.send('h3', 5, payload=_datagram(n))
    src.stalled = []                      # the next answers do not come
    h.fabric.packet_outs.clear()
    h.send('h2', 2, payload=b'\0' * 28, eth_type=RARP)
    h.now += READ_WAIT + 0.01
    h.call(h.ctl.poll_held)
    assert not h.fabric.packet_outs
    why = _held_views(h)['g']['abandoned']
    assert why.startswith("its source's count did not come in time: the "
                          'controller ran 300 ms behind'), why
