"""Active or standby (`store.leadership` decides; this acts on it).

A standby instance reads everything an active one reads (intent, every
host's OVSDB, every switch's table, as an OpenFlow SLAVE) and writes
nothing: no bundle, no runtime row, no counter. Becoming active, it asks
every switch for MASTER with the new term, dumps each table again and
rebuilds its state from the database, as a restarted controller does
(migrations in flight, move timers from their records), so the first
sync sends a healthy switch nothing. Losing the lock, it stops writing at
once and asks for SLAVE.
"""
import json
import logging
import time
from typing import Optional

from os_ken.ofproto import ofproto_v1_4 as ofp

from virtualwire.control.migrations import MigrationBook
from virtualwire.control.state import ControllerState
from virtualwire.pipeline.incremental import IncrementalTables
from virtualwire.store.leadership import Leader
from virtualwire.southbound import openflow

LOG = logging.getLogger(__name__)


def canonical_records(records):
    """Migration records in one order (the store gives none)."""
    return sorted(json.dumps(r, sort_keys=True) for r in records)


class Roles(ControllerState):
    active: bool
    term: int
    leader: Optional[Leader]        # the newest leadership record seen
    takeovers: int

    def init_roles(self, active=True):
        """active=True: a lone instance without leadership (tests)."""
        self.active = active
        self.term = 0
        self.leader = None
        self.takeovers = 0

    def on_leadership(self, state):
        """store.leadership.State: this instance's role now."""
        self.loop.assert_owner()
        was, self.leader = self.active, state.leader
        newer = state.term != self.term
        self.term = state.term
        if state.active and not was:
            self.take_over()
        elif not state.active and was:
            LOG.warning('standby now (term %d): no more switch writes',
                        state.term)
            self.active = False
            self.send_roles()
        elif not state.active and newer:
            self.send_roles()       # SLAVE again with the newest term

    def send_roles(self):
        for s in self.sessions.values():
            self.send_role(s)

    def send_role(self, s):
        s.dp.send_msg(openflow.role_request(self.active, self.term))

    def take_over(self):
        t0 = time.monotonic()
        self.active = True
        self.takeovers += 1
        rebuilt = self.rebuild()
        for s in list(self.sessions.values()):
            self.send_role(s)
            # Its table as it is now: the last leader may have changed it
            # since our dump; the first sync then sends only what differs.
            s.installed = None
            s.dump(lambda body, s=s: self._dumped(s, body))
        LOG.info('active now, term %d: state %s in %.0f ms, %d switches '
                 'dumped again', self.term, 'rebuilt' if rebuilt else
                 'as read at start', (time.monotonic() - t0) * 1e3,
                 len(self.sessions))

    def rebuild(self):
        """State from the database and what we watched, as a restart makes
        it: the standby's own guesses (moves it saw in host views, records
        it never saved) are dropped. Not done when nothing was seen since
        start() and the database holds what start() read (a lone
        instance taking the lock as it starts): the state is a restart's
        already, and building every wire's flows twice would double the
        start-up. Returns whether it rebuilt."""
        if not self.host_owner and self.started_from == (
                self.runtime.hosts(), canonical_records(self.runtime.migrations())):
            return False
        live = dict(self.remembered)       # live host views (on_hosts)
        hold = self.tables.hold
        self.tables = IncrementalTables()
        self.tables.hold = hold
        self.migrations = MigrationBook()
        self.move_seen.clear()
        self.announced_at.clear()
        self.changed_records.clear()
        self.sisters_pending.clear()
        self.sister_hosts.clear()
        self.start(live)
        # Move timers run from each record's start, not from now.
        now, wall = self.clock(), time.time()
        for m in self.migrations.active.values():
            age = max(0.0, wall - (m.started_at or wall))
            self.announced_at[m.vm_uuid] = now - age
            for v in m.vnics:
                if v in self.tables.placement.moves:
                    self.move_seen[v] = now - age
        return True

    def role_view(self):
        ld = self.leader
        return {'active': self.active, 'term': self.term,
                'takeovers': self.takeovers,
                'leader': ld._asdict() if ld is not None else None}

    def role_refused(self, msg):
        """A switch refused a role request (a newer term exists: we will
        hear of it from the database)."""
        if msg.type != ofp.OFPET_ROLE_REQUEST_FAILED:
            return False
        LOG.warning('switch %016x refused our role request (term %d): '
                    'code %s', msg.datapath.id or 0, self.term, msg.code)
        return True

    def _dumped(self, s, body):
        raise NotImplementedError

    def start(self, live=None):
        raise NotImplementedError
