"""Which switch connections the collector reads, and credits to whom.

Every reading of a switch is credited to one host's wires: the host whose
row names the switch's datapath id. Before, a switch was believed to be
whatever datapath id it said it was, so any machine with a certificate of
the CA could connect claiming another host's id, take over its reading
(the real switch's poller was replaced) and credit that host's counts as
it liked: wrong statistics, `/metrics`, loss and placement advice.

So, as the controller does (`control.admission`):
- a connection is read as host NAME's switch only if its certificate
  names NAME (checked when it connects, or when NAME's row is read, if
  later); otherwise it is hung up, counted and listed;
- a certificate the revocation list takes back (`core.revocation`) is
  refused when it connects, and a connected one is hung up as soon as the
  list says so;
- a second connection for a datapath id replaces the first only with the
  same host's certificate (a switch reconnecting); the first is hung up.

What this does not stop: a host's own switch reports its own flows, so a
compromised hypervisor can still misstate the counts of flows it holds,
cookies included. Without TLS (the lab flag) identities are None and every
connection is believed, as before.
"""
import collections
import logging
import time

from virtualwire.core import revocation

LOG = logging.getLogger(__name__)
KEEP_REFUSALS = 50


class SwitchTrust:
    def __init__(self, hang_up=None, require_identity=False,
                 clock=time.time):
        self.hang_up = hang_up or (lambda conn: None)
        self.require_identity = require_identity      # under TLS
        self.clock = clock
        self.revoked: list = []
        self.refusals: collections.deque = collections.deque(
            maxlen=KEEP_REFUSALS)
        self.refused = 0

    def refusal(self, dpid, identity, name):
        """Why a connection with `identity` (its certificate's names, or
        None without TLS) may not be read as datapath `dpid`, whose host
        is `name` (None: not known yet); None if it may."""
        if self.require_identity and not identity:
            return 'no verified certificate'
        why = revocation.refusal(identity, self.revoked)
        if why is not None:
            return why
        if identity is not None and name is not None and \
                name not in identity:
            return 'datapath %016x is host %s\'s but the certificate names ' \
                '%s' % (dpid, name, ', '.join(sorted(identity)) or 'none')
        return None

    def refuse(self, conn, dpid, why):
        self.refused += 1
        self.refusals.append({'at': self.clock(), 'dpid': '%016x' % dpid,
                              'why': why})
        LOG.warning('switch %016x refused: %s', dpid, why)
        self.hang_up(conn)

    def view(self):
        return {'switches_refused': self.refused,
                'recent_refusals': list(self.refusals)}
