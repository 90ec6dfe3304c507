"""Provider switches in the controller's tables (pipeline.incremental):
a switch's own flows go to its host, the wires plugged into its ports
follow it, and the incremental tables equal the from-scratch reference
(`pipeline.wire.compute_flows`) after each change: a switch added, moved
to another host, its host arriving late, removed."""
from virtualwire.core.model import Encap, Host, VnicPort, Wire
from virtualwire.core.switches import ProviderSwitch
from virtualwire.core.world import World
from virtualwire.pipeline import wire as fl
from virtualwire.pipeline.incremental import IncrementalTables
from virtualwire.pipeline.switch import switch_flows
from virtualwire.pipeline.tables import SWITCH_IN

TUN = 65000


def hosts():
    return {n: Host(n, k + 1, (Encap('gre', '198.19.0.%d' % (k + 1), TUN),),
                    vnics=(VnicPort('vm%d' % (k + 1), 'vnet%d' % k, 10 + k),))
            for k, n in enumerate(('h1', 'h2', 'h3'))}


WIRES = {1: Wire(1, 'vm1', 'sw:web/p1'), 2: Wire(2, 'vm2', 'sw:web/p2'),
         3: Wire(3, 'vm3', 'sw:web/p3')}


def web(host='h1'):
    return ProviderSwitch('web', 'shop', 7, host, ('p1', 'p2', 'p3'))


def same_as_reference(t, switches):
    ref = fl.compute_flows(World(wires=dict(t.wires), hosts=dict(t.hosts),
                                 switches=dict(switches)))
    for name in t.hosts:
        assert t.table(name) == ref[name], name


def loaded(switches, hs=None):
    t = IncrementalTables()
    for h in (hs or hosts()).values():
        t.set_host(h)
    t.set_wires(WIRES)
    for sw in switches:
        t.set_switch(sw)
    return t


def test_a_switch_and_its_wires_match_the_reference():
    t = loaded([web()])
    same_as_reference(t, {'web': web()})
    assert switch_flows(web()) <= t.table('h1')
    assert not [f for f in t.table('h2') if f.table == SWITCH_IN.id]
    # Every wire joins its vNIC to the switch's host: vm1 collapsed.
    assert {fl.wire_state(w, t.hosts, {e: t.location(e) for e in w.ends()
                                       if t.location(e)})
            for w in WIRES.values()} == {'collapsed', 'tunnelled'}


def test_a_switch_moved_takes_its_flows_and_its_wires_along():
    t = loaded([web()])
    t.set_switch(web('h3'))
    same_as_reference(t, {'web': web('h3')})
    assert not [f for f in t.table('h1') if f.table == SWITCH_IN.id]
    assert t.location('sw:web/p3').host == 'h3'


def test_a_switch_on_a_host_not_seen_yet_waits_for_it():
    hs = hosts()
    late = hs.pop('h3')
    t = loaded([web('h3')], hs)
    assert fl.wire_state(WIRES[1], t.hosts, {'vm1': t.location('vm1')}) == \
        'pending'
    t.set_host(late)
    same_as_reference(t, {'web': web('h3')})
    assert switch_flows(web('h3')) <= t.table('h3')


def test_a_switch_removed_leaves_nothing_behind():
    t = loaded([web()])
    t.remove_switch('web')
    same_as_reference(t, {})
    assert t.location('sw:web/p1') is None
    for name in t.hosts:
        assert not [f for f in t.table(name) if f.table != 0], name
