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
from typing import Optional

from os_ken.ofproto import ofproto_v1_4 as ofp

from virtualwire.store.leadership import Leader
from virtualwire.southbound import openflow

LOG = logging.getLogger(__name__)
TAKE_OVER, STAND_BY, RESEND = 'take over', 'stand by', 'resend'


def canonical_records(records):
    """Migration records in one order (the store gives none)."""
    return sorted(json.dumps(r, sort_keys=True) for r in records)


class Roles:
    """A part of the controller: this instance's role and term. What a
    change of role means to the rest (a rebuild, dumps, role requests to
    every switch) the controller does, as `on_leadership` says."""

    def __init__(self, active=True):
        """active=True: a lone instance without leadership (tests)."""
        self.active = active
        self.term = 0
        self.leader: Optional[Leader] = None   # newest leadership record
        self.takeovers = 0

    def on_leadership(self, state):
        """store.leadership.State: this instance's role now. Returns
        TAKE_OVER, STAND_BY (role requests to send), RESEND (the same
        role, a newer term) or None."""
        was, self.leader = self.active, state.leader
        newer = state.term != self.term
        self.term = state.term
        if state.active and not was:
            self.active = True
            self.takeovers += 1
            return TAKE_OVER
        if not state.active and was:
            LOG.warning('standby now (term %d): no more switch writes',
                        state.term)
            self.active = False
            return STAND_BY
        if not state.active and newer:
            return RESEND       # SLAVE again with the newest term
        return None

    def send_role(self, s):
        s.dp.send_msg(openflow.role_request(self.active, self.term))

    def view(self):
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
