"""A wire whose end live-migrates, on a fake fabric: where each frame lands
before the guest's first frame on its destination, when the switch itself
activates the destination on that frame (whatever its kind), and after
the controller cleans up."""
import pytest

from virtualwire.pipeline import flow as pf
from virtualwire.pipeline import wire as fl
from virtualwire.pipeline.incremental import IncrementalTables
from virtualwire.testing.fakeswitch import FakeFabric
from virtualwire.core.placement import MoveEnded, MoveSeen
from virtualwire.core.model import Encap, Host, Move, VnicPort, Wire
from virtualwire.core.world import World

TUN = 65000
IPS = {'h1': '198.19.0.11', 'h2': '198.19.0.12', 'h3': '198.19.0.13'}
RARP = 0x8035
# What a guest may send first on its destination: QEMU's announce, the
# guest's own gratuitous ARP or IPv6 NA, data, or anything else.
FIRST_FRAMES = {'rarp': RARP, 'arp': 0x0806, 'ipv6': 0x86dd, 'ipv4': 0x0800,
                'lldp': 0x88cc}


def host(name, *vnics):
    return Host(name=name, dpid=int(name[1:]), encaps=(Encap('gre', IPS[name], TUN),),
                vnics=tuple(VnicPort(v, 'vnet%d' % p, p) for v, p in vnics))


def world(placement, move=None, activated=False):
    """placement: {host: [(vnic, ofport)]}; the wire is g <-> f; `move`
    is (source, destination) of g."""
    hosts = {n: host(n, *placement.get(n, ())) for n in IPS}
    moves = {'g': Move(move[0], move[1], activated)} if move else {}
    return World(wires={7: Wire(7, 'g', 'f')}, hosts=hosts, moves=moves)


def fabric():
    fab = FakeFabric()
    for n, ip in IPS.items():
        fab.add(n, int(n[1:]), {TUN: ip})
    return fab


def sync(fab, w):
    """What the engine does: diff each switch's real table (which may hold
    learned flows) against the desired one."""
    desired = fl.compute_flows(w)
    for name, sw in fab.switches.items():
        sw.apply(pf.diff_flows(sw.flows(), desired[name]))


# (far end host, source, destination) for g moving h1 -> h2:
CASES = {
    'far end on a third host': 'h3',
    'far end beside the source (collapsed before)': 'h1',
    'far end beside the destination (collapsed after)': 'h2',
}


@pytest.mark.parametrize('first', FIRST_FRAMES.values(),
                         ids=list(FIRST_FRAMES))
@pytest.mark.parametrize('far', CASES.values(), ids=list(CASES))
def test_switchover_happens_in_the_switch_at_the_guests_first_frame(
        far, first):
    fab = fabric()
    before = {'h1': [('g', 1)]}
    before.setdefault(far, []).append(('f', 5))
    sync(fab, world(before))
    assert fab.deliveries(far, 5) == [('h1', 1)]

    # The destination tap appears (guest paused there): the far end sends
    # to both hosts, the destination drops until activation.
    during = {k: list(v) for k, v in before.items()}
    during.setdefault('h2', []).append(('g', 2))
    sync(fab, world(during, ('h1', 'h2')))
    assert fab.deliveries(far, 5) == [('h1', 1)]
    assert fab.deliveries('h1', 1) == [(far, 5)]
    assert fab.switches['h2'].packet_ins == []

    # The guest's first frame on the destination, whatever it is, goes to
    # the far end; the switch learns delivery there and tells the
    # controller; nothing else changes yet.
    assert fab.deliveries('h2', 2, eth_type=first) == [(far, 5)]
    assert [p.in_port for p in fab.switches['h2'].packet_ins] == [2]
    assert ('h2', 2) in fab.deliveries(far, 5)

    # The controller marks the move activated: delivery on the destination
    # alone, and the learned flow is exactly the one it wants there.
    learned = set(fab.switches['h2'].flows())
    sync(fab, world(during, ('h1', 'h2'), activated=True))
    assert fab.deliveries(far, 5) == [('h2', 2)]
    assert fab.deliveries('h2', 2) == [(far, 5)]
    assert fab.deliveries('h2', 2, eth_type=RARP) == [(far, 5)]   # plain now
    assert len(fab.switches['h2'].packet_ins) == 1
    kept = learned & set(fab.switches['h2'].flows())
    assert any(f.actions == (('output', 2),) for f in kept)

    # The source port goes: the final tables equal a fresh computation.
    after = {k: [e for e in v if (k, e[0]) != ('h1', 'g')]
             for k, v in during.items()}
    sync(fab, world(after))
    assert fab.deliveries(far, 5) == [('h2', 2)]
    fresh = fl.compute_flows(world(after))
    for n, sw in fab.switches.items():
        assert sw.flows() == fresh[n], n


def test_destination_drops_frames_until_activation_so_none_arrive_twice():
    """The paused destination must not queue frames for the guest: after
    resume they would be delivered a second time."""
    fab = fabric()
    w = world({'h1': [('g', 1)], 'h2': [('g', 2)], 'h3': [('f', 5)]},
              ('h1', 'h2'))
    sync(fab, w)
    for _ in range(3):
        assert fab.deliveries('h3', 5) == [('h1', 1)]
    gated = [f for f in fab.switches['h2'].flows()
             if dict(f.match).get('tunnel_id') == 7 and not f.actions]
    assert len(gated) == 1 and fab.switches['h2'].counters[gated[0].key] == 3


def test_frames_on_the_source_or_a_stranger_port_activate_nothing():
    fab = fabric()
    w = world({'h1': [('g', 1), ('x', 3)], 'h2': [('g', 2), ('y', 4)],
               'h3': [('f', 5)]}, ('h1', 'h2'))
    sync(fab, w)
    for first in FIRST_FRAMES.values():
        fab.deliveries('h1', 1, eth_type=first)
        fab.deliveries('h2', 4, eth_type=first)
    assert fab.deliveries('h3', 5) == [('h1', 1)]
    assert all(not sw.packet_ins for sw in fab.switches.values())


def test_aborted_move_restores_the_exact_flows():
    before = world({'h1': [('g', 1)], 'h3': [('f', 5)]})
    during = world({'h1': [('g', 1)], 'h2': [('g', 2)], 'h3': [('f', 5)]},
                   ('h1', 'h2'))
    assert fl.compute_flows(during) != fl.compute_flows(before)
    # Destination port gone: the move is over, h2 holds nothing.
    assert pf.of_wires(fl.compute_flows(before)['h2']) == set()
    # Move cancelled while the destination port lingers: as before, and
    # h2 holds nothing for the wire.
    lingering = world({'h1': [('g', 1)], 'h2': [('g', 2)], 'h3': [('f', 5)]})
    lingering.moves = {}
    got = fl.compute_flows(lingering)
    assert got['h1'] == fl.compute_flows(before)['h1']
    assert got['h3'] == fl.compute_flows(before)['h3']


def _wired_tables():
    """Wire 7 between vNIC g on h1 and vNIC f on h3, nothing moving."""
    t = IncrementalTables()
    t.add_wire(Wire(7, 'g', 'f'))
    t.set_host(host('h1', ('g', 1)))
    t.set_host(host('h3', ('f', 5)))
    return t


def test_tables_infer_a_move_from_a_second_port_and_finish_it():
    t = _wired_tables()
    events = t.set_host(host('h2', ('g', 2)))
    assert t.placement.moves == {'g': Move('h1', 'h2')}
    assert events == [MoveSeen('g', Move('h1', 'h2'))]     # to be recorded
    assert t.location('g').host == 'h1'
    assert t.activate('g', 'h1') is False          # not its destination
    assert t.activate('g', 'h2') is True
    assert t.location('g').host == 'h2'
    events = t.set_host(host('h1'))                # source port removed
    assert t.placement.moves == {} and events == [
        MoveEnded('g', Move('h1', 'h2', True), 'completed')]


def test_tables_cancel_a_move_with_the_outcome_given():
    t = _wired_tables()
    plain = {n: pf.of_wires(t.table(n)) for n in IPS}
    t.set_host(host('h2', ('g', 2)))               # stuck: never activated
    assert {n: pf.of_wires(t.table(n)) for n in IPS} != plain
    assert t.cancel_move('g', 'timed-out') == [
        MoveEnded('g', Move('h1', 'h2'), 'timed-out')]
    # The lingering destination port changes nothing any more.
    assert {n: pf.of_wires(t.table(n)) for n in IPS} == plain
    assert t.location('g').host == 'h1'


def test_tables_abort_when_the_destination_port_goes():
    t = _wired_tables()
    plain = {n: pf.of_wires(t.table(n)) for n in IPS}
    t.start_move('g', 'h1', 'h2')                  # announced by the hook
    assert {n: pf.of_wires(t.table(n)) for n in IPS} == plain   # no tap there yet
    events = t.set_host(host('h2', ('g', 2)))
    assert pf.of_wires(t.table('h3')) != plain['h3']
    assert events == []                            # announced, not inferred
    assert t.set_host(host('h2')) == [
        MoveEnded('g', Move('h1', 'h2'), 'aborted')]
    assert {n: pf.of_wires(t.table(n)) for n in IPS} == plain


def test_both_ends_moving_at_once_keep_plain_flows():
    w = world({'h1': [('g', 1)], 'h2': [('g', 2)], 'h3': [('f', 5)]})
    w.hosts['h1'] = host('h1', ('g', 1), ('f', 6))
    w.moves = {'g': Move('h1', 'h2'), 'f': Move('h3', 'h1')}
    flows = fl.compute_flows(w)
    assert not any(a[0] == 'learn' for t in flows.values() for f in t
                   for a in f.actions)
