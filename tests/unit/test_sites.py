"""Wires between sites, on a fake fabric: frames go host -> site extender
==link==> other site's extender -> host (or through a relay extender),
every hop keeps the full connector id and accepts a wire's frames only
from the hop that should send them."""
import random

import pytest

from virtualwire.core.model import (EXTENDER, Encap, Host, Link, Move,
                                    VnicPort, Wire)
from virtualwire.core.world import World
from virtualwire.pipeline import flow as pf
from virtualwire.pipeline import paths
from virtualwire.pipeline import wire as fl
from virtualwire.pipeline.incremental import IncrementalTables
from virtualwire.testing.fakeswitch import FakeFabric, Packet

GRE, XL = 65000, 65001
# name: (site, underlay ip, link ip or None)
HOSTS = {
    'a1': ('cloud-a', '198.19.1.11', None),
    'a2': ('cloud-a', '198.19.1.12', None),
    'xa': ('cloud-a', '198.19.1.2', '100.64.0.1'),
    'b1': ('cloud-b', '198.19.2.11', None),
    'b2': ('cloud-b', '198.19.2.12', None),
    'xb': ('cloud-b', '198.19.2.2', '100.64.0.2'),
    'xr': ('relay', '198.19.3.2', '100.64.0.3'),
}
ALL_LINKS = {('xa', 'xb'), ('xa', 'xr'), ('xb', 'xr')}


def host(name, vnics=(), links=ALL_LINKS):
    site, ip, link_ip = HOSTS[name]
    encaps = (Encap('gre', ip, GRE),)
    role, up = 'hypervisor', ()
    if link_ip:
        encaps += (Encap('xl', link_ip, XL),)
        role = EXTENDER
        up = tuple(Link(b if a == name else a, True)
                   for a, b in sorted(links) if name in (a, b))
    return Host(name, sorted(HOSTS).index(name) + 1, encaps, site,
                vnics=tuple(VnicPort(v, 'vnet%d' % p, p) for v, p in vnics),
                role=role, links=up)


def world(placement, wires, links=ALL_LINKS, moves=None):
    return World(wires={w.connector_id: w for w in wires},
                 hosts={n: host(n, placement.get(n, ()), links)
                        for n in HOSTS},
                 moves=moves or {})


def fabric(w):
    fab = FakeFabric()
    for n, (_site, ip, link_ip) in HOSTS.items():
        fab.add(n, w.hosts[n].dpid, {GRE: ip, **({XL: link_ip}
                                                 if link_ip else {})})
    sync(fab, w)
    return fab


def sync(fab, w):
    desired = fl.compute_flows(w)
    for name, sw in fab.switches.items():
        sw.apply(pf.diff_flows(sw.flows(), desired[name]))


CID = 0xFEEDF00D


def test_a_wire_between_sites_crosses_both_extenders_both_ways():
    wire = Wire(CID, 'g', 'f')
    w = world({'a1': [('g', 1)], 'b1': [('f', 3)]}, [wire])
    assert fl.wire_state(wire, w.hosts, w.locations()) == fl.EXTENDED
    assert fl.wire_path(wire, w.hosts, w.locations()) == \
        ('a1', 'xa', 'xb', 'b1')
    fab = fabric(w)
    assert fab.deliveries('a1', 1) == [('b1', 3)]
    assert fab.deliveries('b1', 3) == [('a1', 1)]
    # Flows only on the hosts of the path.
    desired = fl.compute_flows(w)
    assert {n for n, t in desired.items() if pf.of_wires(t)} == \
        {'a1', 'xa', 'xb', 'b1'}


def test_every_hop_carries_the_full_32_bit_connector_id():
    w = world({'a1': [('g', 1)], 'b1': [('f', 3)]},
              [Wire(0xFFFFFFFF, 'g', 'f')])
    for n in ('a1', 'xa', 'xb'):
        sends = [a for f in fl.compute_flows(w)[n] for a in f.actions
                 if a[:2] == ('set_field', 'tunnel_id')]
        assert sends and all(a[2] == 0xFFFFFFFF for a in sends), n


def test_each_hop_accepts_the_wire_only_from_the_hop_that_sends_it():
    w = world({'a1': [('g', 1)], 'b1': [('f', 3)]}, [Wire(CID, 'g', 'f')])
    fab = fabric(w)
    ok = Packet(GRE, b'x', tunnel_id=CID, tun_ipv4_src=HOSTS['xb'][1])
    assert fab.deliveries('b1', None, forged=ok) == [('b1', 3)]
    # The far site's host straight to b1 (skipping the extenders), a
    # neighbour in b1's own site, the relay over its link: all dropped.
    for port, src, at in ((GRE, HOSTS['a1'][1], 'b1'),
                          (GRE, HOSTS['b2'][1], 'b1'),
                          (XL, HOSTS['xr'][2], 'xb'),
                          (GRE, HOSTS['a2'][1], 'xa')):
        forged = Packet(port, b'evil', tunnel_id=CID, tun_ipv4_src=src)
        assert fab.deliveries(at, None, forged=forged) == [], (src, at)


def test_two_wires_between_sites_never_leak():
    w = world({'a1': [('g', 1), ('h', 2)], 'b1': [('f', 3)],
               'b2': [('e', 4)]}, [Wire(1, 'g', 'f'), Wire(2, 'h', 'e')])
    fab = fabric(w)
    assert fab.deliveries('a1', 1) == [('b1', 3)]
    assert fab.deliveries('a1', 2) == [('b2', 4)]
    assert fab.deliveries('b2', 4) == [('a1', 2)]


def test_a_relay_never_carries_a_wire_in_the_clear():
    """Links to a relay only: the relay would decrypt and re-encrypt the
    frames, so there is no path (a relay forwards the direct link's
    ciphertext instead: core.links.relay_of)."""
    links = {('xa', 'xr'), ('xb', 'xr')}
    wire = Wire(CID, 'g', 'f')
    w = world({'a1': [('g', 1)], 'b1': [('f', 3)]}, [wire], links)
    assert fl.wire_path(wire, w.hosts, w.locations()) is None
    assert fl.wire_state(wire, w.hosts, w.locations()) == fl.WAITING
    assert not pf.of_wires(fl.compute_flows(w)['xr'])


def test_no_link_no_path_and_no_flows():
    wire = Wire(CID, 'g', 'f')
    w = world({'a1': [('g', 1)], 'b1': [('f', 3)]}, [wire], links=set())
    assert fl.wire_state(wire, w.hosts, w.locations()) == fl.WAITING
    assert all(not pf.of_wires(t)
               for t in fl.compute_flows(w).values())


def test_a_link_both_sides_must_report_up():
    w = world({}, [])
    assert paths.route(w.hosts, 'a1', 'b1') == ('a1', 'xa', 'xb', 'b1')
    half = dict(w.hosts, xb=host('xb', links={('xa', 'xr'), ('xb', 'xr')}))
    assert paths.route(half, 'a1', 'b1') is None


def test_within_a_site_nothing_changes():
    wire = Wire(CID, 'g', 'f')
    w = world({'a1': [('g', 1)], 'a2': [('f', 3)]}, [wire])
    assert fl.wire_state(wire, w.hosts, w.locations()) == fl.TUNNELLED
    assert pf.of_wires(fl.compute_flows(w)['xa']) == set()


@pytest.mark.parametrize('far', ['a2', 'b2'])
def test_a_guest_moving_to_another_site_switches_in_the_switch(far):
    """g moves a1 (cloud-a) -> b1 (cloud-b); its far end sits in either
    cloud. Before the guest's first frame on b1, the far end's frames land
    on a1 only; the first frame on b1 switches them over (learned in b1's
    switch); the wire ends up direct or through the extenders."""
    wire = Wire(CID, 'g', 'f')
    far_at = {far: [('f', 5)]}
    w = world({'a1': [('g', 1)], 'b1': [('g', 2)], **far_at}, [wire],
              moves={'g': Move('a1', 'b1')})
    fab = fabric(w)
    assert fab.deliveries(far, 5) == [('a1', 1)]       # b1 drops: paused
    # Both copies of the guest's frames reach the far end meanwhile.
    assert fab.deliveries('a1', 1) == [(far, 5)]
    assert fab.deliveries('b1', 2) == [(far, 5)]       # and it activates
    assert sorted(fab.deliveries(far, 5)) == [('a1', 1), ('b1', 2)]
    done = world({'b1': [('g', 2)], **far_at}, [wire])
    sync(fab, done)
    assert fab.deliveries(far, 5) == [('b1', 2)]
    assert fab.deliveries('b1', 2) == [(far, 5)]
    assert fl.wire_state(wire, done.hosts, done.locations()) == \
        (fl.TUNNELLED if far == 'b2' else fl.EXTENDED)


def test_incremental_tables_follow_links_and_moves_between_sites():
    """Random connects, plugs, moves between sites and links going up and
    down: the incremental tables always equal the reference."""
    rng = random.Random(11)
    hyper = [n for n in HOSTS if HOSTS[n][2] is None]
    vnics = ['v%d' % i for i in range(8)]
    placement, wires, links = {}, {}, set(ALL_LINKS)
    inc = IncrementalTables()
    for step in range(300):
        op = rng.choice(['connect', 'disconnect', 'plug', 'link', 'link'])
        if op == 'connect':
            free = [v for v in vnics
                    if all(v not in x.ends() for x in wires.values())]
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
            placement[v] = (rng.choice(hyper), vnics.index(v) + 1)
        elif op == 'link':
            links ^= {rng.choice(sorted(ALL_LINKS))}
        per_host = {}
        for v, (n, p) in placement.items():
            per_host.setdefault(n, []).append((v, p))
        w = world(per_host, wires.values(), links)
        for h in w.hosts.values():
            inc.set_host(h)
        want = fl.compute_flows(w)
        for n in HOSTS:
            assert inc.table(n) == want[n], (step, op, n)


def test_a_link_flap_recomputes_only_the_wires_between_those_sites():
    """An extender link going down and up touches the wires between the
    two sites, never the wires within one (OVN's incremental processing:
    work in proportion to what the change can affect)."""
    inc = IncrementalTables()
    placement = {'a1': [('in-a1', 1), ('in-a3', 3)],
                 'a2': [('in-a2', 2)],
                 'b1': [('x-b1', 4)], 'b2': [('in-b2', 5), ('in-b3', 6)]}
    wires = [Wire(1, 'in-a1', 'in-a2'), Wire(2, 'in-b2', 'in-b3'),
             Wire(3, 'in-a3', 'x-b1')]
    for w in wires:
        inc.add_wire(w)
    for step, links in enumerate((
            ALL_LINKS, ALL_LINKS - {('xa', 'xb'), ('xa', 'xr')}, ALL_LINKS)):
        w = world(placement, wires, links)
        before = inc.stats['recomputed']
        for h in w.hosts.values():
            inc.set_host(h)
        want = fl.compute_flows(w)
        assert all(inc.table(n) == want[n] for n in HOSTS)
        if step:
            # Only wire 3 crosses sites: each of the two extenders that
            # saw the link change recomputed it, and nothing else.
            assert inc.stats['recomputed'] - before == 2, inc.stats
    assert inc.site_wires == {'cloud-a': {3}, 'cloud-b': {3}}
