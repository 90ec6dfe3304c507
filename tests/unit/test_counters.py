"""Per-wire counters from flow counters: never backwards, each frame once,
through flow replacement, removal, migration and controller restart
(pure `metrics.counters`, and the controller driving the fake switch)."""
import json
import uuid

import pytest

from virtualwire.core import errors, ids
from virtualwire.metrics.counters import FlowCounters
from virtualwire.testing.fakeswitch import Packet
from virtualwire.testing.harness import TUN, Harness

CID = 7
A_IN = ids.wire_cookie(CID) | ids.ROLE_ENTERS_A
B_OUT = ids.wire_cookie(CID) | ids.ROLE_DELIVERS_B
K1, K2 = (0, 100, (('in_port', 1),)), (0, 100, (('in_port', 9),))


def counters():
    c = FlowCounters()
    c.track({CID: 't0'})
    return c


def ab(c):
    return c.wire(CID)['a_to_b']


def test_each_increase_is_credited_once_to_what_the_cookie_counts():
    c = counters()
    c.poll('h1', [(K1, A_IN, 10, 1000)])
    c.poll('h2', [(K2, B_OUT, 9, 900)])
    c.poll('h1', [(K1, A_IN, 15, 1500)])
    assert ab(c)['entered_packets'] == 15 and ab(c)['entered_bytes'] == 1500
    assert ab(c)['delivered_packets'] == 9
    # Nothing judged yet (`loss`: no samples): 6 unsettled, none lost.
    assert (ab(c)['lost_packets'], ab(c)['unsettled_packets']) == (0, 6)
    assert c.wire(CID)['b_to_a']['entered_packets'] == 0


def test_a_flow_replaced_with_its_counters_kept_is_not_counted_twice():
    """OVS keeps a flow's counters when an add replaces it (a new cookie):
    only the increase is credited, to the new cookie's roles."""
    c = counters()
    c.poll('h1', [(K1, A_IN | ids.ROLE_DELIVERS_B, 10, 100)])   # collapsed
    c.poll('h1', [(K1, A_IN, 12, 120)])                          # tunnelled
    assert ab(c)['entered_packets'] == 12
    assert ab(c)['delivered_packets'] == 10


def test_a_counter_that_went_down_started_again():
    c = counters()
    c.poll('h1', [(K1, A_IN, 100, 1000)])
    c.poll('h1', [(K1, A_IN, 3, 30)])              # the switch restarted
    assert ab(c)['entered_packets'] == 103


def test_a_removed_flow_credits_its_final_count_once():
    c = counters()
    c.poll('h1', [(K1, A_IN, 10, 100)])
    c.removed('h1', K1, A_IN, 14, 140)
    c.poll('h1', [])
    c.poll('h1', [(K1, A_IN, 2, 20)])              # a new flow, same match
    assert ab(c)['entered_packets'] == 16


def test_a_wire_recreated_under_the_same_id_starts_from_zero():
    c = counters()
    c.poll('h1', [(K1, A_IN, 10, 100)])
    c.track({CID: 't0'})
    assert ab(c)['entered_packets'] == 10
    c.track({CID: 't1'})
    assert ab(c)['entered_packets'] == 0
    c.track({})
    assert c.wire(CID) is None


def test_a_snapshot_continues_exactly():
    c = counters()
    c.poll('h1', [(K1, A_IN, 10, 100)])
    d = FlowCounters()
    d.restore(c.snapshot())
    d.poll('h1', [(K1, A_IN, 25, 250)])            # counted meanwhile
    assert ab(d)['entered_packets'] == 25


def test_a_base_saved_with_decoded_keys_continues_exactly():
    """Counter bases saved before keys were the switch's encoded match
    (tuples of fields then): restored under the new keys, each flow is
    matched by its decoded key, and only what it counted since is
    credited (not its whole count again), removed flows included."""
    c = counters()
    c.poll('h1', [(K1, A_IN, 10, 100), (K2, A_IN, 4, 40)])
    old = json.loads(json.dumps(c.snapshot()))
    assert isinstance(old['seen']['h1'][0][0], list)     # the older form
    new_key = {b'k1': K1, b'k2': K2}
    d = FlowCounters(new_key.get)
    d.restore(old)
    d.removed('h1', b'k2', A_IN, 6, 60)              # 2 more, then gone
    d.poll('h1', [(b'k1', A_IN, 25, 250)])          # 15 more
    assert ab(d)['entered_packets'] == 10 + 4 + 2 + 15
    d.poll('h1', [(b'k1', A_IN, 26, 260)])
    assert ab(d)['entered_packets'] == 32
    again = FlowCounters(new_key.get)               # saved in the new form
    again.restore(json.loads(json.dumps(d.snapshot())))
    again.poll('h1', [(b'k1', A_IN, 30, 300)])
    assert ab(again)['entered_packets'] == 36


def test_an_idle_fleet_saves_next_to_nothing_and_continues_exactly():
    """Flows that counted nothing are left out of the snapshot: restored,
    they read as new and are credited from zero, which is the same."""
    c = FlowCounters()
    c.track({cid: 't%d' % cid for cid in range(1, 2001)})
    idle = [((0, 100, (('in_port', cid),)), ids.wire_cookie(cid) |
             ids.ROLE_ENTERS_A, 0, 0) for cid in range(1, 2001)]
    c.poll('h1', idle)
    c.poll('h1', idle[:-1] + [(idle[-1][0], idle[-1][1], 5, 500)])
    snap = c.snapshot()
    assert len(json.dumps(snap)) < 300
    d = FlowCounters()
    d.restore(json.loads(json.dumps(snap)))
    d.track({cid: 't%d' % cid for cid in range(1, 2001)})
    later = [(k, ck, 3, 300) if k[2][0][1] == 7 else (k, ck, p, b)
             for k, ck, p, b in idle[:-1]] + [(idle[-1][0], idle[-1][1], 8, 800)]
    d.poll('h1', later)
    assert d.wire(7)['a_to_b']['entered_packets'] == 3
    assert d.wire(2000)['a_to_b']['entered_packets'] == 8
    assert d.wire(5)['a_to_b']['entered_packets'] == 0


def test_held_and_infrastructure_drops_count_per_host():
    c = counters()
    held = ids.wire_cookie(CID) | ids.ROLE_HELD_B
    c.poll('h2', [(K2, held, 4, 40),
                  ((0, 1, (('in_port', 65000),)),
                   ids.wire_cookie(0) | ids.ROLE_REJECTED, 2, 20),
                  ((0, 0, ()), ids.wire_cookie(0) | ids.ROLE_UNWIRED, 5, 50)])
    assert c.host('h2')['held_packets'] == 4
    assert c.host('h2')['rejected_packets'] == 2
    assert c.host('h2')['unwired_packets'] == 5
    assert ab(c)['held_packets'] == 4


# -- the controller and the fake switch ---------------------------------------

def _stats(h, wid):
    h.collect()
    return h.call(h.ctl.views.wire_stats, wid)


def _never_back(before, after):
    for d in ('a_to_b', 'b_to_a'):
        for k in ('entered_packets', 'delivered_packets', 'entered_bytes',
                  'delivered_bytes'):
            assert after[d][k] >= before[d][k], (d, k, before, after)


def test_counters_follow_an_end_moving_and_collapsing():
    """b moves next to a (collapsed: flows replaced), then away again (h1's
    flow to b removed): every frame counted once each way."""
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 3))
    w = h.connect('a', 'b')['id']
    sent = 0
    for step in (lambda: h.host('h1', ('a', 1), ('b', 2)),
                 lambda: h.host('h2', ('b', 3)) or h.host('h1', ('a', 1)),
                 lambda: None):
        for _ in range(5):
            assert h.send('h1', 1)
            sent += 1
        before = _stats(h, w)
        step()
        after = _stats(h, w)
        _never_back(before, after)
    st = _stats(h, w)
    assert st['a_to_b']['entered_packets'] == sent
    assert st['a_to_b']['delivered_packets'] == sent
    assert st['a_to_b']['lost_packets'] == 0


def test_counters_through_a_migration_count_held_frames_and_lose_none():
    h = Harness()
    h.host('h1', ('g', 1))
    h.host('h2')
    h.host('h3', ('f', 5))
    w = h.connect('g', 'f')['id']
    vm = str(uuid.uuid4())
    h.call(h.ctl.moves.announce_migration, {'vm': 'guest', 'vm_uuid': vm,
                                            'vnics': ['g'], 'destination': 'h2'})
    h.send('h3', 5)
    h.host('h2', ('g', 2))                          # destination tap
    s0 = _stats(h, w)
    for _ in range(3):                              # held on h2, to h1 too
        assert h.send('h3', 5) == [('h1', 1)]
    assert h.send('h2', 2, eth_type=0x8035) == [('h3', 5)]   # activates
    s1 = _stats(h, w)
    _never_back(s0, s1)
    h.send('h3', 5)
    h.host('h1')                                    # the source goes
    h.send('h3', 5)
    s2 = _stats(h, w)
    _never_back(s1, s2)
    f_to_g = 'b_to_a'                               # g is end a
    assert s2[f_to_g]['entered_packets'] == 6
    # 1 before, 3 delivered on the source while held on h2, 2 on h2.
    assert s2[f_to_g]['delivered_packets'] == 6
    assert s2[f_to_g]['held_packets'] == 3
    assert h.call(h.ctl.views.host_view, 'h2')['drops']['held_packets'] == 3
    assert s2['a_to_b']['entered_packets'] == 1


def test_counters_continue_across_a_controller_restart():
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 3))
    w = h.connect('a', 'b')['id']
    for _ in range(4):
        h.send('h1', 1)
    before = _stats(h, w)
    h.call(h.ctl.collector.save)
    for _ in range(2):                    # counted while no controller ran
        h.send('h1', 1)
    n = Harness(intent=h.intent, runtime=h.runtime, fabric=h.fabric)
    n.host('h1', ('a', 1), connect=False)
    n.host('h2', ('b', 3), connect=False)
    n.reconnect('h1')
    # Until h2 is read again its frames since the save are not credited:
    # the wire would show less than before, so it shows nothing yet.
    n.collect()
    with pytest.raises(errors.Unavailable):
        n.call(n.ctl.views.wire_stats, w)
    n.reconnect('h2')
    after = _stats(n, w)
    _never_back(before, after)
    assert after['a_to_b']['entered_packets'] == 6
    assert after['a_to_b']['delivered_packets'] == 6


def test_rejected_and_unwired_frames_are_counted_per_host():
    """A frame from a vNIC no wire has, and a tunnel frame no wire accepts
    from its source (a forged one): dropped, each counted apart."""
    h = Harness()
    h.host('h1', ('a', 1), ('u', 4))
    h.host('h2', ('b', 3))
    wid = h.connect('a', 'b')['id']
    assert h.send('h1', 4) == []                   # unwired vNIC
    forged = Packet(TUN, tunnel_id=wid, tun_ipv4_src='198.19.0.66')
    assert h.fabric.send('h2', TUN, forged=forged) == []
    h.collect()
    d1 = h.call(h.ctl.views.host_view, 'h1')['drops']
    d2 = h.call(h.ctl.views.host_view, 'h2')['drops']
    assert (d1['unwired_packets'], d1['rejected_packets']) == (1, 0)
    assert (d2['unwired_packets'], d2['rejected_packets']) == (0, 1)


def test_the_collector_paces_itself_and_never_overlaps_cycles():
    """Cycles start no sooner than the interval, nor sooner than four times
    what the last one took (the collector's budget); a switch that never
    answers holds a cycle for STUCK seconds at most."""
    from virtualwire.metrics import collector as col
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 3))
    h.connect('a', 'b')
    c, t = h.ctl.collector, [1000.0]
    c.clock = lambda: t[0]

    def due():
        h.loop.post(c.due)
        h.settle()
        return c.cycle['cycles']
    assert due() == 1
    t[0] += 1.0
    assert due() == 1                               # within the interval
    t[0] += 1.0
    assert due() == 2
    # A slow cycle: the replies come 3 s after the requests.
    t[0] += 2.0
    h.loop.post(c.due)
    h.loop.run_pending()
    assert c.pending
    t[0] += 3.0
    h.settle()
    assert c.cycle['cycles'] == 3 and c.cycle['pace_s'] == 3.0 / col.BUDGET
    t[0] += 8.0                                     # 11 s after its start
    assert due() == 3
    t[0] += 1.0
    assert due() == 4
    # A cycle nobody answers is given up after STUCK, then one more starts.
    t[0] += 12.0
    h.loop.post(c.due)
    h.loop.run_pending()                            # sent, not answered
    t[0] += col.STUCK - 1
    h.loop.post(c.due)
    h.loop.run_pending()
    assert c.cycle['cycles'] == 4 and c.pending
    t[0] += 2
    h.loop.post(c.due)
    h.loop.run_pending()
    assert c.cycle['cycles'] == 5 and c.pending     # the next one is out


def test_loss_is_judged_once_the_far_end_was_read_after_the_frames():
    """200 frames enter, 50 die on the underlay: the cycle that reads them
    calls the 50 unsettled, not lost (they could be in flight or not
    counted yet); the next cycle, read LAG + FLIGHT after it, proves
    them lost. Before and after, the window never says more."""
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 3))
    w = h.connect('a', 'b')
    c, t = h.ctl.collector, [1000.0]
    c.clock = lambda: t[0]
    h.collect()
    carry = h.fabric.by_address
    for i in range(200):
        h.fabric.by_address = (lambda ip: None) if i % 4 == 0 else carry
        h.send('h1', 1)
    h.fabric.by_address = carry
    t[0] += 2.0
    h.collect()
    st = h.call(h.ctl.views.wire_stats, w['id'])['a_to_b']
    win = st['window']
    assert (win['entered_packets'], win['delivered_packets']) == (200, 150)
    assert (win['surely_lost_packets'], win['uncertain_packets']) == (0, 50)
    assert (st['lost_packets'], st['unsettled_packets']) == (0, 50)
    t[0] += 2.0
    h.collect()
    st = h.call(h.ctl.views.wire_stats, w['id'])['a_to_b']
    assert (st['window']['surely_lost_packets'],
            st['window']['uncertain_packets']) == (50, 0)
    assert (st['lost_packets'], st['unsettled_packets']) == (50, 0)


def test_a_switch_gone_mid_cycle_holds_neither_the_cycle_nor_the_pace():
    from virtualwire.metrics import collector as col
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 3))
    h.connect('a', 'b')
    c, t = h.ctl.collector, [1000.0]
    c.clock = lambda: t[0]
    h.loop.post(c.due)
    h.loop.run_pending()                        # asked, not answered yet
    assert len(c.pending) == 2
    t[0] += 3.0
    h.loop.post(lambda: h.ctl.sessions.clear())  # both switches went
    h.loop.post(c.due)
    h.loop.run_pending()
    # The wait was not the cycle's cost (it would have paced the next one
    # 3 s / BUDGET later): the next cycle started at once (nothing to ask).
    assert c.cycle['cycles'] == 2 and not c.pending
    assert c.next_at == t[0] + c.interval < 1000.0 + 3.0 / col.BUDGET
