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
from typing import NamedTuple, Optional

import ovs.db.idl

from os_ken.lib import hub

LOG = logging.getLogger(__name__)
LOCK = 'virtualwire_leader'      # an OVSDB <id>: no hyphens


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
        self._claiming = False
        client.idl.set_lock(LOCK)

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
        """After each IDL run: the lock held (and the connection up) or
        not. Taking over needs a transaction, which the pump cannot wait
        for, so it runs on a green thread of its own."""
        with self.client.lock:
            has = self.client.idl.has_lock and \
                self.client.idl._session.is_connected()
            seen = self._leader_row()
        st = self.state
        if st.active and not has:
            LOG.warning('lost the leader lock (term %d): now standby',
                        st.term)
            self._set(State(False, st.term, seen))
        elif not st.active and has and not self._claiming:
            self._claiming = True
            hub.spawn(self._claim)
        elif not st.active and seen != st.leader:
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
