"""Activation at the source's STOP (control.migrating.source_stopped),
against the fake fabric: the source's agent says libvirt paused the guest
for the last copy, and delivery moves to the destination then, held
frames first, before the guest has sent anything there; refusals that
change nothing; an abort after it takes delivery back to the source."""
import uuid

import pytest

from virtualwire.core import errors
from virtualwire.testing.harness import Harness


def tables(h):
    return {n: sw.flows() for n, sw in h.fabric.switches.items()}


def _moving(hold=False, activate_at_stop=True):
    """g on h1 wired to f on h3, announced moving to h2, its tap there."""
    h = Harness(hold=hold, activate_at_stop=activate_at_stop)
    h.host('h1', ('g', 1))
    h.host('h2')
    h.host('h3', ('f', 5))
    h.connect('g', 'f')
    vm = str(uuid.uuid4())
    h.call(h.ctl.moves.announce_migration, {
        'vm': 'guest', 'vm_uuid': vm, 'vnics': ['g'], 'destination': 'h2'})
    h.host('h2', ('g', 2))
    return h, vm


def _datagram(n):
    return b'\x45' + n.to_bytes(4, 'big') * 10


def test_the_sources_stop_delivers_on_the_destination_before_any_frame():
    h, vm = _moving()
    assert h.send('h3', 5) == [('h1', 1)]
    view = h.call(h.ctl.moves.source_stopped, vm, 'h1')
    h.settle()
    assert view['state'] == 'prepared'
    # The guest has sent nothing on h2: no packet-in activated it.
    assert h.fabric.switches['h2'].packet_ins == []
    assert h.send('h3', 5) == [('h2', 2)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['activated_by'] == {'g': 'source-stopped'}
    steps = m['steps']['g']
    assert 'source_stopped' in steps and \
        steps['source_stopped'] <= m['activated']['g']
    # The guest's own frame there later changes nothing.
    h.send('h2', 2, payload=b'\0' * 28, eth_type=0x8035)
    assert h.call(h.ctl.views.migration_views)[0]['activated_by'] == {
        'g': 'source-stopped'}


def test_off_it_records_the_stop_and_waits_for_the_guests_frame():
    h, vm = _moving(activate_at_stop=False)
    h.call(h.ctl.moves.source_stopped, vm, 'h1')
    h.settle()
    assert h.send('h3', 5) == [('h1', 1)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['activated'] == {} and 'source_stopped' in m['steps']['g']


def test_held_frames_the_guest_never_read_go_out_at_the_stop():
    """The source read 700 before the copies and 6 of 10 after: the 4 it
    never read go to h2's tap at the stop, in order, ahead of the bundle
    that delivers there."""
    h, vm = _moving(hold=True)
    src = h.fabric.switches['h1']
    src.tap_reads[1] = 700
    h.call(h.ctl.poll_held)
    for n in range(10):
        assert h.send('h3', 5, payload=_datagram(n)) == [('h1', 1)]
    src.tap_reads[1] = 706
    h.fabric.packet_outs.clear()
    dst = h.fabric.switches['h2']
    dst.sent.clear()
    h.call(h.ctl.moves.source_stopped, vm, 'h1')
    h.settle()
    outs = h.fabric.packet_outs
    assert [(sw, port) for sw, port, _ in outs] == [('h2', 2)] * 4
    assert [f[14:] for _, _, f in outs] == [_datagram(n) for n in range(6, 10)]
    kinds = [type(m).__name__ for m in dst.sent]
    assert kinds[:4] == ['OFPPacketOut'] * 4 and 'OFPBundleCtrlMsg' in kinds
    assert h.send('h3', 5, payload=_datagram(10)) == [('h2', 2)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['held']['g']['delivered'] == 4
    assert m['activated_by'] == {'g': 'source-stopped'}


def test_an_abort_after_the_stop_takes_delivery_back_to_the_source():
    h, vm = _moving()
    h.call(h.ctl.moves.source_stopped, vm, 'h1')
    h.settle()
    assert h.send('h3', 5) == [('h2', 2)]
    h.host('h2')                      # the destination QEMU quit
    h.call(h.ctl.moves.migration_released, vm, 'h2')
    assert h.send('h3', 5) == [('h1', 1)]
    assert h.call(h.ctl.views.migration_views)[0]['state'] == 'aborted'


@pytest.mark.parametrize('who, err', [('h2', errors.Conflict),
                                      ('h3', errors.Conflict)])
def test_only_the_guests_source_may_say_it_stopped(who, err):
    """The destination, or a bystander, saying so changes nothing."""
    h, vm = _moving()
    before = tables(h)
    with pytest.raises(err, match='not migrating out of %s' % who):
        h.call(h.ctl.moves.source_stopped, vm, who)
    h.settle()
    assert tables(h) == before
    assert h.call(h.ctl.views.migration_views)[0]['activated'] == {}


def test_a_stop_for_an_unknown_guest_is_not_found():
    h, _vm = _moving()
    with pytest.raises(errors.NotFound):
        h.call(h.ctl.moves.source_stopped, str(uuid.uuid4()), 'h1')
    with pytest.raises(errors.Invalid):
        h.call(h.ctl.moves.source_stopped, 'not-a-uuid', 'h1')


def test_copies_still_on_their_way_at_the_stop_count_before_the_cut():
    """At STOP the source's last copies may reach us after the move has
    activated and before its answer to our read (the connection keeps
    them in order): still counted, else each would put the cut one early
    and deliver a frame the guest read again."""
    h, vm = _moving(hold=True)
    src = h.fabric.switches['h1']
    src.tap_reads[1] = 700
    h.call(h.ctl.poll_held)
    for n in range(6):
        h.send('h3', 5, payload=_datagram(n))
    # Four more reach the source tap; their copies are not read yet.
    for n in range(6, 10):
        h.fabric.deliveries('h3', 5, payload=_datagram(n))
    src.tap_reads[1] = 708                 # it read eight, then stopped
    h.fabric.packet_outs.clear()
    h.loop.call(h.ctl.moves.source_stopped, vm, 'h1')
    h.settle()
    outs = h.fabric.packet_outs
    assert [f[14:] for _, _, f in outs] == [_datagram(8), _datagram(9)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['held']['g']['read_on_source'] == 8


def test_a_holding_destination_learns_delivery_itself_if_no_stop_is_said():
    """With activation at STOP the switch keeps its own learn as the
    fallback: the guest's first frame there switches delivery with no
    controller (stopped, unreachable), as without held frames; a move
    activated by it says its held frames came behind newer ones."""
    h, vm = _moving(hold=True)
    flows = h.fabric.switches['h2'].flows()
    assert any('learn' in str(f.actions) for f in flows)
    h.send('h3', 5, payload=_datagram(1))
    h.send('h2', 2, payload=b'\0' * 28, eth_type=0x8035)
    [m] = h.call(h.ctl.views.migration_views)
    assert m['activated_by'] == {'g': 'rarp'}
    assert m['held']['g']['after_switch_learned'] is True


def test_without_activation_at_stop_only_the_controller_switches():
    h, _vm = _moving(hold=True, activate_at_stop=False)
    flows = h.fabric.switches['h2'].flows()
    assert not any('learn' in str(f.actions) for f in flows)


def _held_stop(h, vm, reads, sent=10, copied=10):
    """The source read 700 before the copies; `sent` frames reached its
    tap, the first `copied` with their copies here; the source switch is
    then too busy to answer. The agent says the STOP with `reads`."""
    src = h.fabric.switches['h1']
    src.tap_reads[1] = 700
    h.call(h.ctl.poll_held)
    for n in range(sent):
        if n < copied:
            h.send('h3', 5, payload=_datagram(n))
        else:
            h.fabric.deliveries('h3', 5, payload=_datagram(n))
    src.stall()
    h.fabric.packet_outs.clear()
    h.call(h.ctl.moves.source_stopped, vm, 'h1', {'g': reads})
    h.settle()
    return src


def test_the_agents_count_at_stop_places_the_cut_with_no_switch_answer():
    """A source switch too busy to answer (two cores, three TCG guests:
    0.2 s and more): the count its agent read at STOP places the cut at
    once, the same frames as the switch's count would."""
    h, vm = _moving(hold=True)
    _held_stop(h, vm, 706)
    outs = h.fabric.packet_outs
    assert [f[14:] for _, _, f in outs] == [_datagram(n) for n in range(6, 10)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['held']['g']['source_reads'] == 'agent at STOP'
    assert m['held']['g']['read_on_source'] == 6


def test_a_count_past_the_copies_here_waits_for_them_then_cuts():
    """The guest read 8; 6 copies had come when the agent said so (the
    rest still in the source switch's connection): the switch's answer
    would bring them; it does not come in READ_WAIT; the agent's count
    places the cut among the copies come since."""
    h, vm = _moving(hold=True)
    _held_stop(h, vm, 708, copied=6)
    assert h.fabric.packet_outs == []          # waits for the switch
    h.tick(0.25)
    outs = h.fabric.packet_outs
    assert [f[14:] for _, _, f in outs] == [_datagram(8), _datagram(9)]
    [m] = h.call(h.ctl.views.migration_views)
    held = m['held']['g']
    assert held['source_reads'] == 'agent at STOP (switch: timeout)'
    assert held['read_on_source'] == 8


def test_the_lower_of_the_agents_and_the_switchs_count_is_the_guests():
    """QEMU reads a frame or two after STOP and keeps them (it never
    hands them to the stopped guest): the switch, asked later, counts
    them; the agent, at once, did not. The lower count goes."""
    h, vm = _moving(hold=True)
    src = _held_stop(h, vm, 708, copied=6)
    src.tap_reads[1] = 709
    src.catch_up()
    h.settle()
    outs = h.fabric.packet_outs
    assert [f[14:] for _, _, f in outs] == [_datagram(8), _datagram(9)]
    [m] = h.call(h.ctl.views.migration_views)
    assert m['held']['g']['source_reads'] == \
        'agent at STOP (switch: answered)'


@pytest.mark.parametrize('reads, err', [
    ({'other': 5}, 'not vNICs of this migration: other'),
    ({'g': -1}, 'integer from 0'),
    ({'g': True}, 'integer from 0'),
    ([5], 'at most 64'),
])
def test_bad_counts_are_refused_and_change_nothing(reads, err):
    from virtualwire.api.rest_departures import parse_reads
    h, vm = _moving(hold=True)
    before = tables(h)
    with pytest.raises(errors.Invalid, match=err):
        h.call(h.ctl.moves.source_stopped, vm, 'h1', parse_reads(reads))
    h.settle()
    assert tables(h) == before
    assert h.call(h.ctl.views.migration_views)[0]['activated'] == {}
