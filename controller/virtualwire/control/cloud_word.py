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

from virtualwire.core import departures
from virtualwire.core.placement import ClaimRefused

LOG = logging.getLogger(__name__)
POLL = 1.0


class CloudWord:
    def __init__(self, tables):
        self.tables = tables                 # pipeline.incremental tables
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
        p = self.tables.placement
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
        words = self.tables.placement.words
        return all(v in words and words[v].host != d.host for v in d.vnics)

    def settled(self, vm_uuid, host):
        """Whether `host`'s report of guest `vm_uuid` leaving needs no more
        saying: spent by a move, or every vNIC it named placed elsewhere."""
        d = self.departures.pending.get(vm_uuid)
        return d is None or d.host != host or self.moved_on(d)

    def apply(self, changes):
        """{vnic: Word or None}: returns placement events for the caller
        to record (moves the word allowed, claims it took away)."""
        events: list = []
        for vnic, word in sorted(changes.items()):
            if self.tables.placement.words.get(vnic) == word:
                continue             # already applied (at start)
            LOG.info('the cloud places vNIC %s %s', vnic,
                     'on %s%s' % (word.host, ' (moving from %s)'
                                  % word.previous if word.previous else '')
                     if word else 'nowhere (any host may claim it)')
            events += self.tables.set_word(vnic, word)
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
        p = self.tables.placement
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
