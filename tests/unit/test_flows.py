"""Flow logic on a fake OpenFlow fabric: what a frame does, no switch needed."""
import pytest

from virtualwire.pipeline import flow as pf
from virtualwire.pipeline import wire as fl
from virtualwire.pipeline.incremental import IncrementalTables
from virtualwire.pipeline.tables import WIRE
from virtualwire.core import ids
from virtualwire.testing.fakeswitch import FakeFabric, Packet
from virtualwire.core.model import Encap, Host, Move, VnicPort, Wire
from virtualwire.core.world import World

TUN = 65000


def host(name, ip, *vnics):
    return Host(name=name, dpid=hash(name) & 0xFFFF, encaps=(Encap('gre', ip, TUN),),
                vnics=tuple(VnicPort(v, 'vnet%d' % p, p) for v, p in vnics))


def world(hosts, wires):
    return World(wires={w.connector_id: w for w in wires},
                 hosts={h.name: h for h in hosts})


def fabric_for(w):
    fab = FakeFabric()
    for h in w.hosts.values():
        fab.add(h.name, h.dpid, {TUN: h.tunnel_ip})
    sync(fab, w)
    return fab


def sync(fab, w):
    """Bring each fake switch to the desired table, the way the engine does."""
    desired = fl.compute_flows(w)
    for name, sw in fab.switches.items():
        sw.apply(pf.diff_flows(sw.flows(), desired.get(name, set())))


H1 = ('h1', '198.19.0.11')
H2 = ('h2', '198.19.0.12')
H3 = ('h3', '198.19.0.13')


def test_cross_host_wire_delivers_both_ways_and_nowhere_else():
    w = world([host(*H1, ('a', 1)), host(*H2, ('b', 1), ('x', 2))],
              [Wire(0xDEADBEEF, 'a', 'b')])
    fab = fabric_for(w)
    assert fab.deliveries('h1', 1) == [('h2', 1)]
    assert fab.deliveries('h2', 1) == [('h1', 1)]
    assert fab.deliveries('h2', 2) == []          # unwired vNIC: dropped


def test_full_32_bit_connector_id_is_the_tunnel_key():
    w = world([host(*H1, ('a', 1)), host(*H2, ('b', 1))],
              [Wire(0xFFFFFFFF, 'a', 'b')])
    out = fl.compute_flows(w)['h1']
    encap = [f for f in out if ('in_port', 1) in f.match][0]
    assert ('set_field', 'tunnel_id', 0xFFFFFFFF) in encap.actions
    decap = [f for f in out if ('in_port', TUN) in f.match and
             f.connector_id][0]
    assert ('tunnel_id', 0xFFFFFFFF) in decap.match


def test_collapsed_wire_uses_no_tunnel():
    w = world([host(*H1, ('a', 1), ('b', 2))], [Wire(7, 'a', 'b')])
    fab = fabric_for(w)
    assert fab.deliveries('h1', 1) == [('h1', 2)]
    assert fab.deliveries('h1', 2) == [('h1', 1)]
    for f in fab.switches['h1'].flows():
        assert all(a[0] != 'set_field' for a in f.actions)
        assert ('output', TUN) not in f.actions
    assert fl.wire_state(w.wires[7], w.hosts, w.locations()) == fl.COLLAPSED


def test_two_wires_never_leak():
    w = world([host(*H1, ('a1', 1), ('a2', 2)),
               host(*H2, ('b1', 1), ('b2', 2))],
              [Wire(1, 'a1', 'b1'), Wire(2, 'a2', 'b2')])
    fab = fabric_for(w)
    assert fab.deliveries('h1', 1) == [('h2', 1)]
    assert fab.deliveries('h1', 2) == [('h2', 2)]
    assert fab.deliveries('h2', 2) == [('h1', 2)]


def test_forged_tunnel_packet_from_third_host_is_dropped():
    w = world([host(*H1, ('a', 1)), host(*H2, ('b', 1)), host(*H3)],
              [Wire(99, 'a', 'b')])
    fab = fabric_for(w)
    forged = Packet(TUN, b'evil', tunnel_id=99, tun_ipv4_src=H3[1])
    assert fab.deliveries('h2', None, forged=forged) == []
    genuine = Packet(TUN, b'ok', tunnel_id=99, tun_ipv4_src=H1[1])
    assert fab.deliveries('h2', None, forged=genuine) == [('h2', 1)]


def test_pending_until_both_ends_exist_then_back_to_pending():
    wire = Wire(5, 'a', 'b')
    w = world([host(*H1, ('a', 1)), host(*H2)], [wire])
    assert fl.wire_state(wire, w.hosts, w.locations()) == fl.PENDING
    assert {n: pf.of_wires(t) for n, t in fl.compute_flows(w).items()} == \
        {'h1': set(), 'h2': set()}
    w2 = world([host(*H1, ('a', 1)), host(*H2, ('b', 3))], [wire])
    assert fl.wire_state(wire, w2.hosts, w2.locations()) == fl.TUNNELLED
    fab = fabric_for(w2)
    assert fab.deliveries('h1', 1) == [('h2', 3)]
    sync(fab, w)                            # b unplugged
    assert fab.deliveries('h1', 1) == []
    assert pf.of_wires(fab.switches['h1'].flows()) == set()


def test_moving_an_end_expands_then_recollapses_with_minimal_changes():
    wire = Wire(11, 'a', 'b')
    together = world([host(*H1, ('a', 1), ('b', 2)), host(*H2)], [wire])
    apart = world([host(*H1, ('a', 1)), host(*H2, ('b', 4))], [wire])
    fab = fabric_for(together)
    assert fab.deliveries('h1', 1) == [('h1', 2)]
    # b moves to h2: in_port=a keeps its match; its actions and what its
    # counter counts (no longer deliveries to b: the cookie) change, so it
    # is replaced in place, which keeps its counters.
    d = pf.diff_flows(fab.switches['h1'].flows(),
                      fl.compute_flows(apart)['h1'])
    [ingress] = [f for f in d.add if f.match == (('in_port', 1),)]
    # (b's own ingress on h1 goes with b.)
    assert [f.match for f in d.delete] == [(('in_port', 2),)] and \
        not d.modify
    before = fab.switches['h1'].counters[ingress.key]
    sync(fab, apart)
    assert fab.switches['h1'].counters[ingress.key] == before > 0
    assert fab.deliveries('h1', 1) == [('h2', 4)]
    assert fab.deliveries('h2', 4) == [('h1', 1)]
    sync(fab, together)
    assert fab.deliveries('h1', 1) == [('h1', 2)]
    assert pf.of_wires(fab.switches['h2'].flows()) == set()


def test_sister_rewire_changes_only_the_tunnel_destination():
    wire = Wire(12, 'a', 'b')
    before = world([host(*H1, ('a', 1)), host(*H2, ('b', 1)), host(*H3)],
                   [wire])
    after = world([host(*H1, ('a', 1)), host(*H2), host(*H3, ('b', 1))],
                  [wire])
    d = pf.diff_flows(fl.compute_flows(before)['h1'],
                      fl.compute_flows(after)['h1'])
    # The encap flow is modified in place (counters kept); the decap flow
    # changes its match (tun_src), so it is replaced.
    assert len(d.modify) == 1 and ('set_field', 'tun_ipv4_dst', H3[1]) in \
        d.modify[0].actions
    assert len(d.add) == 1 and len(d.delete) == 1


def test_diff_of_identical_tables_is_empty():
    w = world([host(*H1, ('a', 1)), host(*H2, ('b', 1))], [Wire(3, 'a', 'b')])
    t = fl.compute_flows(w)['h1']
    assert not pf.diff_flows(set(t), set(t))


def test_diff_removes_foreign_and_stale_flows():
    stale = pf.make_flow(WIRE, 'wire', {'in_port': 9}, [('output', 8)],
                         ids.wire_cookie(77))
    foreign = pf.Flow(5, 0, (), (('output', 1),), 0)
    d = pf.diff_flows({stale, foreign} | pf.default_flows(),
                      pf.default_flows())
    assert set(d.delete) == {stale, foreign} and not d.add and not d.modify


def test_changed_cookie_is_readded_not_modified():
    old = pf.make_flow(WIRE, 'wire', {'in_port': 1}, [('output', 2)],
                       ids.wire_cookie(1))
    new = pf.make_flow(WIRE, 'wire', {'in_port': 1}, [('output', 2)],
                       ids.wire_cookie(2))
    d = pf.diff_flows({old}, {new})
    assert d.add == [new] and not d.modify and not d.delete


def test_host_without_tunnel_port_waits():
    h2 = Host('h2', 2, (Encap('gre', '198.19.0.12', None),),
              vnics=(VnicPort('b', 'vnet1', 1),))
    w = world([host(*H1, ('a', 1)), h2], [Wire(4, 'a', 'b')])
    assert fl.wire_state(w.wires[4], w.hosts, w.locations()) == fl.WAITING
    assert pf.of_wires(fl.compute_flows(w)['h1']) == set()


@pytest.mark.parametrize('n_wires', [1, 50])
def test_every_wire_has_its_own_cookie(n_wires):
    hosts = [host(*H1, *[('a%d' % i, i + 1) for i in range(n_wires)]),
             host(*H2, *[('b%d' % i, i + 1) for i in range(n_wires)])]
    w = world(hosts, [Wire(1000 + i, 'a%d' % i, 'b%d' % i)
                      for i in range(n_wires)])
    for name, table in fl.compute_flows(w).items():
        by_wire = {}
        for f in table:
            by_wire.setdefault(f.connector_id, []).append(f)
        assert len(by_wire) == n_wires + 1     # + the default drops
        for i in range(n_wires):
            assert len(by_wire[1000 + i]) == 2
            assert {f.cookie & ids.COOKIE_WIRE_MASK
                    for f in by_wire[1000 + i]} == {ids.wire_cookie(1000 + i)}


def test_incremental_tables_match_the_reference_under_random_changes():
    """Random connects, disconnects, plugs, unplugs, migrations (arrive,
    activate, leave, abort) and tunnel changes: the incremental tables
    always equal compute_flows(world), and
    every host whose table changed is reported dirty."""
    import random
    rng = random.Random(7)
    names = ['h%d' % i for i in range(4)]
    vnics = ['v%d' % i for i in range(12)]
    placement = {}          # vnic -> [(host, ofport)], incumbent first
    moves = {}              # vnic -> Move, as a user would expect them
    tun = {n: ('198.19.0.%d' % (i + 1), TUN) for i, n in enumerate(names)}
    wires = {}
    inc = IncrementalTables()

    def hosts():
        return {n: Host(n, i, (Encap('gre', tun[n][0], tun[n][1]),),
                        vnics=tuple(sorted(
                            # Three vNICs per guest: their activation
                            # flows merge (pipeline.guests).
                            (VnicPort(v, 'p', p,
                                      vm_id='vm%d' % (vnics.index(v) // 3))
                             for v, claims in
                             placement.items() for h, p in claims if h == n),
                            key=lambda x: x.vnic_id)))
                for i, n in enumerate(names)}

    prev = {}
    switch = {}                  # host -> key -> Flow, as a switch holds it
    for step in range(400):
        op = rng.choice(['connect', 'disconnect', 'plug', 'unplug', 'tunnel',
                         'arrive', 'leave', 'activate', 'abort'])
        if op == 'connect':
            free = [v for v in vnics
                    if all(v not in w.ends() for w in wires.values())]
            if len(free) >= 2:
                a, b = rng.sample(free, 2)
                cid = rng.randint(1, 2 ** 32 - 1)
                wires[cid] = Wire(cid, a, b)
                inc.add_wire(wires[cid])
        elif op == 'disconnect' and wires:
            cid = rng.choice(sorted(wires))
            del wires[cid]
            inc.remove_wire(cid)
        elif op == 'plug':
            v = rng.choice(vnics)
            # OVS gives each port of a bridge its own ofport; a re-plugged
            # vNIC may get another one.
            placement[v] = [(rng.choice(names),
                             vnics.index(v) + 1 + 100 * rng.randint(0, 3))]
            moves.pop(v, None)
        elif op == 'arrive' and placement:
            # A migration's destination tap appears; the source keeps it.
            v = rng.choice(sorted(placement))
            free = [n for n in names if n not in
                    {h for h, _ in placement[v]}]
            if len(placement[v]) == 1 and free:
                placement[v].append((rng.choice(free), 50 + vnics.index(v)))
                moves[v] = Move(placement[v][0][0], placement[v][1][0])
        elif op == 'leave':
            # ... and then the source's goes.
            moving = sorted(v for v, c in placement.items() if len(c) > 1)
            if moving:
                v = rng.choice(moving)
                placement[v].pop(0)
                moves.pop(v, None)
        elif op == 'abort':
            # ... or the destination's goes instead.
            moving = sorted(v for v, c in placement.items() if len(c) > 1)
            if moving:
                v = rng.choice(moving)
                placement[v].pop(1)
                moves.pop(v, None)
        elif op == 'activate' and any(not m.activated for m in moves.values()):
            # The guest's first frame on the destination.
            v = rng.choice(sorted(v for v, m in moves.items()
                                  if not m.activated))
            assert inc.activate(v, moves[v].destination)
            moves[v] = Move(moves[v].source, moves[v].destination, True)
        elif op == 'unplug' and placement:
            v = rng.choice(sorted(placement))
            del placement[v]
            moves.pop(v, None)
        elif op == 'tunnel':
            n = rng.choice(names)
            tun[n] = (tun[n][0], rng.choice([TUN, None]))
        hs = hosts()
        for h in hs.values():
            inc.set_host(h)
        assert inc.placement.moves == moves, step
        want = fl.compute_flows(World(dict(wires), hs, dict(moves)))
        dirty = inc.pop_dirty()
        for n in names:
            assert inc.table(n) == want[n], (step, op, n)
            if prev and prev[n] != want[n]:
                assert n in dirty, (step, op, n)
            # Sending only the changed keys brings a switch to the table.
            if n not in switch:
                switch[n] = {}
                pf.apply_diff(switch[n], pf.diff_flows((), want[n]))
            elif n in dirty:
                pf.apply_diff(switch[n], pf.diff_keys(
                    switch[n], inc.table_map(n), dirty[n]))
            assert set(switch[n].values()) == want[n], (step, op, n)
        prev = want
