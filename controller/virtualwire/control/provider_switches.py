"""Switches the provider implements in Open vSwitch flows (issue 41), a
part of the controller.

It holds the switches of the intent database (`store.switches`: name,
tenant, number, host, ports) as the change stream last showed them, and
hands each change to the tables (`pipeline.incremental.set_switch`),
which put the switch's own flows on its host and recompute the wires
plugged into its ports. The MACs a switch learns are its own state, in
its host's OVS (an OVS learn action: `pipeline.switch`), never in a
desired table.

`check_switch_ends` is what a connect is refused by before it is
stored: the switch and its port must exist, and a switch's port joins
only its own tenant's vNICs and switches. That protects one tenant's
switch from another's vNIC (and the operator from wiring one by
mistake); it does not stop a tenant from joining its own switches in a
loop (its network, as with VM switches).
"""
import logging
from typing import Dict, Mapping, Set

from virtualwire.core import errors, ids
from virtualwire.core.model import HYPERVISOR
from virtualwire.core.switches import ProviderSwitch
from virtualwire.control.shared import Shared
from virtualwire.future import Future
from virtualwire.pipeline.switch import port_figures
from virtualwire.pipeline.tables import SWITCH_MAC
from virtualwire.southbound import openflow

LOG = logging.getLogger(__name__)


class ProviderSwitches:
    def __init__(self, shared: Shared):
        self.shared = shared
        # host -> numbers of switches that left it: the MACs they learned
        # there are deleted after the next bundle (it removes the flows
        # that learn them), so a number used again there starts empty.
        self.purges: Dict[str, Set[int]] = {}

    @property
    def switches(self) -> Dict[str, ProviderSwitch]:
        return self.shared.tables.switches

    def apply(self, switches: Mapping[str, ProviderSwitch]) -> list:
        """The intent database's switches now (all of them). Returns the
        moves [(as it was, as it is, hosts whose tables changed)] of
        placed switches, for `control.switch_moves`."""
        moved = []
        self.shared.loop.assert_owner()
        tables = self.shared.tables
        for name in [n for n in tables.switches if n not in switches]:
            LOG.info('switch %s removed', name)
            self._left(tables.switches[name])
            tables.remove_switch(name)
        for name, sw in switches.items():
            old = tables.switches.get(name)
            if old != sw:
                if old is None or old.host != sw.host:
                    LOG.info('switch %s (%d ports) on %s', name,
                             len(sw.ports), sw.host or 'no host')
                if old is not None and (old.host, old.number, old.ports) \
                        != (sw.host, sw.number, sw.ports):
                    self._left(old)
                tables.set_switch(sw)
                if old is not None and old.host != sw.host and \
                        old.host in tables.hosts and sw.host in tables.hosts:
                    moved.append((old, sw, set(tables.dirty)))
        return moved

    def _left(self, sw):
        if sw.host:
            self.purges.setdefault(sw.host, set()).add(sw.number)

    def purges_for(self, host) -> list:
        """Messages to send after `host`'s next bundle: delete the MACs
        learned there by switches that left it."""
        return [openflow.delete_by_cookie(SWITCH_MAC.id,
                                          ids.switch_cookie(n), ids.ONE_SWITCH_MASK)
                for n in sorted(self.purges.pop(host, ()))]

    def suggest_host(self, vnics):
        """Where a new switch of these vNICs' tenant should run: the
        hypervisor that has most of them (ties: by name); Invalid if none
        of them is plugged anywhere (the operator must say)."""
        self.shared.loop.assert_owner()
        tables = self.shared.tables
        count: Dict[str, int] = {}
        for v in vnics:
            loc = tables.placement.location(v)
            h = tables.hosts.get(loc.host) if loc else None
            if h is not None and h.role == HYPERVISOR:
                count[h.name] = count.get(h.name, 0) + 1
        if not count:
            raise errors.Invalid('no vNIC of this tenant is plugged on any '
                                 'host, so there is nowhere to put its '
                                 'switch yet: plug one first, or ask the '
                                 'operator to name a host')
        return min(count, key=lambda h: (-count[h], h))

    def read(self, name) -> Future:
        """Its ports' figures as its host's OVS counts them now
        (`pipeline.switch.port_figures`): a Future, set when the switch
        answers."""
        self.shared.loop.assert_owner()
        sw = self.switches.get(name)
        if sw is None:
            raise errors.NotFound('no switch named %s' % name)
        h = self.shared.tables.hosts.get(sw.host or '')
        s = self.shared.sessions.get(h.dpid) if h else None
        if s is None or s.installed is None:
            raise errors.Unavailable('switch %s runs on %s, which is not '
                                     'connected now' % (name, sw.host))
        done = Future()
        s.request(openflow.flow_stats_request(
            ids.switch_cookie(sw.number), ids.ONE_SWITCH_MASK),
            lambda body: done.set(port_figures(sw, [
                (st.cookie, st.packet_count, st.match.get('eth_dst'))
                for st in body])))
        return done

    def views(self):
        """What `vwctl switch list` shows: each switch and its ports, the
        wire on each and where the other end is."""
        self.shared.loop.assert_owner()
        return [self.view(name) for name in sorted(self.switches)]

    def view(self, name):
        self.shared.loop.assert_owner()
        sw = self.switches.get(name)
        if sw is None:
            raise errors.NotFound('no switch named %s' % name)
        tables = self.shared.tables
        ports = []
        for i, port in enumerate(sw.ports, 1):
            end = sw.end(port)
            cid = tables.by_vnic.get(end)
            w = tables.wires.get(cid) if cid else None
            peer = w.other_end(end) if w else None
            where = tables.location(peer) if peer else None
            ports.append({'name': port, 'index': i, 'end': end,
                          'wire': cid, 'peer': peer,
                          'peer_host': where.host if where else None,
                          'part': sw.part_of(port)})
        return {'name': sw.name, 'tenant': sw.tenant, 'number': sw.number,
                'host': sw.host, 'placed': sw.host in tables.hosts,
                'split': sw.split, 'parts': list(sw.part_hosts()),
                'mac_limit': sw.mac_limit, 'idle_timeout': sw.idle_timeout,
                'ports': ports}


def check_switch_ends(switches: Mapping[str, ProviderSwitch],
                      owners: Mapping[str, str], *ends):
    """Raise what is wrong with the switch ends among `ends`: the switch
    or port does not exist, or the other end is not the switch's
    tenant's (`owners`: vNIC id -> tenant). Nothing for other ends."""
    for i, end in enumerate(ends):
        parsed = ids.parse_switch_end(end)
        if parsed is None:
            continue
        name, port = parsed
        sw = switches.get(name)
        if sw is None:
            raise errors.NotFound('no switch named %s' % name)
        if sw.index(port) is None:
            raise errors.NotFound('switch %s has no port %s (its ports: %s)'
                                  % (name, port, ', '.join(sw.ports)))
        for other in ends[:i] + ends[i + 1:]:
            _same_tenant(sw, other, switches, owners)


def _same_tenant(sw, other, switches, owners):
    theirs = ids.parse_switch_end(other)
    if theirs is not None:
        peer = switches.get(theirs[0])
        tenant = peer.tenant if peer else None
    elif ids.parse_gateway_end(other) is not None:
        raise errors.Invalid('switch %s joins only its tenant\'s vNICs and '
                             'switches, not a gateway\'s port %s' % (
                                 sw.name, other))
    else:
        tenant = owners.get(other)
    if tenant != sw.tenant:
        # Whose it is instead is not said: another tenant's vNIC reads as
        # one that is simply not this tenant's.
        raise errors.Refused('%s is not a vNIC of tenant %s: switch %s '
                             'joins only its tenant\'s vNICs' % (
                                 other, sw.tenant, sw.name))


class SwitchWatch:
    """Off the loop: post(switches) when the intent database's switches
    differ from the last read (another instance's or a tool's write)."""

    def __init__(self, store, post):
        self.store, self.post = store, post
        self.last: Dict[str, ProviderSwitch] = {}

    def poll(self):
        now = self.store.switches()
        if now != self.last:
            self.last = now
            self.post(now)
