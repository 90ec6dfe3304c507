"""The collector: reads every switch's flow counters on an interval, off
the request path, into `counters.FlowCounters`; REST and /metrics answer
from its memory and never touch a switch.

Runs on the control loop like everything that owns state (`control.loop`)
but only reads: it sends flow-stats requests and takes replies,
flow-removed messages and the dump a reconnecting switch answers with.
Its state is saved on an interval (and at once after flows went away,
whose final counts exist nowhere else), so a restarted controller
continues every wire's counters exactly: the switches' flows kept
counting, and the saved state says how much of it was already credited.
"""
import collections
import logging
import time

from virtualwire.core import errors, ids
from virtualwire.metrics.counters import FlowCounters
from virtualwire.metrics import loss
from virtualwire.metrics.figures import WINDOW, window
from virtualwire.metrics.switch_ports import (READ_MARK, READ_MASK,
                                              SwitchPorts, split)
from virtualwire.southbound import counter_keys, openflow

LOG = logging.getLogger(__name__)
UNREAD_GRACE = 30.0      # s after start to wait for hosts not reconnecting
# A cycle costs the controller about 1 s of CPU per 40,000 flows (os-ken
# parses every flow's match and actions; bench_collector). Cycles never
# overlap, and the next starts no sooner than BUDGET of the time allows:
# the collector uses at most about a quarter of the controller, and reads
# less often than --stats-interval when the tables are that large.
BUDGET = 0.25
STUCK = 10.0             # s before a cycle stops waiting for a late switch


class Collector:
    def __init__(self, loop, controller, runtime, interval=2.0,
                 persist_every=10.0, clock=time.time, lag=loss.LAG,
                 flight=loss.FLIGHT):
        self.loop, self.ctl, self.runtime = loop, controller, runtime
        self.interval, self.persist_every = interval, persist_every
        self.clock = clock
        self.counters = FlowCounters(counter_keys.decoded,
                                     loss.LossLedger(lag, flight))
        self.pending = {}            # host -> (session, sent at)
        self.read_at = {}            # host -> time of its last reading
        # host -> when the request its last reading answered was sent
        self.asked_at: dict = {}
        # cid -> deque of samples (figures.window), WINDOW seconds of them
        self.history: dict = {}
        self.started = None          # when the last cycle began
        self.up_at: dict = {}        # host -> when it was last asked
        self.next_at = 0.0           # when the next may begin (`due`)
        self._reads: list = []       # when each switch answered this cycle
        self.cycle: dict = {'took_ms': None, 'pace_s': None, 'cycles': 0,
                            'replies': 0, 'flows': 0}
        # Until every host the saved state knows was read again, a wire's
        # totals could show less than before the restart: not shown yet.
        self.ready = False
        self.unread: set = set()
        self.removed_seen = 0        # flow-removed messages taken
        self.switch_ports = SwitchPorts()    # provider switches' ports
        self._dirty, self._urgent = False, False
        self._saved_at = clock()
        self.started_at = clock()

    # -- start ---------------------------------------------------------------
    def start(self):
        self.loop.assert_owner()
        snap = self.runtime.counters()
        if snap:
            self.counters.restore(snap, at=self.clock())
            self.unread = set(self.counters.seen)
            LOG.info('counters restored: %d wires, %d hosts',
                     len(self.counters.wires), len(self.counters.seen))
        self._track()

    def _track(self):
        self.counters.track({cid: w.created_at
                             for cid, w in self.ctl.tables.wires.items()})

    # -- polling ---------------------------------------------------------------
    def due(self):
        """Called often (a timer): start a cycle when the last one is over
        and its pace allows. A cycle stops waiting after STUCK, or at once
        when every switch it waits for has gone (disconnected)."""
        self.loop.assert_owner()
        now = self.clock()
        self._check_ready(now)
        if self.pending:
            live = any(self.ctl.sessions.get(s.dp.id) is s
                       for s, _ in self.pending.values())
            if live and now - self.started < max(STUCK, 5 * self.interval):
                return
            self._finish(gave_up=True)
        if now >= self.next_at:
            self.poll()

    def poll(self):
        """One cycle: a masked flow-stats request to every synced switch
        that answered the last one."""
        self.loop.assert_owner()
        if self.pending:
            self._finish(gave_up=True)   # late switches wait for next time
        now = self.clock()
        self.started, self._reads = now, []
        for h in self.ctl.tables.hosts.values():
            s = self.ctl.sessions.get(h.dpid)
            # A host known and not read yet (not connected since this
            # process started, or its table not read): up and unread, so
            # it holds judgement back for up to AWAY (it may deliver any
            # wire's frames with the flows it kept).
            self.up_at.setdefault(h.name, now)
            if s is not None and s.installed is None:
                self.up_at[h.name] = now
            if s is None or s.installed is None:
                continue
            self.pending[h.name] = (s, now)
            self.up_at[h.name] = now
            # The wires' flows and the provider switches' (`switch_ports`).
            s.request(openflow.flow_stats_request(READ_MARK, READ_MASK),
                      lambda body, n=h.name, s=s: self._replied(n, s, body))
        if not self.pending:
            self._finish()

    def _replied(self, host, session, body):
        if self.pending.get(host, (None,))[0] is not session:
            return
        sent = self.pending.pop(host)[1]
        wires = self._take_switches(host, body)
        self._urgent |= self.counters.poll(host, _readings(wires),
                                           at=self.clock())
        self.asked_at[host] = sent
        self.unread.discard(host)
        self.read_at[host] = self.clock()
        self._reads.append(self.read_at[host])
        self.cycle['replies'] += 1
        self.cycle['flows'] += len(body)
        self._dirty = True
        if not self.pending:
            self._finish()

    def _finish(self, gave_up=False):
        # The oldest request any count of this cycle may date from: a
        # switch that did not answer is as old as its last reading.
        self.pending.clear()
        self._track()
        now = self.clock()
        if self.started is not None:
            # What the cycle cost: until its last reply; waiting for a
            # switch that never answered is not work (nor a reason to
            # read less often).
            end = now if not gave_up else \
                max(self._reads) if self._reads else self.started
            took = end - self.started
            self.cycle['took_ms'] = round(took * 1e3, 3)
            self.next_at = self.started + max(self.interval, took / BUDGET)
            self.cycle['pace_s'] = round(self.next_at - self.started, 3)
        if self._reads:
            self.cycle['spread_s'] = round(max(self._reads) -
                                           min(self._reads), 3)
        self.cycle['cycles'] += 1
        self._check_ready(now)
        self._sample(now)
        if self._urgent or (self._dirty and
                            now - self._saved_at >= self.persist_every):
            self.save()

    def _check_ready(self, now):
        # Every host the saved state knows read again; or, a host gone for
        # good must not hide every figure for ever, UNREAD_GRACE.
        self.ready = self.ready or not self.unread or \
            now - self.started_at > UNREAD_GRACE

    def _sample(self, now):
        live = set(self.counters.wires)
        for cid in [c for c in self.history if c not in live]:
            del self.history[cid]
        self.counters.take_touched()    # (the collector process's use)
        floor = loss.floor(now, self.up_at, self.asked_at)
        base = floor - self.counters.loss.lag
        pins, ledger = self.counters.pins, self.counters.loss
        for cid in self.counters.wires:
            # Every wire, every cycle: read the raw counts, judge, build
            # no views.
            h = self.history.setdefault(cid, collections.deque())
            lower = loss.lower_bound(floor, pins.get(cid, ()), self.asked_at,
                                     self.counters.loss.lag, base)
            raw = self.counters.raw(cid)
            h.append((lower, now, raw, ledger.judge(cid, h, lower, raw)))
            while len(h) > 2 and now - h[1][1] >= WINDOW:
                h.popleft()

    def save(self):
        self.runtime.save_counters(self.counters.snapshot())
        self._saved_at = self.clock()
        self._dirty = self._urgent = False

    # -- switch events ---------------------------------------------------------
    def on_flow_removed(self, host, msg):
        """A flow went away with its final counters (we set
        OFPFF_SEND_FLOW_REM on ours)."""
        self.loop.assert_owner()
        if ids.connector_of_cookie(msg.cookie) is None:
            return
        self.counters.removed(host, counter_keys.counter_key(msg), msg.cookie,
                              msg.packet_count, msg.byte_count,
                              at=self.clock())
        self.removed_seen += 1
        self._urgent = True

    def on_dump(self, host, body):
        """A (re)connected switch's whole table, read before we change
        anything in it: a reading like any other. A switch that restarted
        has counters below the ones last read, credited from zero (what
        they counted between our last reading and the restart is lost,
        never counted twice)."""
        self.loop.assert_owner()
        self._take_switches(host, body)
        self._urgent |= self.counters.poll(
            host, [r for r in _readings(body)
                   if ids.connector_of_cookie(r[1]) is not None],
            at=self.clock(), fresh=True)
        self.unread.discard(host)
        self.read_at[host] = self.up_at[host] = self.clock()
        self._dirty = True

    def _take_switches(self, host, body):
        """The provider switches' counts of a reading taken; the rest
        (the wires' flows) returned."""
        wires, switches = split(body)
        self.switch_ports.take(host, switches)
        return wires

    # -- figures ---------------------------------------------------------------
    def switch_counts(self, host, number):
        """`SwitchPorts.of`: a provider switch's port counts."""
        return self.switch_ports.of(host, number) if self.ready else None

    def check_ready(self):
        """Raise Unavailable until the figures can be shown."""
        if not self.ready:
            raise errors.Unavailable('no flow counters read yet (the '
                                     'collector reads every %gs)'
                                     % self.interval)

    def totals(self, cid):
        """A wire's counters each way (a wire made since the last reading
        has counted nothing yet), or None before the first reading."""
        return self.counters.wire(cid, zero_if_unknown=True) \
            if self.ready else None

    def wire(self, cid):
        """Counters each way, rates and the loss over the last window
        (Unavailable before the first reading)."""
        self.loop.assert_owner()
        self.check_ready()
        w = self.counters.wire(cid, zero_if_unknown=True)
        h = self.history.get(cid) or collections.deque()
        if len(h) >= 2:
            for d, figures in window(h[0], h[-1]).items():
                w[d]['window'] = figures
        return w

    def host(self, name):
        self.loop.assert_owner()
        return self.counters.host(name)

    def status(self):
        return dict(self.cycle, interval=self.interval, ready=self.ready,
                    wires=len(self.counters.wires),
                    hosts_read=len(self.read_at),
                    flow_removed=self.removed_seen)


def _readings(body):
    return [(counter_keys.counter_key(st), st.cookie, st.packet_count,
             st.byte_count) for st in body]
