"""`compute_flows(world)` kept up to date with work proportional to what
changed: a wire's flows are recomputed only when the wire, one of its
ends' placement, or one of the hosts it crosses changes its encaps or
site; an extender's change (a link up or down, its encaps, its site)
recomputes the wires it carries and those between its site and another
(it may open or close their path), never a wire within one site; only
the flow keys that changed are reported dirty per host. `stats` counts
what each kind of change recomputed (OVN's inc-proc-eng keeps the same).
Pure (no I/O); property-tested against `wire.compute_flows`.
"""
from dataclasses import replace
from typing import Dict, Set, Tuple, Union

from virtualwire.core.model import EXTENDER, Host, Wire
from virtualwire.core.placement import Placement
from virtualwire.core.switches import PREFIX as SWITCH_END, ProviderSwitch
from virtualwire.pipeline import guests
from virtualwire.pipeline.flow import Flow, default_flows, host_default_flows
from virtualwire.pipeline.split import switch_host_flows
from virtualwire.pipeline.wire import (fixed_location, wire_flows,
                                       wire_locations)


class IncrementalTables:
    def __init__(self, placement=None):
        self.wires: Dict[int, Wire] = {}
        self.hosts: Dict[str, Host] = {}
        self.placement = placement or Placement()
        self.by_vnic: Dict[str, int] = {}        # vnic -> cid
        self.by_host: Dict[str, Set[int]] = {}   # host -> cids crossing it
        # cid -> (host, its flows there, host, ...) and the hosts a wire
        # crosses, as flat tuples: a dict of sets per wire was 660 B of
        # it (66 MB at 100,000 wires).
        self.wire_out: Dict[int, tuple] = {}
        self.wire_hosts: Dict[int, Tuple[str, ...]] = {}
        self.tables: Dict[str, Dict] = {}        # host -> {key: Flow}
        self.dirty: Dict[str, Set] = {}          # host -> keys changed
        # host -> {key: activation flow as merged with its guest's others
        # (pipeline.guests)}, where that differs from the wire's own
        self.merged: Dict[str, Dict] = {}
        # site -> wires whose ends are in that site and another one (an
        # extender's change can only change their path), and the reverse.
        self.site_wires: Dict[str, Set[int]] = {}
        self.wire_sites: Dict[int, Set[str]] = {}
        # Moves hold their destination's frames (core.held_frames): by
        # default (True, False, or 'hosts': where the destination keeps a
        # ring), or as their migration asked (vNIC -> True/False).
        self.hold: Union[bool, str] = False
        self.hold_by_vnic: Dict[str, bool] = {}
        # Holding destinations keep the switch's learn as a fallback
        # (pipeline.wire.wire_flows): set while moves activate at STOP.
        self.learn_held = False
        # Hosts with vw-hold keep held frames themselves (host.hold_ring).
        self.hold_on_hosts = True
        # Where both hosts keep frames, the source's copies stay on it
        # (the shared setting copy-log).
        self.copies_on_hosts = True
        # Provider switches (core.switches) by name, and the (host, flows)
        # each one's own tables hold there now.
        self.switches: Dict[str, ProviderSwitch] = {}
        self.switch_out: Dict[str, Dict[str, frozenset]] = {}
        self.stats = {'recomputed': 0, 'extender_changes': 0,
                      'recomputed_for_extenders': 0}

    # -- intent --------------------------------------------------------------
    def set_wires(self, wires):
        for cid in [c for c in self.wires if c not in wires]:
            self.remove_wire(cid)
        for cid, w in wires.items():
            if self.wires.get(cid) != w:
                self.add_wire(w)

    def add_wire(self, wire):
        if wire.connector_id in self.wires:
            self.remove_wire(wire.connector_id)
        self.wires[wire.connector_id] = wire
        for v in wire.ends():
            self.by_vnic[v] = wire.connector_id
        self._recompute(wire.connector_id)

    def remove_wire(self, cid):
        wire = self.wires.pop(cid, None)
        if wire is None:
            return
        for v in wire.ends():
            if self.by_vnic.get(v) == cid:
                del self.by_vnic[v]
        self._place(cid, set())
        self._index_sites(cid, set())
        self._install(cid, {})

    # -- provider switches ---------------------------------------------------
    def set_switch(self, sw):
        """A switch as its intent says now: its flows on its host, and the
        wires plugged into its ports recomputed (its host may have
        changed, or its ports)."""
        if self.switches.get(sw.name) == sw:
            return
        self.switches[sw.name] = sw
        self._install_switch(sw.name)
        for cid in self._plugged_into(sw.name):
            self._recompute(cid)

    def remove_switch(self, name):
        if self.switches.pop(name, None) is None:
            return
        self._install_switch(name)
        for cid in self._plugged_into(name):
            self._recompute(cid)

    def _install_switch(self, name):
        """A switch's flows on every host it touches now (its parts, and
        the hosts its mesh crosses: `pipeline.split`)."""
        sw = self.switches.get(name)
        new = {h: frozenset(f) for h, f in
               switch_host_flows(sw, self.hosts).items()} if sw else {}
        old = self.switch_out.pop(name, {})
        for host in set(old) | set(new):
            self._swap(host, old.get(host, frozenset()),
                       new.get(host, frozenset()))
        if new:
            self.switch_out[name] = new

    def _plugged_into(self, name):
        """The wires plugged into switch `name`'s ports."""
        prefix = '%s%s/' % (SWITCH_END, name)
        return {c for end, c in self.by_vnic.items()
                if end.startswith(prefix)}

    # -- hosts and placement -------------------------------------------------
    def set_host(self, host):
        """A host as its OVSDB shows it now. Returns placement events
        (`core.placement.MoveSeen` / `MoveEnded`)."""
        old = self.hosts.get(host.name)
        self.hosts[host.name] = host
        if host.name not in self.tables:
            self._new_table(host.name)
        if old is None or (old.encaps, old.hold_port) != \
                (host.encaps, host.hold_port):
            self._swap(host.name, host_default_flows(old),
                       host_default_flows(host))
        old_ports = {v.vnic_id: v.ofport for v in old.vnics} if old else {}
        new_ports = {v.vnic_id: v.ofport for v in host.vnics}
        changed, events = self.placement.plug(host.name, old_ports, new_ports)
        touched = {self.by_vnic[v] for v in changed if v in self.by_vnic}
        if old is None or (old.encaps, old.site, old.role, old.hold_port) \
                != (host.encaps, host.site, host.role, host.hold_port):
            touched |= self.by_host.get(host.name, set())
        if EXTENDER in (host.role, old.role if old else None) and (
                old is None or old != replace(host, vnics=old.vnics)):
            sites = {host.site} | ({old.site} if old else set())
            between = self.by_host.get(host.name, set()).union(
                *(self.site_wires.get(x, set()) for x in sites))
            self.stats['extender_changes'] += 1
            self.stats['recomputed_for_extenders'] += len(between)
            touched |= between
        if old is None or old.ports != host.ports:
            touched |= {cid for end, cid in self.by_vnic.items()
                        if end.startswith(host.name + '/')}
        if old is None or old.site != host.site or \
                old.encaps != host.encaps:
            # Its switches' flows and their wires; and split switches'
            # meshes, which may cross it (an extender) or change with it.
            for name, sw in self.switches.items():
                if host.name in sw.part_hosts() or sw.split:
                    self._install_switch(name)
                    touched |= self._plugged_into(name)
        for cid in touched:
            self._recompute(cid)
        if old is None or guests.vm_of_port(old) != guests.vm_of_port(host):
            self._regroup(host.name)
        return events

    def set_word(self, vnic, word):
        """Placement.set_word, then the flows follow. Returns events."""
        changed, events = self.placement.set_word(vnic, word)
        for v in changed:
            self.moved(v)
        return events

    def set_strict(self, strict):
        """Placement.set_strict, then the flows follow. Returns events."""
        changed, events = self.placement.set_strict(strict)
        for v in changed:
            self.moved(v)
        return events

    def moved(self, vnic):
        """Recompute after a placement change."""
        if vnic in self.by_vnic:
            self._recompute(self.by_vnic[vnic])

    def start_move(self, vnic, source, destination):
        """Placement.start_move, then the flows follow."""
        if self.placement.start_move(vnic, source, destination):
            self.moved(vnic)

    def activate(self, vnic, host):
        """Placement.activate, then the flows follow. True if it did."""
        done = self.placement.activate(vnic, host)
        if done:
            self.moved(vnic)
        return done

    def cancel_move(self, vnic, outcome):
        """Placement.cancel_move, then the flows follow. Returns events."""
        events = self.placement.cancel_move(vnic, outcome)
        self.moved(vnic)
        return events

    def siblings_moving_to(self, vnic, host):
        """The other vNICs of `vnic`'s guest (its ports on `host` name the
        same vm-id) that are moving to `host`."""
        h = self.hosts.get(host)
        ports = h.vnic_map() if h else {}
        vm = ports[vnic].vm_id if vnic in ports else ''
        moves = self.placement.moves
        return sorted(v for v, p in ports.items()
                      if vm and v != vnic and p.vm_id == vm and v in moves
                      and moves[v].destination == host)

    def vnic_at(self, host, ofport):
        h = self.hosts.get(host)
        for v in (h.vnics if h else ()):
            if v.ofport == ofport:
                return v.vnic_id
        return None

    def location(self, end):
        return fixed_location(end, self.hosts, self.switches) or \
            self.placement.location(end)

    # -- tables --------------------------------------------------------------
    def redirty(self, host, keys):
        """Flow keys of `host` whose change a sync held back (a staged
        move, `control.switch_moves`): diffed again at the next sync."""
        self.dirty.setdefault(host, set()).update(keys)

    def pop_dirty(self):
        """{host: flow keys changed} since the last call."""
        d, self.dirty = self.dirty, {}
        return d

    def table(self, host):
        return set(self.tables.get(host, {}).values()) or default_flows()

    def table_map(self, host):
        if host not in self.tables:
            self._new_table(host)
        return self.tables[host]

    def _new_table(self, host):
        self.tables[host] = {f.key: f for f in default_flows()}
        self.dirty.setdefault(host, set()).update(self.tables[host])

    def _swap(self, host, before, after):
        """Replace flows `before` with `after` in a host's table (a flow
        is removed only if the table still holds that very flow), marking
        their keys dirty."""
        table = self.table_map(host)
        keys = self.dirty.setdefault(host, set())
        merged = self.merged.get(host, {})
        for f in before - after:
            if table.get(f.key) in (f, merged.get(f.key)):
                del table[f.key]
            keys.add(f.key)
        for f in after:
            table[f.key] = f
            keys.add(f.key)

    def holds(self, vnic) -> bool:
        """Are this moving vNIC's frames held? As its migration asked, or
        the default: on, off, or 'hosts' (where its destination keeps a
        ring: pipeline.host_hold)."""
        h = self.hold_by_vnic.get(vnic, self.hold)
        if h is True or h is False:
            return h
        mv = self.placement.moves.get(vnic)
        dst = self.hosts.get(mv.destination) if mv is not None else None
        return self.hold_on_hosts and dst is not None and \
            dst.hold_port is not None

    def _recompute(self, cid):
        wire = self.wires[cid]
        loc, shadows = wire_locations(wire, self.placement.claims,
                                      self.placement.moves, self.hosts,
                                      self.switches)
        out = wire_flows(wire, self.hosts, loc, shadows,
                         any(self.holds(v) for v in shadows),
                         self.learn_held, self.hold_on_hosts,
                         self.copies_on_hosts)
        ends = {x.host for x in loc.values()} | \
            {x.host for x in shadows.values()}
        self._place(cid, ends | set(out))
        self._index_sites(cid, {self.hosts[h].site for h in ends
                                if h in self.hosts})
        self._install(cid, out)
        self.stats['recomputed'] += 1

    def _index_sites(self, cid, sites):
        sites = sites if len(sites) > 1 else set()
        for x in self.wire_sites.get(cid, set()) - sites:
            self.site_wires.get(x, set()).discard(cid)
        for x in sites:
            self.site_wires.setdefault(x, set()).add(cid)
        if sites:
            self.wire_sites[cid] = sites
        else:
            self.wire_sites.pop(cid, None)

    def _place(self, cid, hosts):
        for h in set(self.wire_hosts.get(cid, ())) - hosts:
            self.by_host.get(h, set()).discard(cid)
        for h in hosts:
            self.by_host.setdefault(h, set()).add(cid)
        if hosts:
            self.wire_hosts[cid] = tuple(hosts)
        else:
            self.wire_hosts.pop(cid, None)

    def _install(self, cid, out):
        old = _unpack(self.wire_out.get(cid, ()))
        regroup = set()
        for host in set(old) | set(out):
            before, after = set(old.get(host, ())), out.get(host, set())
            if before != after:
                self._swap(host, before, after)
                if any(f.priority == guests.ACTIVATE for f in before ^ after):
                    regroup.add(host)
        if out:
            self.wire_out[cid] = tuple(x for h, fs in out.items()
                                       for x in (h, tuple(fs)))
        else:
            self.wire_out.pop(cid, None)
        for host in regroup:
            self._regroup(host)

    def _regroup(self, host):
        """Merge the activation flows of each guest moving to `host`
        (pipeline.guests) into its table."""
        base = {f.key: f for cid in self.by_host.get(host, ())
                for f in _unpack(self.wire_out.get(cid, ())).get(host, ())
                if f.priority == guests.ACTIVATE}
        if not base and not self.merged.get(host):
            return
        merged = guests.merge(base, guests.vm_of_port(self.hosts.get(host)))
        table = self.table_map(host)
        keys = self.dirty.setdefault(host, set())
        for k, f in merged.items():
            if table.get(k) != f:
                table[k] = f
                keys.add(k)
        self.merged[host] = {k: f for k, f in merged.items()
                             if f != base[k]}


def _unpack(packed) -> Dict[str, Tuple[Flow, ...]]:
    """{host: flows} from a wire_out entry."""
    return dict(zip(packed[0::2], packed[1::2]))
