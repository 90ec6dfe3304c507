"""Which controller instance leads: an OVSDB lock on the intent database,
as ovn-northd does it ("lock acquired, now active" / "standby").

Every instance asks the intent database for the lock `virtualwire_leader`;
the server grants it to one session at a time and hands it to the next
one waiting when that session ends (a killed process's socket closes at
once; a host that vanishes is noticed by the inactivity probe). On a
cluster the IDL talks to the RAFT leader only, so every instance asks the
same server.

Having the lock, an instance raises the term in the one `Leadership` row
(a transaction that asserts the lock, so only the holder can write it)
and becomes active with that term: it is the OpenFlow generation id of
its MASTER role requests, so a switch refuses an older leader's, and
standbys send it with SLAVE (a switch also refuses a role request older
than the newest it has seen). The row also says where the leader's REST
API is, for standbys to redirect writes to.

What this does not protect against: an instance that keeps acting after
losing its lock before it notices (at most until its connection's next
read fails, or the new leader's MASTER request demotes it on every switch
first: OVS then refuses its flow changes).
"""
import datetime
import logging
import time
from typing import NamedTuple, Optional

import ovs.db.idl

from os_ken.lib import hub

LOG = logging.getLogger(__name__)
LOCK = 'virtualwire_leader'      # an OVSDB <id>: no hyphens
# A standby asks for the lock only once connected this long, so that after
# a database member's failure (every instance reconnecting) the leader,
# asking at once, keeps it; a leader out of touch this long steps down.
GRACE = 3.0
STEP_DOWN = 5.0


class Leader(NamedTuple):
    term: int
    holder: str
    rest_url: str
    since: str
    southbound_url: str            # its REST on the management network


class State(NamedTuple):
    """One instance's view, replaced whole (readers on other green threads
    see one consistent value)."""
    active: bool
    term: int                      # ours if active, else the newest seen
    leader: Optional[Leader]


class Leadership:
    """on_change(State) is called (from a pump green thread: post it to the
    control loop) whenever this instance becomes active or standby."""

    def __init__(self, client, holder, rest_url, southbound_url='',
                 on_change=None):
        self.client = client           # the intent store's IdlClient
        self.holder, self.rest_url = holder, rest_url
        self.southbound_url = southbound_url
        self.on_change = on_change
        self.state = State(False, 0, None)
        self.clock, self.spawn = time.monotonic, hub.spawn
        self._claiming = False
        self._up_since = self._down_since = None

    def leader(self) -> Optional[Leader]:
        with self.client.lock:
            return self._leader_row()

    def _leader_row(self):
        table = self.client.idl.tables.get('Leadership')
        if table is None:           # a database older than schema 1.8.0
            return None
        rows = list(table.rows.values())
        if not rows:
            return None
        r = rows[0]
        return Leader(r.term, r.holder, r.rest_url, r.since,
                      r.southbound_url)

    def poll(self, _client=None):
        """After each IDL run: act on the lock and the connection. Taking
        over needs a transaction, which the pump cannot wait for, so it
        runs on a green thread of its own."""
        now = self.clock()
        with self.client.lock:
            idl = self.client.idl
            up = idl._session.is_connected()
            has, contended = idl.has_lock and up, idl.is_lock_contended
            seen = self._leader_row()
            if not up:
                self._up_since = None
                self._down_since = self._down_since or now
                if not self.state.active and idl.lock_name:
                    idl.set_lock(None)      # ask again only after GRACE
            else:
                self._down_since = None
                self._up_since = self._up_since or now
                # At once if no one else led last (a new database, or
                # this instance restarted).
                if not self.state.active and not idl.lock_name and (
                        now - self._up_since >= GRACE or
                        seen is None or seen.holder == self.holder):
                    idl.set_lock(LOCK)
        st = self.state
        if st.active:
            ours = seen is not None and seen.term == st.term and \
                seen.holder == self.holder
            if has and seen is not None and not ours and \
                    not self._claiming:
                # The lock again, after someone else had it: a new term.
                self._claiming = True
                self.spawn(self._claim)
            elif contended or (self._down_since is not None and
                               now - self._down_since > STEP_DOWN):
                LOG.warning('lost the leader lock (term %d, %s): now '
                            'standby', st.term, 'held by another instance'
                            if contended else 'database unreachable')
                with self.client.lock:
                    self.client.idl.set_lock(None)
                self._set(State(False, st.term, seen))
        elif has and not self._claiming:
            self._claiming = True
            self.spawn(self._claim)
        elif seen != st.leader:
            self._set(State(False, seen.term if seen else 0, seen))

    def _claim(self):
        try:
            term = self._raise_term()
        finally:
            self._claiming = False
        if term is not None:
            LOG.info('leader lock acquired: now active, term %d', term)
            self._set(State(True, term, self.leader()))

    def _raise_term(self):
        if 'Leadership' not in self.client.idl.tables:
            LOG.error('the intent database has no Leadership table (schema '
                      'older than 1.8.0): convert it with ovsdb-client '
                      'convert; this instance stays standby')
            return None
        since = datetime.datetime.now(datetime.timezone.utc) \
            .isoformat(timespec='seconds')
        terms = []

        def build(txn, idl):
            rows = list(idl.tables['Leadership'].rows.values())
            row = rows[0] if rows else txn.insert(idl.tables['Leadership'])
            term = (rows[0].term if rows else 0) + 1
            row.term, row.holder, row.rest_url, row.since = \
                term, self.holder, self.rest_url, since
            row.southbound_url = self.southbound_url
            terms.append(term)

        status, txn = self.client.transact(build)
        if status != ovs.db.idl.Transaction.SUCCESS:
            LOG.warning('could not raise the term (%s %s): staying standby',
                        status, txn.get_error())
            return None
        return terms[-1]

    def _set(self, state):
        self.state = state
        if self.on_change is not None:
            self.on_change(state)
