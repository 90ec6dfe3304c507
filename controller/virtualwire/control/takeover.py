"""A second connection for a switch that is connected with the same
certificate: the switch reconnecting, or someone holding its stolen key.

The connected session is asked first: the newcomer waits while an echo
request goes to the connected switch. If it answers within PROBE seconds,
it is alive and keeps its session; the newcomer is refused, counted per
host for `virtualwire_switch_takeovers_refused_total`, listed among the
admission refusals in /v1/status and logged (an alarm: the certificate's
key is in two places). If it does not answer, or its connection ends
first, the newcomer takes over at once: a switch that restarted loses at
most PROBE seconds (its old connection usually ends before).

Why liveness and not the host's recorded management address: addresses
change for legitimate reasons (DHCP, failover, NAT), and an attacker on
the management network can take an address; a live session that answers
cannot be faked without the connection itself.

What this does not stop: an impostor that connects while the real switch
is down keeps the session until the real one's key is revoked
(`vwctl hosts revoke`); the alarm says so. Sessions are never handed over
while both answer, so neither flaps.
"""
import collections
import logging
import time
from typing import Any, Dict, NamedTuple, Optional

from virtualwire.southbound.session import hang_up

LOG = logging.getLogger(__name__)
PROBE = 1.0


class Pending(NamedTuple):
    dp: Any                     # the newcomer's datapath
    identity: Any
    cert_expires: Optional[float]
    old_dp: Any                 # the connected session's datapath
    xid: int
    since: float


def _peer(dp):
    addr = getattr(dp, 'address', None)
    return '%s:%s' % tuple(addr[:2]) if isinstance(addr, tuple) else \
        str(addr)


class Takeovers:
    """Newcomers waiting on a probe, by datapath id; one owner (the loop)."""

    def __init__(self, probe=PROBE, now=time.time):
        self.probe, self._now = probe, now
        self.pending: Dict[int, Pending] = {}
        self.refused_total: collections.Counter = collections.Counter()

    def hold(self, old_dp, dp, identity, cert_expires):
        """Ask `old_dp` whether it lives (an echo request); returns the
        xid to wait for. A newcomer already waiting is replaced (closed):
        one probe at a time for a switch."""
        prev = self.pending.pop(dp.id, None)
        if prev is not None and prev.dp is not dp:
            hang_up(prev.dp)
        req = old_dp.ofproto_parser.OFPEchoRequest(old_dp, data=b'vw-probe')
        old_dp.set_xid(req)
        self.pending[dp.id] = Pending(dp, identity, cert_expires, old_dp,
                                      req.xid, self._now())
        old_dp.send_msg(req)
        return req.xid

    def answered(self, dp, xid) -> Optional[Pending]:
        """An echo reply: the waiting newcomer to refuse, if this was our
        probe (the connected switch lives)."""
        p = self.pending.get(dp.id)
        if p is None or p.old_dp is not dp or p.xid != xid:
            return None
        del self.pending[dp.id]
        return p

    def unanswered(self, dpid, xid) -> Optional[Pending]:
        """The probe's time is up: the newcomer to admit if the connected
        switch never answered."""
        p = self.pending.get(dpid)
        if p is None or p.xid != xid:
            return None
        del self.pending[dpid]
        return p

    def gone(self, dp) -> Optional[Pending]:
        """A connection ended: if it was the probed one, the newcomer to
        admit now; if it was the newcomer, it stops waiting."""
        p = self.pending.get(dp.id)
        if p is None:
            return None
        if p.dp is dp:
            del self.pending[dp.id]
            return None
        if p.old_dp is dp:
            del self.pending[dp.id]
            return p
        return None

    def refusal(self, p: Pending, host, old_identity):
        """Count and describe a refused takeover."""
        self.refused_total[host or '%016x' % p.dp.id] += 1
        return ('datapath %016x (host %s) is connected from %s and answers; '
                'a second connection from %s with the same certificate (%s) '
                'may not take it over: is its key in two places?' % (
                    p.dp.id, host or 'unknown', _peer(p.old_dp), _peer(p.dp),
                    ', '.join(sorted(old_identity or ())) or 'none'))
