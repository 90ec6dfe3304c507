"""Programming the switches (a part of the controller, on its loop): each
sync's bundles, and "programmed": waiting until a change is in place on
every switch.

A sync sends each switch whose desired table changed (or that just
connected) one atomic bundle with only the difference; what else goes
with it (the orphans a safe start keeps, the held frames a move
releases) the controller asks the other parts for, through `adjust`.

Generations, as OVN's nb_cfg / hv_cfg: each intent change the loop takes
in bumps `generation`. A switch has *confirmed* generation G when the
barrier after the bundle its sync sent at G has come back, or when that
sync had nothing to send it and no earlier barrier is outstanding. A
change of generation G is programmed once every connected switch has
confirmed G; hosts whose switch is not connected are named, not waited
for (nothing can be programmed there until they come back, and then
their whole table is synced), and so are switches that have left a
barrier unanswered for BARRIER_PATIENCE seconds (one switch that ignores
barriers must not make every wait fail). A wait that times out is
forgotten; at most MAX_WAITERS wait at once.
"""
import logging
import time
from typing import Callable, Dict, List, Optional, Tuple

from virtualwire.control.shared import Shared
from virtualwire.core import errors
from virtualwire.future import Future
from virtualwire.pipeline.flow import FlowDiff, diff_flows, diff_keys

LOG = logging.getLogger(__name__)
BARRIER_PATIENCE = 5.0
MAX_WAITERS = 4096
BULK = 1000         # flow mods from which a sync's cost is logged

# (host, its diff, whether it is the whole table) -> (the diff to send,
# packet-outs to send just before it, messages to send just after it)
Adjust = Callable[[str, FlowDiff, bool], Tuple[FlowDiff, list, list]]


class Programming:
    def __init__(self, shared: Shared):
        self.shared = shared
        self.stats = shared.stats
        self.stats.update(syncs=0, bundles=0, flow_mods=0,
                          sync_host_failures=0)
        # Intent changes taken in, and who waits for one to be programmed.
        self.generation = 0
        self.waiters: List[Tuple[int, Future]] = []

    def intent_taken(self):
        """A burst of intent changes was taken in: a new generation."""
        self.generation += 1

    # -- sync -----------------------------------------------------------------
    def sync(self, hosts, adjust: Adjust) -> Dict[str, Optional[int]]:
        """Bring the switches of `hosts` (in this order) to their desired
        tables. Returns {host: barrier xid} of the bundles sent."""
        tables, sessions = self.shared.tables, self.shared.sessions
        self.stats['syncs'] += 1
        t0, mods = time.perf_counter(), self.stats['flow_mods']
        dirty = tables.pop_dirty()
        sent: Dict[str, Optional[int]] = {}
        for h in hosts:
            s = sessions.get(h.dpid)
            if s is None or s.installed is None:
                continue
            table = tables.table_map(h.name)
            full = s.needs_full
            if full:
                s.needs_full = False
                diff = diff_flows(s.installed.values(), table.values())
            elif h.name in dirty:
                diff = diff_keys(s.installed, table, dirty[h.name])
            else:
                continue
            diff, outs, after = adjust(h.name, diff, full)
            if (diff or outs or after) and \
                    self._send(h.name, s, diff, outs, after):
                sent[h.name] = s.barrier_xid
        mods = self.stats['flow_mods'] - mods
        if mods >= BULK:
            LOG.info('sync: %d flow mods in %d bundles built and sent in '
                     '%.0f ms', mods, len(sent),
                     (time.perf_counter() - t0) * 1e3)
        for h in tables.hosts.values():
            s = sessions.get(h.dpid)
            if s is not None and s.installed is not None:
                self.confirm_sync(s, h.name in sent)
        self.check_waiters()
        return sent

    def _send(self, host, s, diff, outs, after) -> bool:
        try:
            self.stats['flow_mods'] += s.send_diff(diff, before=outs,
                                                   after=after)
        except Exception:   # isolated: the other hosts go on
            LOG.exception('host %s: its changes could not be encoded; '
                          'nothing sent to it, its whole table is diffed '
                          'again next sync', host)
            self.stats['sync_host_failures'] += 1
            s.needs_full = True
            return False
        self.stats['bundles'] += 1
        LOG.info('host %s: +%d ~%d -%d flows', host, len(diff.add),
                 len(diff.modify), len(diff.delete))
        return True

    # -- generations ----------------------------------------------------------
    def confirm_sync(self, s, sent):
        """After a sync looked at switch session s: it was sent a bundle
        (`sent`) or had nothing to change."""
        if sent:
            s.sent_gen = self.generation
        elif s.barrier_xid is None or s.confirmed_gen >= s.sent_gen:
            s.confirmed_gen = s.sent_gen = self.generation
        else:
            s.sent_gen = self.generation     # the outstanding barrier covers it

    def wait_programmed(self, gen) -> Future:
        self.shared.loop.assert_owner()
        if len(self.waiters) >= MAX_WAITERS:
            raise errors.TooMany('%d requests already wait for their '
                                 'changes to be programmed; retry without '
                                 '?wait or later' % len(self.waiters))
        f = Future()
        self.waiters.append((gen, f))
        self.check_waiters()
        return f

    def forget_waiter(self, f):
        """A wait that gave up (its request timed out)."""
        self.shared.loop.assert_owner()
        self.waiters = [(g, w) for g, w in self.waiters if w is not f]

    def programmed_view(self, gen) -> dict:
        """Where generation `gen` is in place, and where not yet."""
        self.shared.loop.assert_owner()
        pending, missing, silent, done = [], [], [], 0
        for name, h in sorted(self.shared.tables.hosts.items()):
            s = self.shared.sessions.get(h.dpid)
            if s is None or s.installed is None:
                missing.append(name)
            elif s.confirmed_gen >= gen:
                done += 1
            elif s.barrier_waited() > BARRIER_PATIENCE:
                silent.append(name)
            else:
                pending.append(name)
        return {'generation': gen, 'programmed': not pending,
                'switches_confirmed': done, 'pending': pending,
                'not_connected': missing, 'not_answering': silent}

    def check_waiters(self):
        if not self.waiters:
            return
        keep = []
        for gen, f in self.waiters:
            view = self.programmed_view(gen)
            if view['programmed']:
                f.set(view)
            else:
                keep.append((gen, f))
        self.waiters = keep

    def current_generation(self):
        self.shared.loop.assert_owner()
        return self.generation
