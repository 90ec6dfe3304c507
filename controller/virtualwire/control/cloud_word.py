"""The cloud's word on placement, as the controller keeps it (a part the
controller composes, on the control loop).

`PlacementWatch` reads the intent database's VnicPlacement rows off the
loop every second and posts what changed; `CloudWord.apply` hands each
change to placement (`core.placement.Placement.set_word`), whose flows
follow. Every refused claim (a host plugging a vNIC the cloud placed
elsewhere) is logged, counted per host for the metric
`virtualwire_vnic_claims_refused_total`, and listed in /v1/status while
the port stays plugged.

What this protects against: a compromised hypervisor that plugs a port
with another host's vNIC id (it used to take the wire over on its first
frame). What it does not: with placement insecure-trust-hosts (labs'
baselines), a vNIC the cloud has not placed is claimed by whoever plugs
it; and the host the cloud names can do what that host's switch can."""
import collections
import logging

from virtualwire.control.migrations import parse_vm_uuid

from virtualwire.core import departures
from virtualwire.core.placement import ClaimRefused

LOG = logging.getLogger(__name__)
POLL = 1.0


class CloudWord:
    def __init__(self, shared):
        # control.shared.Shared: its tables, read afresh each time (a
        # takeover's rebuild replaces them).
        self.shared = shared
        self.refused_total: collections.Counter = collections.Counter()
        # Sources' reports of guests leaving (core.departures), and moves
        # they could not authorize, per source host (a metric).
        self.departures = departures.Departures()
        self.departures_refused: collections.Counter = collections.Counter()
        self.recent_departure_refusals: collections.deque = \
            collections.deque(maxlen=20)

    def authorize(self, m, addresses, now):
        """{vnic: Word} that migration `m` (announced by its destination)
        may take now that its source reported the guest leaving; each
        vNIC it may not is logged, counted and listed."""
        return self.authorize_to(m.vm_uuid, m.destination, m.vnics,
                                 addresses, now, m.id)

    def authorize_to(self, vm_uuid, destination, vnics, addresses, now,
                     what):
        """The same for a guest's `vnics` arriving at `destination` by
        whatever word (`what`: the migration's id, or how the destination
        said so)."""
        p = self.shared.tables.placement
        words, why = self.departures.authorize(
            vm_uuid, destination, addresses,
            [v for v in vnics if p.strict or v in p.words], p.words, now)
        for w in why:
            LOG.warning('migration %s of %s to %s not believed: %s', what,
                        vm_uuid, destination, w)
            self.departures_refused[destination] += 1
            self.recent_departure_refusals.append(
                {'migration': what, 'destination': destination, 'why': w})
        for v, word in sorted(words.items()):
            LOG.info('vNIC %s may move %s -> %s: both hosts say so', v,
                     word.previous, word.host)
        return words

    def moved_on(self, d):
        """Whether every vNIC of report `d` is placed off its host
        already: the move it reports is over."""
        words = self.shared.tables.placement.words
        return all(v in words and words[v].host != d.host for v in d.vnics)

    def settled(self, vm_uuid, host):
        """Whether `host`'s report of guest `vm_uuid` leaving needs no more
        saying: spent by a move, or every vNIC it named placed elsewhere."""
        d = self.departures.pending.get(vm_uuid)
        return d is None or d.host != host or self.moved_on(d)

    # ---- the sources' reports and the words they allow -------------------
    def report_departure(self, host, doc):
        """The source's agent: a guest is leaving `host`. Returns the
        words ({vnic: Word}) its migration may take now, for the caller
        to write (the intent database, then `on_words`)."""
        self.shared.loop.assert_owner()
        d = departures.parse(doc, host, self.shared.clock())
        if self.departures.said_again(
                d, self.moved_on(d)):
            return {}       # the agent's repeat, after its move was made
        self.departures.report(d)
        LOG.info('%s reports guest %s leaving%s', host, d.vm_uuid,
                 ' to %s' % d.to_address if d.to_address else '')
        return self.words_for_move(d.vm_uuid)

    def departure_settled(self, vm_uuid, host):
        """Whether the agent of `host` may stop reporting guest `vm_uuid`
        leaving (its report spent, or every vNIC placed elsewhere)."""
        self.shared.loop.assert_owner()
        return self.settled(parse_vm_uuid(vm_uuid), host)

    def words_for_move(self, vm_uuid):
        """{vnic: Word} the announced migration of `vm_uuid` may take, if
        its source has reported the guest leaving (else {})."""
        self.shared.loop.assert_owner()
        m = self.shared.migrations.active.get(vm_uuid)
        if m is None or m.found_by != 'hook':
            return self._words_for_refused(vm_uuid)
        return self.authorize(
            m, self._addresses(m.destination), self.shared.clock())

    def _words_for_refused(self, vm_uuid):
        """No hook announced the guest (the controller was down when it
        ran): the destination's word is then its own OVSDB, which holds
        the guest's ports (libvirt's vm-id) refused for want of a word."""
        d = self.departures.pending.get(vm_uuid)
        if d is None:
            return {}
        by_host: dict = {}
        for v in sorted(d.vnics):
            for h in sorted(self.shared.tables.placement.refused.get(v, {})):
                host = self.shared.tables.hosts.get(h)
                port = host.vnic_map().get(v) if host else None
                if h != d.host and port is not None and \
                        port.vm_id == vm_uuid:
                    by_host.setdefault(h, []).append(v)
        words: dict = {}
        for h, vnics in sorted(by_host.items()):
            words.update(self.authorize_to(
                vm_uuid, h, vnics, self._addresses(h), self.shared.clock(),
                'found on %s' % h))
        return words

    def _addresses(self, name):
        """The addresses a host's migration stream may come to: its
        tunnel endpoints and its switch's connection."""
        dest = self.shared.tables.hosts.get(name)
        addresses = {e.ip for e in dest.encaps} if dest else set()
        s = self.shared.sessions.get(dest.dpid) if dest else None
        if s is not None and isinstance(s.dp.address, tuple):
            addresses.add(s.dp.address[0])
        return addresses

    def apply(self, changes):
        """{vnic: Word or None}: returns placement events for the caller
        to record (moves the word allowed, claims it took away)."""
        events: list = []
        for vnic, word in sorted(changes.items()):
            if self.shared.tables.placement.words.get(vnic) == word:
                continue             # already applied (at start)
            LOG.info('the cloud places vNIC %s %s', vnic,
                     'on %s%s' % (word.host, ' (moving from %s)'
                                  % word.previous if word.previous else '')
                     if word else 'nowhere (any host may claim it)')
            events += self.shared.tables.set_word(vnic, word)
        return events

    def seen(self, ev: ClaimRefused):
        self.refused_total[ev.host] += 1
        if ev.word is None:
            LOG.warning('host %s plugged vNIC %s, which the cloud has not '
                        'placed (placement is strict): refused', ev.host,
                        ev.vnic)
            return
        LOG.warning('host %s plugged vNIC %s, which the cloud placed on %s: '
                    'refused, its traffic stays there', ev.host, ev.vnic,
                    ev.word.host)

    def refused(self):
        """[{vnic, host, port, placed_on}] of claims refused now."""
        p = self.shared.tables.placement
        # A destination of an announced move whose source has not
        # reported yet is shown (awaiting_source), not alarmed.
        return [{'vnic': v, 'host': h, 'port': port,
                 'placed_on': p.words[v].host if v in p.words else None,
                 'awaiting_source': p.awaiting(v, h)}
                for v, ports in sorted(p.refused.items())
                for h, port in sorted(ports.items())]


class PlacementWatch:
    """Off the loop: post(changes) when the rows differ from the last
    read. `post` runs CloudWord.apply on the loop."""

    def __init__(self, store, post):
        self.store, self.post = store, post
        self.last: dict = {}

    def poll(self):
        words = self.store.words()
        if words == self.last:
            return
        changes = {v: words.get(v) for v in set(words) | set(self.last)
                   if words.get(v) != self.last.get(v)}
        self.last = words
        self.post(changes)
