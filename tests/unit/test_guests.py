"""A guest's activation flows learn for all its moving vNICs
(pipeline.guests): pure, no switch."""
from virtualwire.core import ids
from virtualwire.pipeline import guests, tables
from virtualwire.pipeline.flow import make_flow
from virtualwire.pipeline.wire import activation_flows


def _activate(cid, port, far_port):
    own = ('learn', tables.WIRE.priority('wire'), ids.wire_cookie(cid),
           (('in_port', far_port),), port)
    return make_flow(tables.WIRE, 'activate', {'in_port': port},
                     [own, ('output', far_port), ('output', 0xfffffffd)],
                     ids.wire_cookie(cid))


def test_a_guests_activation_flows_learn_for_each_other():
    a, b, c = _activate(7, 2, 10), _activate(8, 4, 11), _activate(9, 6, 12)
    flows = {f.key: f for f in (a, b, c)}
    out = guests.merge(flows, {2: 'vm-1', 4: 'vm-1', 6: 'vm-2'})
    learns = {k: [x for x in f.actions if x[0] == 'learn']
              for k, f in out.items()}
    # Own learn first, then the sibling's; the rest as it was.
    assert learns[a.key] == [a.actions[0], b.actions[0]]
    assert learns[b.key] == [b.actions[0], a.actions[0]]
    assert out[a.key].actions[2:] == a.actions[1:]
    assert out[a.key].cookie == a.cookie
    # Another guest, or a port naming none, is left alone.
    assert out[c.key] == c
    assert guests.merge(flows, {}) == flows
    for f in out.values():
        tables.check(f)
    # A restarted controller reads back each learn as its own wire's.
    found = activation_flows(out)
    assert found[(0, 100, (('in_port', 10),))] == out[a.key]
    assert found[(0, 100, (('in_port', 11),))] == out[b.key]


def test_a_flow_whose_first_learn_is_another_wires_is_refused():
    a, b = _activate(7, 2, 10), _activate(8, 4, 11)
    bad = a.__class__(a.table, a.priority, a.match,
                      (b.actions[0],) + a.actions, a.cookie)
    try:
        tables.check(bad)
    except tables.PipelineError as e:
        assert 'must keep its wire cookie' in str(e)
    else:
        raise AssertionError('accepted %s' % bad)
