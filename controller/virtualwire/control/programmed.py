"""Batches checked against the state, and "programmed": waiting until a
change is in place on every switch (a part of `Controller`, on the loop).

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
from typing import List, Tuple

from virtualwire.control.state import ControllerState
from virtualwire.core import batch, errors, ids, tenancy
from virtualwire.future import Future

BARRIER_PATIENCE = 5.0
MAX_WAITERS = 4096


class Programmed(ControllerState):
    generation: int
    waiters: List[Tuple[int, Future]]

    # -- batches --------------------------------------------------------------
    def batch_refusals(self, pairs, cids, scope=None) -> list:
        """Items of a parsed batch the state refuses: another tenant's or
        unknown ends and wires (as nonexistent), a vNIC already wired, a
        gateway end that cannot be one."""
        self.loop.assert_owner()
        bad = []
        freed = set(cids)              # a batch may rewire what it removes
        for i, (a, b) in enumerate(pairs):
            try:
                if scope is not None:
                    scope.check_ends(a, b)
                self.check_gateway_ends(a, b)
                for v in (a, b):
                    cid = self.tables.by_vnic.get(v)
                    w = self.tables.wires.get(cid) if cid else None
                    if w is not None and cid not in freed:
                        raise scope.taken(v, (cid, w.end_a, w.end_b)) \
                            if scope is not None else errors.Conflict(
                                'vNIC %s is already wired (connector %s)'
                                % (v, ids.fmt_connector(cid)))
            except errors.VwError as e:
                bad.append(batch.item_error('create', i, e))
        for i, cid in enumerate(cids):
            w = self.tables.wires.get(cid)
            if w is None or (scope is not None and
                             not scope.sees_wire(w.end_a, w.end_b)):
                bad.append(batch.item_error('delete', i,
                                            tenancy.no_wire(cid)))
        return bad

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
        self.loop.assert_owner()
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
        self.loop.assert_owner()
        self.waiters = [(g, w) for g, w in self.waiters if w is not f]

    def programmed_view(self, gen) -> dict:
        """Where generation `gen` is in place, and where not yet."""
        self.loop.assert_owner()
        pending, missing, silent, done = [], [], [], 0
        for name, h in sorted(self.tables.hosts.items()):
            s = self.sessions.get(h.dpid)
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
        self.loop.assert_owner()
        return self.generation
