"""Which switch connections and host OVSDB reports the controller believes.

A host is known by name: its bridge's `external_ids:vw-host-name`, read
from its OVSDB. Under TLS every connection carries the names of its
verified certificate (`virtualwire.tls.peer_names`, an *identity*):

- a host OVSDB's report of host NAME is believed only if that OVSDB
  server's certificate names NAME: a machine holding another host's
  certificate cannot claim NAME, its vNICs or its datapath id;
- a datapath id belongs to the first host that claims it: a second host
  reporting the same id is ignored, so it cannot turn the first one's
  switch away;
- a switch connection is admitted for host NAME (it gets NAME's flows; its
  packet-ins, barriers and counters count as NAME's) only if its
  certificate names NAME; a second connection for a datapath id that is
  connected is refused unless it has the same identity, and then it takes
  over only if the connected switch fails a liveness probe
  (`control.takeover`): a stolen key cannot flap the real host's session.

A certificate the revocation list takes back (`core.revocation`: by
fingerprint, or every one of a host's from before its revocation) is
refused on every new connection and report, and a connected switch that
presents one is hung up as soon as the list says so (the watch reads it
every REVOCATION_POLL seconds; `vwctl hosts revoke`).

What this does not stop: a holder of NAME's own key (a compromised
hypervisor) acts as NAME while NAME is not connected. Without TLS (the controller's lab flag)
identities are None and every report is believed, as before.
Refusals are counted and the last ones kept for `/v1/status`
(`control.refusals`).

A part of the controller: it owns the revocation list, the takeover
probes and what each host's carriers were last refused for. It never
changes the sessions: it says which to drop, and which newcomer takes
over, and the controller does it.
"""
import dataclasses
import logging

from virtualwire.control.refusals import Refusals
from virtualwire.control.shared import Shared
from virtualwire.core import ids, revocation
from virtualwire.core.model import carrier_address_problem
from virtualwire.control.takeover import Takeovers
from virtualwire.southbound.session import hang_up

PROBE = 'probe'     # admit_switch: ask the connected switch first
REVOCATION_POLL = 0.25

LOG = logging.getLogger(__name__)


def _names(identity):
    return ', '.join(sorted(identity)) if identity else 'none'


class Admission:
    def __init__(self, shared: Shared, refusals: Refusals,
                 require_identity=False):
        self.shared = shared
        self.refusals = refusals
        self.require_identity = require_identity
        shared.stats.update(switches_refused=0, host_reports_refused=0,
                            tls_handshakes_failed=0,
                            switch_takeovers_refused=0)
        self.switch_takeovers = Takeovers()
        self.revoked: list = []         # the revocation list's entries
        self.unusable_carriers: dict = {}   # host -> why, last reported

    def _refuse(self, counter, kind, peer, why):
        self.refusals.refuse(counter, kind, peer, why)

    def tls_refused(self, peer, why):
        """The OpenFlow listener turned a peer away before any OpenFlow
        (no certificate, or one the CA did not sign)."""
        self.shared.loop.assert_owner()
        self._refuse('tls_handshakes_failed', 'switch', peer, why)

    def admit_hosts(self, remote, hosts, identity):
        """The hosts of one OVSDB report that may be believed."""
        out: list = []
        why = revocation.refusal(identity, self.revoked)
        if why is not None:
            for h in hosts:
                self._refuse('host_reports_refused', 'host report', remote,
                             'it reports host %s but %s' % (h.name, why))
            return out
        for h in hosts:
            if self.require_identity and (identity is None or
                                          h.name not in identity):
                self._refuse('host_reports_refused', 'host report', remote,
                             'it reports host %s but its certificate '
                             'names %s' % (h.name, _names(identity)))
                continue
            if self.require_identity and h.dpid != ids.derived_dpid(h.name):
                self._refuse('host_reports_refused', 'host report', remote,
                             'host %s reports datapath id %016x; under '
                             'certificates it must be %016x, derived from '
                             'its name (vw-host-setup\'s default), so that '
                             'no host can take another\'s' % (
                                 h.name, h.dpid, ids.derived_dpid(h.name)))
                continue
            owner = self.shared.host_of_dpid(h.dpid)
            if owner is not None and owner != h.name:
                self._refuse('host_reports_refused', 'host report', remote,
                             'host %s claims datapath id %016x, which is '
                             'host %s\'s' % (h.name, h.dpid, owner))
                continue
            out.append(self._usable_carriers(remote, h))
        return out

    def _usable_carriers(self, remote, h):
        """`h` without the carriers whose address cannot be a tunnel's:
        its wires over them wait (for a good report), and no flow is
        built from a bad address (one would fail a whole sync). Refused
        once per change of what is wrong."""
        bad = [(e, carrier_address_problem(e.ip)) for e in h.encaps]
        bad = [(e, why) for e, why in bad if why]
        why = '; '.join('its %s carrier\'s address %s' % (e.type, w)
                        for e, w in bad)
        if why and self.unusable_carriers.get(h.name) != why:
            self._refuse('host_reports_refused', 'host report', remote,
                         'host %s: %s' % (h.name, why))
        self.unusable_carriers[h.name] = why
        if not bad:
            return h
        gone = {id(e) for e, _ in bad}
        return dataclasses.replace(h, encaps=tuple(
            e for e in h.encaps if id(e) not in gone))

    def admit_switch(self, dp, identity):
        """May this new OpenFlow connection be a session? True, False, or
        PROBE: only if the connected one fails its probe (see above)."""
        peer = '%s:%s' % tuple(dp.address[:2]) if isinstance(
            dp.address, tuple) else str(dp.address)
        if self.require_identity and not identity:
            self._refuse('switches_refused', 'switch', peer,
                         'no verified certificate')
            return False
        why = revocation.refusal(identity, self.revoked)
        if why is not None:
            self._refuse('switches_refused', 'switch', peer, why)
            return False
        if self.require_identity and not any(
                dp.id == ids.derived_dpid(n) for n in identity):
            self._refuse('switches_refused', 'switch', peer,
                         'datapath %016x is not derived from a name its '
                         'certificate holds (%s)' % (dp.id, _names(identity)))
            return False
        host = self.shared.host_of_dpid(dp.id)
        if identity is not None and host is not None and \
                host not in identity:
            self._refuse('switches_refused', 'switch', peer,
                         'datapath %016x is host %s\'s but the certificate '
                         'names %s' % (dp.id, host, _names(identity)))
            return False
        old = self.shared.sessions.get(dp.id)
        if old is not None and old.dp is not dp and \
                old.identity != identity:
            self._refuse('switches_refused', 'switch', peer,
                         'datapath %016x is connected as %s; a second '
                         'connection as %s may not take it over'
                         % (dp.id, _names(old.identity), _names(identity)))
            return False
        if old is not None and old.dp is not dp:
            return PROBE
        return True

    def probe_takeover(self, dp, identity, cert_expires):
        """Hold a second connection for a connected switch while the
        connected one is asked whether it lives. Returns the probe's xid,
        for `takeover_due` after `switch_takeovers.probe` seconds."""
        old = self.shared.sessions[dp.id]
        return self.switch_takeovers.hold(old.dp, dp, identity,
                                          cert_expires)

    def on_echo_reply(self, msg):
        """The connected switch answered our probe: it keeps its session,
        the newcomer is refused (an alarm)."""
        self.shared.loop.assert_owner()
        p = self.switch_takeovers.answered(msg.datapath, msg.xid)
        if p is None:
            return
        old = self.shared.sessions.get(p.dp.id)
        host = self.shared.host_of_dpid(p.dp.id)
        why = self.switch_takeovers.refusal(p, host, old.identity if old else None)
        self._refuse('switch_takeovers_refused', 'switch takeover',
                     '%s:%s' % tuple(p.dp.address[:2])
                     if isinstance(p.dp.address, tuple) else
                     str(p.dp.address), why)
        hang_up(p.dp)

    def takeover_due(self, dpid, xid):
        """The probe's time is up: a connected switch that did not answer
        is gone; returns the newcomer that takes over (or None)."""
        p = self.switch_takeovers.unanswered(dpid, xid)
        if p is not None:
            LOG.warning('switch %016x did not answer within %gs: its new '
                        'connection from %s takes over', dpid,
                        self.switch_takeovers.probe, p.dp.address)
        return p

    def evict_unadmitted(self, host) -> bool:
        """After believing `host`: does the switch connected with its
        datapath id lose its session (its certificate does not name it)?"""
        s = self.shared.sessions.get(host.dpid)
        if s is None or s.identity is None or host.name in s.identity:
            return False
        self._refuse('switches_refused', 'switch', str(s.dp.address),
                     'datapath %016x is host %s\'s but the certificate '
                     'names %s' % (host.dpid, host.name,
                                   _names(s.identity)))
        return True

    def on_revocations(self, entries, host_dbs=None):
        """The revocation list changed: returns the datapath ids of the
        switches whose certificate it now takes back (for the controller
        to hang up), and stops believing host databases whose certificate
        it takes back."""
        self.revoked = list(entries)
        out = []
        for dpid, s in list(self.shared.sessions.items()):
            why = revocation.refusal(s.identity, self.revoked)
            if why is None:
                continue
            self._refuse('switches_refused', 'switch', str(s.dp.address),
                         'connected switch %016x hung up: %s' % (dpid, why))
            out.append(dpid)
        for p in list(self.switch_takeovers.pending.values()):
            if revocation.refusal(p.identity, self.revoked):
                self.switch_takeovers.pending.pop(p.dp.id, None)
                hang_up(p.dp)
        if host_dbs is not None:
            host_dbs.forget_revoked(
                lambda ident: revocation.refusal(ident, self.revoked))
        return out


class RevocationWatch:
    """Off the loop: post(entries) whenever the revocation list differs
    from the last read (`store.revocations.RevocationStore`)."""

    def __init__(self, store, post):
        self.store, self.post = store, post
        self.last = None

    def poll(self):
        entries = self.store.entries()
        if entries != self.last:
            self.last = entries
            self.post(entries)
