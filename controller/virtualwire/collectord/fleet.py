"""The collector process's state: every switch it reads, every wire's
counters, their recent history, and what changed for whom asks.

Faucet's Gauge is the model: one poller per switch, each on its own
schedule from a jittered start (a fleet reconnecting at once is not read
at once), reading with a role that cannot write (`ofapp`). Nothing here
touches a socket: `send(switch, msg)` and the clock come in, readings
and flow-removed messages are handed over by the OpenFlow app, figures go
out as a feed (`feed`) that controllers mirror (`metrics.remote`).

Counting is `metrics.counters.FlowCounters`, as in the controller's own
collector: monotonic per wire through migrations, switch restarts and
restarts of this process (the base is saved as rows, `store.counter_rows`,
only by the holder of the collector lock).

History is kept only for wires whose counts moved in the last WINDOW (the
figures of a quiet wire are its totals and a flat window): at 100,000
mostly idle wires, memory and work follow the busy ones.
"""
import collections
import logging
import math
import random
import time
from typing import Dict, Optional

from virtualwire.collectord.switch_trust import SwitchTrust
from virtualwire.core import ids
from virtualwire.metrics import loss
from virtualwire.metrics.counters import FlowCounters
from virtualwire.metrics.figures import WINDOW, flat, window
from virtualwire.metrics.switch_ports import (READ_MARK, READ_MASK,
                                              SwitchPorts, split)
from virtualwire.southbound import counter_keys, openflow

LOG = logging.getLogger(__name__)
# A reading costs this process CPU (os-ken parses every flow): a switch is
# read again no sooner than its last reading took / BUDGET, so one huge
# table cannot keep the process busy; and the whole process uses at most
# CPU_SHARE of a core: when its readings cost more, every poller reads
# less often (measured: 50 switches of 800 flows each, read every second,
# took half a core of a 2-core host from the controller and the switches).
BUDGET = 0.25
CPU_SHARE = 0.25
# The stretch is at most this: CPU spent on anything but readings (wire
# events, the feed) does not shrink when readings are spaced out, so the
# stretch compounded each interval: 100,000 wires made in batches raised
# it past 1e9 and the collector stopped reading altogether.
MAX_STRETCH = 30.0
STUCK = 10.0            # s before a poller stops waiting for a reply
UNREAD_GRACE = 30.0     # s after start to wait for hosts not reconnecting


class Switch:
    """One connected switch and its poller's schedule."""

    def __init__(self, dpid, conn, next_at, up_at=0.0, identity=None):
        self.dpid, self.conn = dpid, conn
        self.identity = identity              # its certificate's names
        self.up_at = up_at                    # when it connected
        self.name: Optional[str] = None      # its host, once known
        self.next_at = next_at
        self.xid = None                       # reading in flight
        self.sent_at = None
        self.body: list = []
        self.read_at: Optional[float] = None
        self.took: Optional[float] = None
        self.readings = 0


class Fleet:
    def __init__(self, send, interval=2.0, clock=time.time,
                 rng=random.random, persist_every=10.0,
                 cpu=time.process_time, lag=loss.LAG, flight=loss.FLIGHT,
                 trust=None):
        self.send = send                 # send(conn, msg) -> xid
        self.trust = trust or SwitchTrust()
        self.interval, self.persist_every = interval, persist_every
        self.clock, self.rng = clock, rng
        # CPU this process used, and how much longer than the interval
        # each poller waits to keep it under CPU_SHARE (1: not at all).
        self.cpu = cpu
        self._cpu_mark = (clock(), cpu())
        self.stretch = 1.0
        self.counters = FlowCounters(counter_keys.decoded,
                                     loss.LossLedger(lag, flight))
        # host -> when the request its last reading answered was sent
        # (kept while it is away: its wires' judgement waits for it).
        self.asked_at: Dict[str, float] = {}
        self.moved_at: Dict[int, float] = {}   # cid -> its last credit
        self.up_at: Dict[str, float] = {}      # host -> when last up
        self.switches: Dict[int, Switch] = {}
        self.switch_ports = SwitchPorts()    # provider switches' ports
        self.names: Dict[int, str] = {}      # dpid -> host name
        self.history: Dict[int, collections.deque] = {}
        self.last_sample = clock()
        # The feed: a generation per sample; cid -> the generation its
        # figures last changed in (a quiet wire's window still moves until
        # WINDOW after its last frame).
        self.epoch = '%016x' % random.getrandbits(64)
        self.gen = 0
        self.changed: Dict[int, int] = {}
        self.hosts_gen = 0
        self.on_sample = None            # called after each sample
        self.ready = False
        self.unread: set = set()
        self.started_at = clock()
        self.dirty = self.urgent = False
        self.saved_at = clock()
        self.stats = {'readings': 0, 'flows_read': 0, 'flow_removed': 0,
                      'gave_up': 0, 'samples': 0, 'cpu_share': 0.0}

    # -- start ---------------------------------------------------------------
    def restore(self, snap):
        if snap:
            self.counters.restore(snap, at=self.clock())
            self.unread = set(self.counters.seen)
            LOG.info('counters restored: %d wires, %d hosts',
                     len(self.counters.wires), len(self.counters.seen))

    def wire_events(self, events):
        """[(cid, identity or None: deleted)] from the intent database."""
        for cid, ident in events:
            if ident is None:
                self.counters.forget(cid)
                self.history.pop(cid, None)
                self.changed.pop(cid, None)
            else:
                self.counters.track_one(cid, ident)

    # -- switches ------------------------------------------------------------
    def switch_up(self, dpid, conn, identity=None):
        """A switch connected (`identity`: its certificate's names). Read
        only as the host whose certificate it holds (`switch_trust`)."""
        now = self.clock()
        why = self.trust.refusal(dpid, identity, self.names.get(dpid))
        if why is not None:
            self.trust.refuse(conn, dpid, why)
            return None
        old = self.switches.get(dpid)
        if old is not None and old.conn is not conn:
            self.trust.hang_up(old.conn)        # replaced: it reconnected
        # A jittered first reading: a fleet that connects at once (after a
        # restart of this process) is read spread over one interval.
        self.switches[dpid] = s = Switch(dpid, conn,
                                         now + self.rng() * self.interval,
                                         up_at=now, identity=identity)
        s.name = self.names.get(dpid)
        if s.name is not None:
            self.up_at[s.name] = now
        return s

    def switch_down(self, dpid, conn):
        s = self.switches.get(dpid)
        if s is not None and s.conn is conn:
            del self.switches[dpid]

    def unnamed(self):
        """Datapath ids whose host is not known yet (not read until it
        is: a switch the controller never admitted has no host row)."""
        return [d for d, s in self.switches.items() if s.name is None]

    def learn_names(self, names):
        """{dpid: host name} from the controller's host rows. A host
        named and never read holds every judgement back until it is read,
        or for AWAY: CI saw a host's switch connect to a new collector
        process 7 s after a wire was made, and the frames it had
        delivered meanwhile judged lost."""
        self.names.update(names)
        now = self.clock()
        for name in names.values():
            self.up_at.setdefault(name, now)
        for d, s in list(self.switches.items()):
            if s.name is None and d in names:
                why = self.trust.refusal(d, s.identity, names[d])
                if why is not None:
                    self._drop(s, why)
                    continue
                s.name = names[d]
                self.up_at[s.name] = self.clock()

    def on_revocations(self, entries):
        """The revocation list changed: every switch whose certificate it
        takes back is hung up and forgotten."""
        self.trust.revoked = entries
        for d, s in list(self.switches.items()):
            why = self.trust.refusal(d, s.identity, s.name)
            if why is not None:
                self._drop(s, why)

    def _drop(self, s, why):
        del self.switches[s.dpid]
        self.trust.refuse(s.conn, s.dpid, why)

    def tick(self):
        """Each poller whose time has come sends its reading; one waiting
        for longer than STUCK gives up (read again next time)."""
        now = self.clock()
        self.ready = self.ready or not self.unread or \
            now - self.started_at > UNREAD_GRACE
        for s in self.switches.values():
            if s.xid is not None:
                if now - s.sent_at < max(STUCK, 5 * self.interval):
                    continue
                self.stats['gave_up'] += 1
                s.xid, s.body = None, []
            if s.name is None or now < s.next_at:
                continue
            s.sent_at, s.body = now, []
            s.xid = self.send(s.conn, openflow.flow_stats_request(
                READ_MARK, READ_MASK))     # wires' and provider switches'

    def reply(self, dpid, conn, xid, body, more):
        s = self.switches.get(dpid)
        if s is None or s.conn is not conn or s.xid != xid:
            return
        s.body.extend(body)
        if more:
            return
        now = self.clock()
        wires, switches = split(s.body)
        self.switch_ports.take(s.name, switches, self.gen + 1)
        readings = [(counter_keys.counter_key(st), st.cookie, st.packet_count,
                     st.byte_count) for st in wires]
        self.urgent |= self.counters.poll(s.name, readings, at=now,
                                          fresh=s.readings == 0)
        if s.name is not None and s.sent_at is not None:
            self.asked_at[s.name] = s.sent_at
        self.unread.discard(s.name)
        s.took = now - s.sent_at
        s.read_at, s.xid, s.body = now, None, []
        s.next_at = s.sent_at + max(self.interval * self.stretch,
                                    s.took / BUDGET)
        s.readings += 1
        self.stats['readings'] += 1
        self.stats['flows_read'] += len(readings)
        self.dirty = True

    def flow_removed(self, dpid, conn, msg):
        s = self.switches.get(dpid)
        if s is None or s.conn is not conn or s.name is None or \
                ids.connector_of_cookie(msg.cookie) is None:
            return
        self.counters.removed(s.name, counter_keys.counter_key(msg), msg.cookie,
                              msg.packet_count, msg.byte_count,
                              at=self.clock())
        self.stats['flow_removed'] += 1
        self.urgent = True

    # -- history and the feed ------------------------------------------------
    def sample(self):
        """Every interval: a sample for each wire that moved, a new
        generation for each whose figures changed. Returns True if the
        counter base is due to be saved."""
        now = self.clock()
        self._pace(now)
        self.gen += 1
        self.stats['samples'] += 1
        ledger = self.counters.loss
        for cid, before in self.counters.take_touched().items():
            self.changed[cid] = self.gen
            if cid not in self.history and self.counters.raw(cid) == before:
                # New and still at zero (just tracked): in the feed once,
                # no history. With history it would be re-sent at every
                # sample for a window: 100,000 new wires made the
                # controller's mirror spend 27% of its CPU decoding them.
                continue
            self.moved_at[cid] = now
            if cid not in self.history:
                self.history[cid] = collections.deque([(
                    float('-inf'), self.last_sample, before,
                    ledger.lost(cid))])
        # Every busy wire gets a sample, moved or not: its loss is judged
        # by the samples after its last frames (`loss`). A quiet one that
        # was cut is read once wholly after its cut.
        floor = self._floor(now)
        for cid in [c for c in ledger.pending if c not in self.history]:
            ledger.resolve(cid, loss.lower_bound(
                floor, self.counters.pins.get(cid, ()), self.asked_at,
                self.counters.loss.lag), self.counters.raw(cid))
        for cid in list(self.history):
            h = self.history[cid]
            self.changed[cid] = self.gen       # its window still moves
            if now - self.moved_at.get(cid, now) > WINDOW + 2 * self.interval:
                del self.history[cid]     # flat for a whole window: quiet
                self.moved_at.pop(cid, None)
                continue
            lower = loss.lower_bound(floor, self.counters.pins.get(cid, ()),
                                     self.asked_at, self.counters.loss.lag)
            raw = self.counters.raw(cid)
            h.append((lower, now, raw, ledger.judge(cid, h, lower, raw)))
            while len(h) > 2 and now - h[1][1] >= WINDOW:
                h.popleft()
        self.last_sample = now
        if self.on_sample is not None:
            self.on_sample()
        return self.urgent or (self.dirty and
                               now - self.saved_at >= self.persist_every)

    def _floor(self, now):
        """`loss.floor`: a switch may hold flows of a wire it has not
        counted for yet, read or not."""
        unnamed_since = None
        for s in self.switches.values():
            if s.name is not None:
                self.up_at[s.name] = now
            else:
                unnamed_since = s.up_at if unnamed_since is None \
                    else min(unnamed_since, s.up_at)
        # A switch connected and not named yet (its host row not read) is
        # not read either, yet may deliver any wire's frames: CI saw a new
        # wire's other end unnamed for 6 s and 6 frames judged lost that
        # arrived. Nothing is judged until it is named and read, or for
        # AWAY (one no host row ever names, a switch the controller never
        # admitted, must not stop every judgement for ever).
        if unnamed_since is not None and now - unnamed_since < loss.AWAY:
            return -math.inf
        return loss.floor(now, self.up_at, self.asked_at)

    def _pace(self, now):
        """Over each interval, the share of a core this process used sets
        how much the pollers stretch their interval: up at once (a cost
        that appeared is cut the next interval), down halfway each time (so
        it settles without swinging)."""
        t0, c0 = self._cpu_mark
        if now - t0 < self.interval:
            return
        c1 = self.cpu()
        share = (c1 - c0) / (now - t0)
        want = min(MAX_STRETCH, max(1.0, self.stretch * share / CPU_SHARE))
        self.stretch = want if want > self.stretch else \
            max(1.0, (self.stretch + want) / 2.0)
        self._cpu_mark = (now, c1)
        self.stats['cpu_share'] = round(share, 3)

    def figures(self, cid, now=None):
        """Totals each way with the window (as the controller's own
        collector answers `wire`)."""
        now = self.clock() if now is None else now
        w = self.counters.wire(cid, zero_if_unknown=True)
        h = self.history.get(cid)
        if h and len(h) >= 2:
            f = window(h[0], h[-1])
        else:
            f = flat(now, self.counters.raw(cid), self.counters.loss.lost(cid))
        for d, figures in f.items():
            w[d]['window'] = figures
        return w

    def spread(self):
        reads = [s.read_at for s in self.switches.values() if s.read_at]
        # Pollers are not in step: two ends' readings are up to one
        # interval apart.
        return min(self.interval, max(reads) - min(reads)) if reads else 0.0

    def feed(self, epoch, since):
        """What changed since generation `since` of this process's epoch
        (everything, for another epoch: a new mirror or a restart)."""
        now = self.clock()
        full = epoch != self.epoch or since > self.gen
        if full:
            cids = [c for c in self.counters.wires if self._counted(c)]
        else:
            cids = [c for c, g in self.changed.items() if g > since]
        # A wire that never counted a frame is sent as null (the mirror
        # shows zeros with a flat window, as `figures` would): at 100,000
        # idle wires their figures were 1.4 KB each in the controller's
        # mirror and 200 MB of JSON per full feed.
        return {'epoch': self.epoch, 'gen': self.gen, 'full': full,
                'ready': self.ready, 'interval': self.interval,
                'wires': {str(c): self.figures(c, now)
                          if self._counted(c) else None for c in cids
                          if c in self.counters.wires},
                'hosts': {h: self.counters.host(h)
                          for h in self.counters.hosts},
                'switch_ports': self.switch_ports.feed(
                    None if full else since),
                'status': self.status()}

    def _counted(self, cid):
        return bool(self.counters.wires.get(cid)) or cid in self.history

    def status(self):
        reads = [s for s in self.switches.values() if s.took is not None]
        took = max((s.took or 0.0 for s in reads), default=None)
        return dict(self.stats, interval=self.interval, ready=self.ready,
                    switches=len(self.switches),
                    switches_unnamed=len(self.unnamed()),
                    wires=len(self.counters.wires),
                    busy_wires=len(self.history),
                    # As the controller's own collector reports them.
                    took_ms=round(took * 1e3, 3) if took is not None
                    else None,
                    pace_s=round(max((s.next_at - (s.sent_at or 0.0)
                                      for s in reads), default=0.0), 3),
                    flows=self.stats['flows_read'],
                    cycles=self.stats['samples'],
                    spread_s=round(self.spread(), 3),
                    stretch=round(self.stretch, 2), **self.trust.view())

    def snapshot(self):
        self.dirty = self.urgent = False
        self.saved_at = self.clock()
        return self.counters.snapshot()
