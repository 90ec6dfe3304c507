"""The controller driven by events (switch connects, port appears, REST
connect, packet-in, timer) against a fake fabric that consumes the
real OpenFlow messages it sends: what a frame does at each step."""
import threading

import pytest

from virtualwire.control.controller import Controller
from virtualwire.control.loop import Loop
from virtualwire.core import errors, ids
from virtualwire.pipeline.flow import Flow, FlowDiff, of_wires
from virtualwire.testing.harness import TUN, Harness, MemoryRuntime
from virtualwire.testing.fakeswitch import Packet


def tables(h):
    return {n: sw.flows() for n, sw in h.fabric.switches.items()}


def test_connect_carries_frames_both_ways_and_nowhere_else():
    h = Harness()
    h.host('h1', ('a', 1), ('x', 2))
    h.host('h2', ('b', 1))
    w = h.connect('a', 'b')
    assert w['state'] == 'tunnelled' and (w['host_a'], w['host_b']) == \
        ('h1', 'h2')
    assert h.send('h1', 1) == [('h2', 1)]
    assert h.send('h2', 1) == [('h1', 1)]
    assert h.send('h1', 2) == []                      # unwired vNIC
    # The frame crossed with the whole connector id as its key, from h1.
    [(_h, _p, pkt)] = h.fabric.send('h1', 1, vlan_vid=42)
    assert pkt.tunnel_id == w['id'] and pkt.tun_ipv4_src == '198.19.0.1'
    assert pkt.vlan_vid == 42                          # tags untouched
    # Each switch got one bundle; confirmed by its barrier.
    views = h.call(h.ctl.views.host_views)
    assert all(v['synced'] and v['flows_confirmed_at'] for v in views)


def test_forged_carrier_frame_from_a_third_host_is_dropped():
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 1))
    h.host('h3')
    w = h.connect('a', 'b')
    forged = Packet(TUN, b'evil', tunnel_id=w['id'],
                    tun_ipv4_src='198.19.0.3')
    assert h.fabric.deliveries('h2', None, forged=forged) == []
    genuine = Packet(TUN, b'ok', tunnel_id=w['id'],
                     tun_ipv4_src='198.19.0.1')
    assert h.fabric.deliveries('h2', None, forged=genuine) == [('h2', 1)]


def test_connect_refusals_change_nothing():
    h = Harness()
    h.host('h1', ('a', 1), ('b', 2), ('c', 3))
    w = h.connect('a', 'b')
    before = tables(h)
    with pytest.raises(errors.Conflict, match='vNIC a is already wired'):
        h.connect('a', 'c')
    with pytest.raises(errors.Conflict, match='vNIC b is already wired'):
        h.connect('c', 'b')
    with pytest.raises(errors.Invalid, match='two different'):
        h.connect('c', 'c')
    with pytest.raises(errors.Invalid, match='vNIC id'):
        h.connect('c', 'bad id!')
    assert tables(h) == before
    assert [x['id'] for x in h.call(h.ctl.views.wire_views)] == [w['id']]


def test_disconnect_leaves_only_the_miss_flow():
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 1))
    w = h.connect('a', 'b')
    h.disconnect(w['id'])
    assert h.send('h1', 1) == []
    assert {n: of_wires(t) for n, t in tables(h).items()} == \
        {'h1': set(), 'h2': set()}
    with pytest.raises(errors.NotFound):
        h.disconnect(w['id'])


def test_wire_collapses_when_its_ends_meet_and_expands_again():
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 1))
    w = h.connect('a', 'b')
    h.host('h2')                                   # b unplugged from h2
    h.host('h1', ('a', 1), ('b', 7))               # ... and plugged on h1
    assert h.call(h.ctl.views.wire_view, w['id'])['state'] == 'collapsed'
    assert h.send('h1', 1) == [('h1', 7)]
    assert h.send('h1', 7) == [('h1', 1)]
    assert of_wires(h.fabric.switches['h2'].flows()) == set()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 3))
    assert h.send('h1', 1) == [('h2', 3)]


def test_restart_changes_nothing_on_switches_that_are_right():
    h = Harness()
    h.host('h1', ('a', 1), ('c', 3))
    h.host('h2', ('b', 1))
    w = h.connect('a', 'b')
    h.send('h1', 1)
    h.send('h1', 1)
    sent = h.flow_mods()
    counted = dict(h.fabric.switches['h1'].counters)
    # A new controller, same intent and runtime records, same switches.
    h2 = Harness(intent=h.intent, runtime=h.runtime, fabric=h.fabric)
    h2.reconnect('h1')
    h2.reconnect('h2')
    h2.host('h1', ('a', 1), ('c', 3), connect=False)
    h2.host('h2', ('b', 1), connect=False)
    assert h2.flow_mods() == sent                  # not one flow mod
    assert h2.fabric.switches['h1'].counters == counted
    assert h2.send('h1', 1) == [('h2', 1)]
    assert h2.call(h2.ctl.views.wire_view, w['id'])['state'] == 'tunnelled'


def test_restart_holds_flows_of_wires_the_intent_lacks_until_released():
    """A missing, empty or older intent database must not remove working
    wires (control.safe_start): their flows stay, counted and reported,
    until the operator says the database is right."""
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 1))
    w = h.connect('a', 'b')
    h.intent.rows.clear()            # the database lost it (or is new)
    # ... and a flow of ours that no wire explains (an older controller's).
    stale = Flow(0, 100, (('in_port', 9),), (('output', 1),),
                 ids.wire_cookie(77))
    h.fabric.switches['h2'].apply(FlowDiff([stale], [], []))
    before = tables(h)
    h2 = Harness(intent=h.intent, runtime=h.runtime, fabric=h.fabric)
    h2.reconnect('h1')
    h2.reconnect('h2')
    assert tables(h2) == before                      # nothing deleted
    assert h2.send('h1', 1) == [('h2', 1)]           # the wire still works
    held = h2.call(h2.ctl.views.status)['safe_start']
    assert held == {'held_wires': [ids.fmt_connector(77),
                                   ids.fmt_connector(w['id'])],
                    'hosts': {'h1': 2, 'h2': 3}, 'released': False}
    # A wire the controller saw go is deleted as always.
    h2.host('h1', ('a', 1), ('c', 2), connect=False)
    h2.host('h2', ('b', 1), ('d', 2), connect=False)
    w2 = h2.connect('c', 'd')
    h2.disconnect(w2['id'])
    assert h2.send('h1', 2) == []
    # The operator says the database is right: the held flows go.
    h2.call(h2.ctl.safe_start.release)
    assert {n: of_wires(t) for n, t in tables(h2).items()} == \
        {'h1': set(), 'h2': set()}
    assert h2.send('h1', 1) == []
    assert h2.call(h2.ctl.views.status)['safe_start']['held_wires'] == []
    with pytest.raises(errors.NotFound):
        h2.call(h2.ctl.views.wire, w['id'])


def test_a_held_flow_does_not_join_a_new_guest_on_its_old_port():
    """Issue 39, point 10: a held orphan's flows match its port number; a
    new guest whose tap reuses the name (and so the port) was joined to
    the orphan's peer."""
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 1))
    h.connect('a', 'b')
    h.intent.rows.clear()            # the database lost it
    h2 = Harness(intent=h.intent, runtime=h.runtime, fabric=h.fabric)
    h2.reconnect('h1')
    h2.reconnect('h2')
    h2.host('h1', ('a', 1), connect=False)
    h2.host('h2', ('b', 1), connect=False)
    assert h2.send('h1', 1) == [('h2', 1)]           # held: still works
    # Guest a goes; a new guest's vNIC z gets a's tap name, so port 1.
    h2.host('h1', ('z', 1), connect=False)
    assert h2.send('h1', 1) == []                    # z reaches nobody
    assert h2.send('h2', 1) == []                    # and nobody reaches z
    # h1's flows of it went; h2's side (b still on its port) is held.
    assert h2.call(h2.ctl.views.status)['safe_start']['hosts'] == {'h2': 2}
    assert of_wires(h2.fabric.switches['h2'].flows())


def test_a_restored_wire_makes_its_held_flows_right_again():
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 1))
    w = h.connect('a', 'b')
    saved = dict(h.intent.rows)
    h.intent.rows.clear()
    sent = h.flow_mods()
    h2 = Harness(intent=h.intent, runtime=h.runtime, fabric=h.fabric)
    h2.reconnect('h1')
    h2.reconnect('h2')
    assert h2.call(h2.ctl.views.status)['safe_start']['held_wires']
    # The backup is restored: the wire comes back on the change stream.
    for cid, wire in saved.items():
        h2.intent.create_wire(wire.end_a, wire.end_b, cid=cid)
    h2.settle()
    assert h2.call(h2.ctl.views.status)['safe_start']['held_wires'] == []
    assert h2.flow_mods() == sent                    # not one flow mod
    assert h2.send('h1', 1) == [('h2', 1)]
    assert h2.call(h2.ctl.views.wire_view, w['id'])['state'] == 'tunnelled'


def test_wire_stats_count_frames_each_way():
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 1))
    w = h.connect('a', 'b')
    for _ in range(3):
        h.send('h1', 1)
    h.send('h2', 1)
    with pytest.raises(errors.Unavailable, match='no flow counters'):
        h.call(h.ctl.views.wire_stats, w['id'])
    h.collect()
    st = h.call(h.ctl.views.wire_stats, w['id'])
    assert st['a_to_b']['entered_packets'] == 3
    assert st['a_to_b']['delivered_packets'] == 3
    assert st['a_to_b']['lost_packets'] == 0
    assert st['b_to_a']['entered_packets'] == 1


def test_state_touched_off_the_loop_fails_loudly():
    """One owner: a handler called from another thread raises instead of
    racing (the loop thread is the owner)."""
    loop = Loop('owner')
    ctl = Controller(loop, Harness().intent, MemoryRuntime())
    loop.post(ctl.start)
    t = threading.Thread(target=loop.run, daemon=True)
    t.start()
    try:
        assert loop.call(ctl.views.wire_views) == []
        with pytest.raises(AssertionError, match='outside the'):
            ctl.views.wire_views()
    finally:
        loop.stop()
        t.join(2)


def test_events_from_many_threads_are_applied_once_each_in_order():
    """REST calls from 8 threads against one loop: every connect lands,
    none twice, and the state is consistent afterwards."""
    h = Harness()
    vnics = [('v%d' % i, i + 1) for i in range(80)]
    h.host('h1', *vnics[:40])
    h.host('h2', *vnics[40:])
    t = threading.Thread(target=h.loop.run, daemon=True)
    t.start()
    errs = []

    def worker(k):
        for i in range(k, 40, 8):
            try:
                w = h.intent.create_wire('v%d' % i, 'v%d' % (i + 40))
                # As REST does: the answer is read after the write is in.
                view = h.loop.call(h.ctl.views.wire_view, w.connector_id)
                assert view['a'] == 'v%d' % i
                # A second wire on a taken vNIC is refused, changes nothing.
                try:
                    h.intent.create_wire('v%d' % i, 'v%d' % ((i + 1) % 40))
                    errs.append('second wire on v%d accepted' % i)
                except errors.Conflict:
                    pass
            except Exception as e:      # pragma: no cover - reported below
                errs.append(e)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for x in threads:
        x.start()
    for x in threads:
        x.join(10)
    views = h.loop.call(h.ctl.views.wire_views)
    h.loop.stop()
    t.join(2)
    assert not errs
    assert len(views) == 40 and {v['state'] for v in views} == {'tunnelled'}


def test_a_switch_error_makes_the_controller_dump_again_and_repair():
    """After an error our picture of the switch may be wrong: the
    controller dumps its table again and fixes what differs."""
    from os_ken.ofproto import ofproto_v1_4_parser as p
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 1))
    h.connect('a', 'b')
    sw = h.fabric.switches['h1']
    right = sw.flows()
    sw.table.clear()                      # the switch lost its flows
    err = p.OFPErrorMsg(sw, type_=1, code=2)
    h.loop.post(h.ctl.on_switch_error, err)
    h.settle()
    assert sw.flows() == right
    assert h.send('h1', 1) == [('h2', 1)]
    assert h.call(h.ctl.views.status)['counters']['switch_errors'] == 1
