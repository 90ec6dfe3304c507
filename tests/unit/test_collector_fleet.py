"""The collector process's core (`collectord.fleet`) and the controller's
mirror of it (`metrics.remote`), without sockets: pollers per switch on
jittered schedules, nothing read before the controller named the switch,
counts credited once, a feed that carries only what changed."""
from types import SimpleNamespace

import pytest

from virtualwire.collectord.fleet import BUDGET, Fleet
from virtualwire.core import errors, ids
from virtualwire.metrics.figures import WINDOW
from virtualwire.metrics.remote import RemoteCollector

CID, OTHER = 7, 9
A_IN = ids.wire_cookie(CID) | ids.ROLE_ENTERS_A
B_OUT = ids.wire_cookie(CID) | ids.ROLE_DELIVERS_B


def stat(port, cookie, packets, nbytes=None):
    return SimpleNamespace(table_id=0, priority=100,
                           match={'in_port': port}, cookie=cookie,
                           packet_count=packets,
                           byte_count=packets * 100 if nbytes is None
                           else nbytes)


class World:
    def __init__(self, jitter=(0.5, 0.1)):
        self.t = 1000.0
        self.sent = []           # (conn, msg)
        rng = iter(jitter * 10)
        self.fleet = Fleet(self.send, interval=2.0, clock=lambda: self.t,
                           rng=lambda: next(rng))
        self.fleet.wire_events([(CID, 't0'), (OTHER, 't0')])
        self.xid = 0

    def send(self, conn, msg):
        self.xid += 1
        self.sent.append((conn, self.xid))
        return self.xid

    def pending(self, conn):
        return [x for c, x in self.sent if c == conn]

    def answer(self, dpid, conn, body):
        self.fleet.reply(dpid, conn, self.pending(conn)[-1], body, False)

    def read_h1(self, body):
        """Switch 1 (host h1) connected, named and read once: `body`."""
        self.fleet.switch_up(1, 'c1')
        self.fleet.learn_names({1: 'h1'})
        self.t += 3
        self.fleet.tick()
        self.answer(1, 'c1', body)


def test_each_switch_is_read_on_its_own_jittered_schedule_once_named():
    w = World(jitter=(0.5, 0.1))
    f = w.fleet
    f.switch_up(1, 'c1')
    f.switch_up(2, 'c2')
    assert f.unnamed() == [1, 2]
    w.t += 5
    f.tick()
    assert w.sent == [], 'a switch no host row names is never read'
    f.learn_names({1: 'h1', 2: 'h2'})
    # First readings spread over the interval: 2.0 x 0.5 and x 0.1.
    assert f.switches[1].next_at == 1001.0 and f.switches[2].next_at == 1000.2
    f.tick()
    assert [c for c, _ in w.sent] == ['c1', 'c2']
    f.tick()
    assert len(w.sent) == 2, 'one reading in flight per switch'


def test_readings_credit_each_increase_once_and_the_pace_follows_cost():
    w = World()
    f = w.fleet
    f.switch_up(1, 'c1')
    f.switch_up(2, 'c2')
    f.learn_names({1: 'h1', 2: 'h2'})
    w.t += 3
    f.tick()
    w.answer(1, 'c1', [stat(1, A_IN, 10)])
    w.t += 1.0          # h2 took a second to answer
    w.answer(2, 'c2', [stat(9, B_OUT, 9)])
    s2 = f.switches[2]
    assert s2.next_at == s2.sent_at + max(2.0, 1.0 / BUDGET)
    w.t += 4
    f.tick()
    w.answer(1, 'c1', [stat(1, A_IN, 15)])
    ab = f.figures(CID)['a_to_b']
    assert (ab['entered_packets'], ab['delivered_packets'],
            ab['lost_packets'], ab['unsettled_packets']) == (15, 9, 0, 6)
    # A stale reply (an earlier xid) is not credited again.
    f.reply(1, 'c1', 1, [stat(1, A_IN, 99)], False)
    assert f.figures(CID)['a_to_b']['entered_packets'] == 15


def test_a_flow_removed_credits_its_final_count_and_a_recreated_wire_starts_at_zero():
    w = World()
    f = w.fleet
    w.read_h1([stat(1, A_IN, 10)])
    gone = SimpleNamespace(table_id=0, priority=100, match={'in_port': 1},
                           cookie=A_IN, packet_count=12, byte_count=1200)
    f.flow_removed(1, 'c1', gone)
    assert f.figures(CID)['a_to_b']['entered_packets'] == 12
    assert f.urgent, 'final counts exist nowhere else: save soon'
    f.wire_events([(CID, None), (CID, 't1')])
    assert f.figures(CID)['a_to_b']['entered_packets'] == 0


def test_the_feed_carries_what_changed_and_everything_for_a_new_mirror():
    w = World()
    f = w.fleet
    w.read_h1([stat(1, A_IN, 10),
               stat(2, ids.wire_cookie(OTHER) | ids.ROLE_ENTERS_A, 4)])
    f.sample()
    full = f.feed('', 0)
    assert full['full'] and set(full['wires']) == {str(CID), str(OTHER)}
    gen = full['gen']
    w.t += 2
    f.tick()
    w.answer(1, 'c1', [stat(1, A_IN, 30),
                       stat(2, ids.wire_cookie(OTHER) | ids.ROLE_ENTERS_A,
                            4)])
    f.sample()
    inc = f.feed(f.epoch, gen)
    assert not inc['full']
    # OTHER's count did not move, but its window still does (it moved
    # less than a window ago); past the window only CID's changes count.
    assert str(CID) in inc['wires']
    win = inc['wires'][str(CID)]['a_to_b']['window']
    # Over the samples kept (up to WINDOW): from before its first frame.
    assert win['entered_packets'] == 30 and win['seconds'] == 5.0
    for _ in range(int(WINDOW / 2) + 4):
        w.t += 2
        f.sample()
    quiet = f.feed(f.epoch, f.gen - 1)
    assert quiet['wires'] == {}, 'quiet wires are not sent again'
    assert f.history == {}, 'nor kept in memory'
    # Another epoch (the mirror saw another process) gets everything.
    assert set(f.feed('other', 5)['wires']) == {str(CID), str(OTHER)}


def test_a_new_wire_at_zero_is_sent_once_and_kept_in_no_history():
    """100,000 wires made in batches: each new one is in the feed once,
    not again at every sample for a window (its window does not move)."""
    w = World()
    f = w.fleet
    w.read_h1([stat(1, A_IN, 10)])
    f.sample()
    gen = f.gen
    new = [(50000 + i, 't0') for i in range(100)]
    f.wire_events(new)
    f.sample()
    first = f.feed(f.epoch, gen)
    assert {str(c) for c, _ in new} <= set(first['wires'])
    # Sent as null: zeros, which a mirror shows without holding them.
    assert first['wires']['50000'] is None
    assert str(50000) not in f.feed('other', 0)['wires'], \
        'a full feed leaves out wires that never counted'
    assert not set(f.history) & {c for c, _ in new}
    w.t += 2
    f.sample()
    assert not set(f.feed(f.epoch, f.gen - 1)['wires']) & {
        str(c) for c, _ in new}, 'sent again while nothing moved'
    # Its first frames put it in the feed and in history like any other.
    w.t += 1
    f.tick()
    w.answer(1, 'c1', [stat(1, A_IN, 10),
                       stat(3, ids.wire_cookie(50000) | ids.ROLE_ENTERS_A,
                            7)])
    f.sample()
    assert f.feed(f.epoch, f.gen - 1)['wires']['50000']['a_to_b'][
        'entered_packets'] == 7
    assert 50000 in f.history


class LoopHere:
    def assert_owner(self):
        pass


def test_the_mirror_answers_as_the_in_process_collector_does():
    t = [100.0]
    m = RemoteCollector(LoopHere(), ['https://c'], 'tok', clock=lambda: t[0])
    with pytest.raises(errors.Unavailable, match='not read yet'):
        m.check_ready()
    w = World()
    f = w.fleet
    w.read_h1([stat(1, A_IN, 10)])
    f.ready = True
    f.sample()
    m.apply('https://c', f.feed('', 0))
    assert m.wire(CID)['a_to_b']['entered_packets'] == 10
    assert 'window' not in m.totals(CID)['a_to_b']
    # A wire the collector has no counts for reads as zeros, windowed.
    assert m.wire(123)['b_to_a']['window']['entered_packets'] == 0
    assert m.status()['process'] == 'https://c'
    # The wire deleted and made again under its id: its counts start from
    # zero, the feed says null and the mirror drops what it held.
    gen = f.gen
    f.wire_events([(CID, None)])
    f.wire_events([(CID, 'made again')])
    f.sample()
    doc = f.feed(f.epoch, gen)
    assert doc['wires'][str(CID)] is None
    m.apply('https://c', doc)
    assert CID not in m.mirror
    assert m.wire(CID)['a_to_b']['entered_packets'] == 0
    # A mirror that stopped hearing from the collector says so.
    m.failed('https://c: connection refused')
    t[0] += 60
    with pytest.raises(errors.Unavailable, match='connection refused'):
        m.check_ready()
    assert m.totals(CID) is None


def test_the_process_keeps_to_its_share_of_a_core():
    """Readings that cost more than CPU_SHARE of a core make every poller
    read less often; when they cost less again, the interval comes back."""
    from virtualwire.collectord.fleet import CPU_SHARE
    t, cpu = [1000.0], [0.0]
    f = Fleet(lambda conn, msg: 1, interval=2.0, clock=lambda: t[0],
              rng=lambda: 0.0, cpu=lambda: cpu[0])
    f.switch_up(1, 'c1')
    f.learn_names({1: 'h1'})
    for _ in range(4):                  # half a core: twice the share
        t[0] += 2.0
        cpu[0] += 2.0 * 2 * CPU_SHARE
        f.sample()
    assert f.stretch > 1.5 and f.status()['cpu_share'] == 2 * CPU_SHARE
    f.tick()
    f.reply(1, 'c1', 1, [], False)
    s = f.switches[1]
    assert s.next_at - s.sent_at == 2.0 * f.stretch
    for _ in range(12):                 # idle again
        t[0] += 2.0
        f.sample()
    assert f.stretch < 1.01


def test_cpu_spent_elsewhere_never_stops_the_readings():
    """CPU the process spends on anything but readings (100,000 wires'
    events, say) does not fall when readings are spaced out: the stretch
    stops at MAX_STRETCH and every switch is still read."""
    from virtualwire.collectord.fleet import CPU_SHARE, MAX_STRETCH
    t, cpu = [1000.0], [0.0]
    sent = []
    f = Fleet(lambda conn, msg: sent.append(conn) or len(sent),
              interval=2.0, clock=lambda: t[0], rng=lambda: 0.0,
              cpu=lambda: cpu[0])
    f.switch_up(1, 'c1')
    f.learn_names({1: 'h1'})
    for _ in range(200):                # a whole core, whatever we do
        t[0] += 2.0
        cpu[0] += 2.0
        f.sample()
        f.tick()
        if f.switches[1].xid is not None:
            f.reply(1, 'c1', f.switches[1].xid, [], False)
    assert f.stretch == MAX_STRETCH and 1.0 / CPU_SHARE < MAX_STRETCH
    # 400 s: read at least every MAX_STRETCH intervals (60 s).
    assert len(sent) >= 400 // (2.0 * MAX_STRETCH)


def test_nothing_is_judged_lost_while_a_connected_switch_is_unnamed():
    """CI: a new wire's end on a switch connected but not named yet (its
    host row unread) was not read for 6 s while the other end's entries
    were, and 6 frames it delivered were judged lost."""
    b_in = ids.wire_cookie(CID) | ids.ROLE_ENTERS_B
    a_out = ids.wire_cookie(CID) | ids.ROLE_DELIVERS_A
    w = World()
    f = w.fleet
    f.switch_up(1, 'c1')                 # h1: connected, unnamed
    f.switch_up(2, 'c2')
    f.learn_names({2: 'h2'})
    for n in range(1, 8):                # h2 counts entries, h1 unread
        w.t += 1.0
        f.tick()
        if f.switches[2].xid is not None:
            w.answer(2, 'c2', [stat(3, b_in, n)])
        f.sample()
    assert f.figures(CID)['b_to_a']['entered_packets'] == 7
    assert f.figures(CID)['b_to_a']['lost_packets'] == 0
    f.learn_names({1: 'h1', 2: 'h2'})
    for _ in range(6):                   # h1 read: it delivered them all
        w.t += 1.0
        f.tick()
        for dpid, conn, body in ((1, 'c1', [stat(9, a_out, 7)]),
                                 (2, 'c2', [stat(3, b_in, 7)])):
            if f.switches[dpid].xid is not None:
                w.answer(dpid, conn, body)
        f.sample()
    ba = f.figures(CID)['b_to_a']
    assert (ba['entered_packets'], ba['delivered_packets'],
            ba['lost_packets']) == (7, 7, 0)


def test_a_switch_never_named_holds_judgement_back_only_for_a_while():
    from virtualwire.metrics import loss
    w = World()
    f = w.fleet
    f.switch_up(5, 'rogue')              # no host row will ever name it
    f.switch_up(2, 'c2')
    f.learn_names({2: 'h2'})
    assert f._floor(w.t) == float('-inf')
    w.t += loss.AWAY + 1
    f.tick()
    w.answer(2, 'c2', [])
    assert f._floor(w.t) > w.t - loss.AWAY
