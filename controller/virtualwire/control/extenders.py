"""Extender links, a part of the controller (on its loop): checking a link before it is
stored, taking agents' reports (and answering each with the links that
agent should keep), and the operator's view (`vwctl extenders`).

Link intent lives in the intent database (`store.intent`); a report is
runtime only: an agent reports every second or so, and a restarted
controller knows everything again a second later. This part owns the
reports, the keys peers are given and the rotations under way.
"""
import dataclasses
import logging
from typing import Dict, List

from virtualwire.control.refusals import Refusals
from virtualwire.control.shared import Shared
from virtualwire.core import errors, links
from virtualwire.core.extender_keys import ExtenderKeys
from virtualwire.core.model import EXTENDER
from virtualwire.pipeline import paths

# An agent that has not reported for this long is shown as silent.
SILENT_AFTER = 10.0
# For this long after a key rotation is asked, the extender and its peers
# are told to report at once and often (`hurry`): each step of the
# rotation (new key reported, the peer taking it, the extender switching
# to it) waits for a report, and the link is down between the peer's
# switch and the extender's.
HURRY_FOR = 10.0

LOG = logging.getLogger(__name__)


class Extenders:
    def __init__(self, shared: Shared, intent, refusals: Refusals):
        self.shared = shared
        self.intent = intent            # store.intent.IntentStore (links)
        self.refusals = refusals
        self.stats = shared.stats
        self.stats.update(extender_key_changes=0, extender_keys_refused=0)
        self.reports: Dict[str, links.ExtenderReport] = {}
        # extender -> public key being replaced
        self.rotations: Dict[str, str] = {}
        # extender -> end of its rotation's hurry
        self.hurry_until: Dict[str, float] = {}
        self.extender_keys = ExtenderKeys()     # the keys peers are given

    @property
    def tables(self):
        return self.shared.tables

    def check_link(self, a, b):
        self.shared.loop.assert_owner()
        links.check_link(a, b, self.tables.hosts)

    def report(self, name, doc) -> dict:
        """An agent's report in; the links it should keep out, and the
        local ports of all its links (to learn their public endpoints at
        the rendezvous before a peer can be given them)."""
        self.shared.loop.assert_owner()
        h = self.tables.hosts.get(name)
        if h is None:
            raise errors.NotFound('no host named %s' % name)
        if h.role != EXTENDER:
            raise errors.Invalid('%s is not an extender' % name)
        rep = links.parse_report(name, doc, self.shared.clock())
        key, event = self.extender_keys.take(
            name, rep.public_key, h.public_key, self.shared.clock(),
            name in self.rotations)
        if event is not None:
            self._key_event(name, event)
        if key is not None:
            self.reports[name] = dataclasses.replace(rep, public_key=key)
        if self.rotations.get(name) not in (None, key):
            del self.rotations[name]            # done: a new key taken
        mine = self.intent.links()
        peers = {k.peer_of(name) for k in mine if name in (k.a, k.b)}
        now = self.shared.clock()
        hosts = self.tables.hosts
        out = {'links': links.link_specs(name, mine, hosts, self.reports),
                'relays': links.relay_specs(name, mine, hosts, self.reports),
                'ports': sorted(k.port_of(name) for k in mine
                                if name in (k.a, k.b)) +
                links.relayed_ports(name, mine, hosts, self.reports),
                'rotate_key': name in self.rotations,
                'hurry': any(self.hurry_until.get(x, 0.0) > now
                             for x in peers | {name})}
        if event is not None:           # for the audit log (api.rest)
            out['key_change'] = {'result': event.kind, 'old': event.old,
                                 'new': event.new, 'why': event.why}
        return out

    def _key_event(self, name, event):
        if event.kind == 'refused':
            self.refusals.refuse('extender_keys_refused', 'extender key',
                                 name, event.why)
            return
        self.stats['extender_key_changes'] += 1
        LOG.warning('extender %s: public key %s replaces %s (%s)', name,
                    event.new, event.old or 'none', event.why)

    def rotate_key(self, name) -> dict:
        """Ask an extender's agent for a new key (made there: the private
        key never leaves it); its peers take the new public key as soon as
        it reports it."""
        self.shared.loop.assert_owner()
        rep = self.reports.get(name)
        if rep is None:
            raise errors.NotFound('no report from extender %s yet' % name)
        self.rotations[name] = rep.public_key
        self.hurry_until[name] = self.shared.clock() + HURRY_FOR
        return {'extender': name, 'replacing': rep.public_key}

    def link_views(self) -> List[dict]:
        self.shared.loop.assert_owner()
        now = self.shared.clock()
        out = []
        mine = self.intent.links()
        for k in mine:
            sides = {}
            for me in (k.a, k.b):
                rep = self.reports.get(me)
                stats = rep.links.get(k.peer_of(me), {}) if rep else {}
                h = self.tables.hosts.get(me)
                sides[me] = {
                    'port': k.port_of(me),
                    'public': rep.endpoints.get(k.port_of(me)) if rep
                    else None,
                    'nat': rep.nat if rep else None,
                    'public_key': rep.public_key if rep else None,
                    'reported_s_ago': round(now - rep.at, 1) if rep
                    else None,
                    'up': bool(h and h.link_up(k.peer_of(me))),
                    **stats}
            up = all(s['up'] for s in sides.values())
            relay = links.relay_of(k, mine, self.tables.hosts, self.reports)
            why = None
            if not up and not links.punchable(self.reports.get(k.a),
                                              self.reports.get(k.b)):
                why = 'both behind symmetric NATs: hole punching cannot ' \
                    'work; ' + ('its datagrams go through relay %s' % relay
                                if relay else 'no relay is linked to both')
            elif not up and any(s['reported_s_ago'] is None or
                                s['reported_s_ago'] > SILENT_AFTER
                                for s in sides.values()):
                why = 'an agent is not reporting'
            out.append({'a': k.a, 'b': k.b, 'created_at': k.created_at,
                        'state': 'up' if up else 'down', 'why_down': why,
                        'relay': relay,
                        'sides': sides})
        return out

    def site_path_views(self) -> List[dict]:
        """Per pair of sites with extenders: how their wires go (through
        which extenders; direct link or relayed), or that none can."""
        self.shared.loop.assert_owner()
        hosts = self.tables.hosts
        sites = sorted({h.site for h in hosts.values()
                        if h.role == EXTENDER})
        out = []
        for i, sa in enumerate(sites):
            for sb in sites[i + 1:]:
                xa = paths.extenders(hosts, sa)
                xb = paths.extenders(hosts, sb)
                path = paths.route(hosts, xa[0], xb[0]) if xa and xb \
                    else None
                relays = self.relays_on(path)
                out.append({'sites': [sa, sb],
                            'path': list(path or ()),
                            'relayed': bool(relays), 'relays': relays,
                            'state': 'up' if path else 'down'})
        return out

    def relays_on(self, path) -> List[str]:
        """The relays carrying the extender links a path crosses (they
        forward its links' ciphertext: `core.links.relay_of`)."""
        if not path:
            return []
        mine = self.intent.links()
        by_pair = {frozenset((k.a, k.b)): k for k in mine}
        out = []
        for x, y in zip(path, path[1:]):
            k = by_pair.get(frozenset((x, y)))
            via = k and links.relay_of(k, mine, self.tables.hosts,
                                       self.reports)
            if via:
                out.append(via)
        return out
