"""Placement advice (pure): moves ranked by the traffic they take off the
extenders, then the tunnels, net of what they add."""
from virtualwire.core.advice import WireUse, moves

SITE = {'h1': 'a', 'h2': 'a', 'h3': 'b'}
VM = {'web-0': 'web', 'web-1': 'web', 'db-0': 'db', 'cache-0': 'cache',
      'log-0': 'log'}


def test_the_busiest_split_wire_draws_the_first_move():
    wires = [WireUse('0x1', ('web-0', 'db-0'), ('h1', 'h3'), 8e6),
             WireUse('0x2', ('web-1', 'cache-0'), ('h1', 'h2'), 2e6)]
    found = moves(wires, VM, SITE)
    first = found[0]
    # db to h1 and web to h3 both collapse the extended wire; web's move
    # would split its 2 Mbit/s wire to cache across sites: db first.
    assert (first.vm, first.source, first.target) == ('db', 'h3', 'h1')
    assert first.collapses == ['0x1'] and first.off_extenders == 8e6
    web_to_h3 = next(m for m in found if (m.vm, m.target) == ('web', 'h3'))
    assert web_to_h3.onto_extenders == 2e6 and web_to_h3.off_tunnels == 2e6
    assert found.index(web_to_h3) > 0


def test_quiet_wires_and_collapsed_ones_draw_nothing():
    wires = [WireUse('0x1', ('web-0', 'db-0'), ('h1', 'h1'), 9e6),
             WireUse('0x2', ('web-1', 'log-0'), ('h1', 'h3'), 10.0)]
    assert moves(wires, VM, SITE) == []


def test_a_move_that_adds_more_than_it_takes_off_is_not_advised():
    # Moving cache next to web (h1) collapses 1 Mbit/s but splits its
    # 5 Mbit/s wire to log (beside it on h2): web goes to h2 instead.
    wires = [WireUse('0x1', ('web-0', 'cache-0'), ('h1', 'h2'), 1e6),
             WireUse('0x2', ('cache-0', 'log-0'), ('h2', 'h2'), 5e6)]
    found = [(m.vm, m.target, m.net) for m in moves(wires, VM, SITE)]
    assert found == [('web', 'h2', (0.0, 1e6))]


def test_ends_of_no_vm_and_moving_vms_do_not_move():
    wires = [WireUse('0x1', ('web-0', 'gw/eth1'), ('h1', 'h3'), 9e6),
             WireUse('0x2', ('db-0', 'cache-0'), ('h1', 'h2'), 9e6),
             WireUse('0x3', ('db-0', 'log-0'), ('h3', 'h2'), 1e6)]
    found = {(m.vm, m.target) for m in moves(wires, VM, SITE)}
    assert ('web', 'h3') in found          # to the gateway's host
    assert not any(vm == 'db' for vm, _ in found)     # on two hosts now


def test_a_move_within_the_rates_noise_is_not_advised():
    """fw between two readings of one stream (client-fw, fw-sw): moving
    fw next to the client takes one off and puts the other on."""
    vm = {'c-0': 'client', 'fw-0': 'fw', 'fw-1': 'fw', 'sw-0': 'sw'}
    wires = [WireUse('0x1', ('c-0', 'fw-0'), ('h1', 'h2'), 8.34e6),
             WireUse('0x2', ('fw-1', 'sw-0'), ('h2', 'h2'), 8.33e6)]
    found = [(m.vm, m.target) for m in moves(wires, vm, SITE)]
    assert found == [('client', 'h2')]
