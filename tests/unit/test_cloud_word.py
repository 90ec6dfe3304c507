"""The cloud's word on placement in the controller, on the fake fabric
that runs its real OpenFlow: a host that plugs a vNIC placed elsewhere
gets none of its traffic and cannot take its wire, whatever it sends;
the refusal shows in status and the metric; a move the cloud authorized
goes through; a hook's announcement alone does not move a placed vNIC."""
import uuid

from virtualwire.testing.harness import Harness


def placed():
    """g on h1 wired to f on h2, f placed on h2; h3 plugs f."""
    h = Harness()
    h.host('h1', ('g', 1))
    h.host('h2', ('f', 5))
    h.host('h3')
    w = h.connect('g', 'f')
    h.intent.placements.place('f', 'h2', 'operator', 0.0)
    h.settle()
    h.host('h3', ('f', 7))
    return h, w


def test_a_host_plugging_a_vnic_placed_elsewhere_takes_nothing():
    h, w = placed()
    # Its frames go nowhere (no move is inferred, nothing activates)...
    for eth_type in (0x8035, 0x0806, 0x0800):
        assert h.send('h3', 7, eth_type=eth_type) == []
    # ...and the wire's traffic stays with h2.
    assert h.send('h1', 1) == [('h2', 5)]
    assert h.send('h2', 5) == [('h1', 1)]
    assert h.call(h.ctl.views.wire_view, w['id'])['moving'] == {}
    status = h.call(h.ctl.views.status)
    assert status['refused_claims'] == [
        {'vnic': 'f', 'host': 'h3', 'port': 7, 'placed_on': 'h2',
         'awaiting_source': False}]
    assert h.call(h.ctl.views.metrics_view)['claims_refused'] == {'h3': 1}
    view = h.call(h.ctl.views.vnic_view, 'f')
    assert (view['host'], view['placed_on'], view['refused_on']) == (
        'h2', 'h2', ['h3'])


def test_the_hook_alone_does_not_move_a_placed_vnic():
    h, _w = placed()
    vm = str(uuid.uuid4())
    h.call(h.ctl.moves.announce_migration, {'vm': 'x', 'vm_uuid': vm,
                                            'vnics': ['f'], 'destination': 'h3'})
    h.settle()
    assert h.send('h3', 7, eth_type=0x8035) == []
    assert h.send('h1', 1) == [('h2', 5)]


def test_a_move_the_cloud_authorized_goes_through():
    h, w = placed()
    h.intent.placements.place('f', 'h3', 'orchestrator nova', 1.0)
    h.settle()
    assert h.call(h.ctl.views.status)['refused_claims'] == []
    # The guest's first frame on h3 activates it there.
    assert h.send('h3', 7, eth_type=0x8035) == [('h1', 1)]
    assert h.send('h1', 1) == [('h3', 7)]
    h.host('h2')                                   # the source goes
    assert h.call(h.ctl.views.wire_view, w['id'])['moving'] == {}
    # h2 may not take it back: the cloud let go of it.
    h.host('h2', ('f', 6))
    assert h.send('h2', 6, eth_type=0x8035) == []
    assert h.send('h1', 1) == [('h3', 7)]
