"""Moves, a part of the controller (on its loop): the hook's announcements and releases, data-plane
activation seen as a packet-in (the guest's first frame on its destination)
or in a dumped table, the last resorts when the guest sent nothing (the
source's release hook, the source port leaving), moves inferred from OVSDB,
and moves that never activated.

It owns the moves' timers, their sister-switch confirmations and the
cloud's word; the book of records is `shared.migrations`. What it tells
the other parts: `activations` (vNIC, host), drained by the controller
(held frames are released for each), and `sync_order`.
"""
import logging
import time
from typing import Dict, List, Optional, Tuple

from virtualwire.control.migrations import (ABORTED, SISTERS, STOPPED, TAP,
                                           TIMED_OUT, parse_vm_uuid)
from virtualwire.control.shared import Shared
from virtualwire.core import errors, frames
from virtualwire.core.placement import (COMPLETED, ClaimRefused, MoveEnded,
                                        MoveSeen)
from virtualwire.pipeline.wire import activation_flows

LOG = logging.getLogger(__name__)


class Moves:
    def __init__(self, shared: Shared, move_timeout=900.0,
                 activation_settle=0.0, activate_at_stop=False):
        self.shared = shared
        self.move_timeout = move_timeout
        self.activation_settle = activation_settle
        self.activate_at_stop = activate_at_stop   # see source_stopped
        self.sync_held_until = None     # clock(): see _hold_sync
        self.move_seen: Dict[str, float] = {}     # vnic -> clock() first seen
        # vm_uuid -> clock() at its announcement
        self.announced_at: Dict[str, float] = {}
        # vNIC -> (destination, {host: barrier xid} or None before the
        # sync that moves the other switches, clock() at activation)
        self.sisters_pending: Dict[
            str, Tuple[str, Optional[Dict[str, int]], float]] = {}
        self.sister_hosts: Dict[str, List[str]] = {}   # vNIC -> hosts moved
        # For the controller to pass on: (vNIC, host) activated, claims
        # placement refused.
        self.activations: List[Tuple[str, str]] = []
        self.claims_refused: List[ClaimRefused] = []
        # vNIC -> its source tap's read count at STOP, as the source's
        # agent read it, and QEMU's STOP time (passed on with the
        # activation: control.holding)
        self.stop_reads: Dict[str, int] = {}
        self.stopped_at: Dict[str, float] = {}

    @property
    def tables(self):
        return self.shared.tables

    @property
    def activate_at_stop(self) -> bool:
        """Moves activate at the source's STOP (source_stopped); holding
        destinations then keep the switch's own learn as the fallback,
        for when this controller cannot act (pipeline.wire)."""
        return self.tables.learn_held

    @activate_at_stop.setter
    def activate_at_stop(self, on: bool):
        self.tables.learn_held = on

    @property
    def migrations(self):
        return self.shared.migrations

    def reset(self):
        """A takeover's rebuild: forget what this instance guessed."""
        self.move_seen.clear()
        self.announced_at.clear()
        self.stop_reads.clear()
        self.stopped_at.clear()
        self.sisters_pending.clear()
        self.sister_hosts.clear()

    def restore_timers(self):
        """After a rebuild: move timers run from each record's start,
        not from now."""
        now, wall = self.shared.clock(), time.time()
        for m in self.migrations.active.values():
            age = max(0.0, wall - (m.started_at or wall))
            self.announced_at[m.vm_uuid] = now - age
            for v in m.vnics:
                if v in self.tables.placement.moves:
                    self.move_seen[v] = now - age

    def pop_said(self):
        """(activations, claims refused) since the last call."""
        out = self.activations, self.claims_refused
        self.activations, self.claims_refused = [], []
        return out

    def _record(self, m):
        self.shared.record(m)

    def placement_events(self, events):
        """Record what placement observed: moves seen in OVSDB with no
        announcement, and moves that ended; claims refused are passed on
        (`claims_refused`: the cloud word's to count and show)."""
        for ev in events:
            if isinstance(ev, ClaimRefused):
                self.claims_refused.append(ev)
            elif isinstance(ev, MoveSeen):
                dest = self.tables.hosts.get(ev.move.destination)
                port = dest.vnic_map().get(ev.vnic) if dest else None
                m = self.migrations.inferred(
                    ev.vnic, port.vm_id if port else '', ev.move.source,
                    ev.move.destination)
                if m is not None:
                    LOG.info('vNIC %s moving %s -> %s (seen in OVSDB, not '
                             'announced)', ev.vnic, ev.move.source,
                             ev.move.destination)
                self._record(m)
            elif isinstance(ev, MoveEnded):
                if ev.outcome == COMPLETED and not ev.move.activated:
                    # The guest sent nothing on its destination before its
                    # source went: the move's end is the last resort.
                    LOG.warning('vNIC %s: no frame from the guest on %s '
                                'before its source %s left', ev.vnic,
                                ev.move.destination, ev.move.source)
                    self._record(self.migrations.activated(
                        ev.vnic, ev.move.destination, frames.SOURCE_LEFT))
                    # Its held frames go now (the guest's first frame may
                    # have been a packet-in its switch dropped, its queue
                    # full of held frames: CI of 644c9c2), or never.
                    self.activations.append((ev.vnic, ev.move.destination))
                LOG.info('vNIC %s move %s -> %s %s', ev.vnic, ev.move.source,
                         ev.move.destination, ev.outcome)
                self.move_seen.pop(ev.vnic, None)
                self.tables.hold_by_vnic.pop(ev.vnic, None)
                self._record(self.migrations.move_finished(ev.vnic,
                                                           ev.outcome))

    def announce_migration(self, doc):
        """The destination's hook: a guest is arriving. Returns (record
        view, a ticket for its durable write)."""
        self.shared.loop.assert_owner()
        placement = self.tables.placement

        def location(v):
            loc = placement.location(v)
            return loc.host if loc else None

        def vm_id(v):
            host = self.tables.hosts.get(location(v) or '')
            port = host.vnic_map().get(v) if host else None
            return port.vm_id if port else ''
        try:
            m = self.migrations.announce(doc, set(self.tables.hosts),
                                         self.shared.connected_hosts(), location,
                                         vm_id)
        except errors.VwError as e:
            LOG.warning('migration refused: %s', e.message)
            raise
        for v, src in m.sources.items():
            if src != m.destination:
                if m.hold is not None:
                    self.tables.hold_by_vnic[v] = m.hold
                self.tables.start_move(v, src, m.destination)
        self.announced_at[m.vm_uuid] = self.shared.clock()
        LOG.info('migration %s: %s (%s) %s -> %s', m.id, m.vm, m.vm_uuid,
                 sorted({s for s in m.sources.values() if s}), m.destination)
        # Durable before the hook lets libvirt go on: a controller that
        # restarts mid-migration must know each move's source.
        ticket = self.shared.runtime.save_migration(
            m.view(), self.migrations.keep_ids())
        return m.view(), ticket

    def migration_released(self, vm_uuid, host):
        """A host's hook: the guest left `host`."""
        self.shared.loop.assert_owner()
        vm_uuid = self._known(vm_uuid)
        m = self.migrations.leaving_source(vm_uuid, host)
        if m is not None:
            # The guest left its source: it runs on the destination even if
            # it has sent nothing there yet (a QEMU whose announce sent
            # nothing, a guest that disabled it): a last resort.
            for v in m.vnics:
                self._activate(v, m.destination, frames.RELEASE_HOOK)
        m = self.migrations.released(vm_uuid, host)
        if m is not None and m.state == ABORTED:
            for v in m.vnics:
                mv = self.tables.placement.moves.get(v)
                if mv is not None and mv.destination == host:
                    self._cancel(v, ABORTED)
        if m is not None:
            LOG.info('migration %s of %s %s (%.2fs)', m.id, m.vm, m.state,
                     m.ended_at - m.started_at)
            self._record(m)
        return m.view() if m is not None else None

    def source_stopped(self, vm_uuid, host, reads=None, stopped_at=None):
        """A source's agent: libvirt paused the guest on `host` for its
        migration's last copy. From QEMU's STOP the source reads its tap no
        more, so its count is final and what it never read is known: the
        move activates now (--activate-at-stop), before the guest runs on
        the destination. Its destination tap queues what it is handed
        (held frames first) until QEMU there runs the guest, which reads
        them at once: nothing waits for the guest's first frame and a
        controller round trip after RESUME. Should the migration still
        fail, the guest runs on its source again and the abort (the
        destination's port leaving, its hook) takes delivery back there,
        as for any activated move; what came between is lost.
        `reads` (vNIC -> its tap's read count then, the agent's) place the
        held frames' cut without the source switch's answer; `stopped_at`
        (QEMU's STOP, Unix time) lets the source's copy log time it.
        A lie (the guest still runs, a wrong count) can come only from the
        guest's own source, which can starve it anyway."""
        self.shared.loop.assert_owner()
        vm_uuid = self._known(vm_uuid)
        m = self.migrations.leaving_source(vm_uuid, host)
        if m is None:
            raise errors.Conflict('guest %s is not migrating out of %s'
                                  % (vm_uuid, host))
        stray = sorted(set(reads or ()) - set(m.vnics))
        if stray:
            raise errors.Invalid('reads: not vNICs of this migration: %s'
                                 % ', '.join(stray))
        for v in m.vnics:
            mv = self.tables.placement.moves.get(v)
            if mv is None or mv.source != host:
                continue
            self._record(self.migrations.step(v, STOPPED))
            if self.activate_at_stop and self._activate(
                    v, m.destination, frames.SOURCE_STOPPED) and \
                    reads and v in reads:
                self.stop_reads[v] = reads[v]
                if stopped_at is not None:
                    self.stopped_at[v] = stopped_at
        return m.view()

    def _known(self, vm_uuid):
        """The guest's UUID, parsed; NotFound if no migration has it."""
        vm_uuid = parse_vm_uuid(vm_uuid)
        if not self.migrations.known(vm_uuid):
            raise errors.NotFound('no migration of guest %s is known'
                                  % vm_uuid)
        return vm_uuid

    def _cancel(self, vnic, outcome):
        self.placement_events(self.tables.cancel_move(vnic, outcome))

    def on_packet_in(self, host, msg):
        """The copy of a moving guest's first frame on its destination,
        sent once the switch's learn action switched delivery over: clean
        up around it, and record what kind of frame it was. (The
        controller has checked the session and that no held frame took
        it.)"""
        vnic = self.tables.vnic_at(host, msg.match.get('in_port')) \
            if host else None
        if vnic is not None and self._activate(
                vnic, host, frames.kind(bytes(msg.data or b''))):
            # The switch learned the guest's other vNICs' delivery with
            # this frame (pipeline.guests): the guest runs here.
            for v in self.tables.siblings_moving_to(vnic, host):
                self._activate(v, host, frames.SIBLING_FRAME)
            if not self.tables.holds(vnic):
                self._hold_sync()

    def _activate(self, vnic, host, trigger):
        if self.tables.activate(vnic, host):
            LOG.info('vNIC %s activated on %s (%s)', vnic, host, trigger)
            self._record(self.migrations.activated(vnic, host, trigger))
            # The other switches move at the next sync: see sisters_sent.
            self.sisters_pending[vnic] = (host, None, self.shared.clock())
            self.activations.append((vnic, host))
            return True
        return False

    def _hold_sync(self):
        """The switch has just learned the delivering flow itself and the
        guest's traffic is flowing again: our cleanup bundles can wait a
        moment. A switch on the userspace datapath reads its ports in the
        thread that also handles OpenFlow, so a bundle stops its traffic
        for 1-2 ms (bench/bench_activation.py); sent at once, that stop
        fell on the first frames after the pause. Held from the first
        activation only, so a guest's other vNICs join the same sync."""
        if self.activation_settle > 0 and self.sync_held_until is None:
            self.sync_held_until = self.shared.clock() + self.activation_settle
            self.shared.loop.after(self.activation_settle, self._settled)

    def _settled(self):
        """An event, so that the loop's sync runs after it."""

    def sync_held(self):
        if self.sync_held_until is None:
            return False
        if self.shared.clock() < self.sync_held_until:
            return True
        self.sync_held_until = None
        return False

    def activations_in(self, host, installed):
        """A destination that learned its flow while we were not listening
        (controller restarted mid-migration) has activated the move."""
        for key, rarp in activation_flows(self.tables.table_map(host)).items():
            port = dict(rarp.match)['in_port']
            have = installed.get(key)
            if have is not None and have.actions == (('output', port),):
                vnic = self.tables.vnic_at(host, port)
                if vnic:
                    self._activate(vnic, host, frames.FOUND_IN_TABLE)

    # ---- the timeline's steps ------------------------------------------------
    def taps_seen(self, host):
        """A host's OVSDB changed: a moving vNIC's tap on its destination
        is the guest's QEMU starting there."""
        for m in list(self.migrations.active.values()):
            if m.destination == host.name:
                here = host.vnic_map()
                for v in m.vnics:
                    if v in here and TAP not in m.steps.get(v, {}):
                        self._record(self.migrations.step(v, TAP))

    def sisters_sent(self, sent):
        """sent: {host: barrier xid} of the bundles this sync sent. Those
        right after an activation move the other switches to the
        destination; their barrier replies say when they all had."""
        for v, (dest, waiting, since) in list(self.sisters_pending.items()):
            if waiting is None:
                waiting = {h: x for h, x in sent.items() if h != dest}
                self.sisters_pending[v] = (dest, waiting, since)
                self.sister_hosts[v] = sorted(waiting)
                self._sisters_done(v)

    def sisters_confirmed(self, host, xid):
        for v, (_dest, waiting, _since) in list(
                self.sisters_pending.items()):
            if waiting and waiting.get(host) == xid:
                del waiting[host]
                self._sisters_done(v)

    def _sisters_done(self, vnic):
        dest, waiting, _since = self.sisters_pending[vnic]
        if not waiting:
            del self.sisters_pending[vnic]
            self._record(self.migrations.step(
                vnic, SISTERS, destination=dest,
                hosts=self.sister_hosts.pop(vnic, [])))

    def expire_moves(self):
        """A move never activated within move_timeout (a migration stuck or
        aborted without its destination port going away) is cancelled:
        the wire goes back to exactly its pre-migration flows."""
        now = self.shared.clock()
        for v, (_d, _w, since) in list(self.sisters_pending.items()):
            if now - since > 60:             # a switch that never answered
                del self.sisters_pending[v]
                self.sister_hosts.pop(v, None)
        moves = self.tables.placement.moves
        for v in [v for v in self.move_seen if v not in moves]:
            del self.move_seen[v]
        for v, m in list(moves.items()):
            since = self.move_seen.setdefault(v, now)
            if not m.activated and now - since > self.move_timeout:
                LOG.warning('vNIC %s: move to %s not activated in %gs, '
                            'cancelled', v, m.destination, self.move_timeout)
                self._cancel(v, TIMED_OUT)
        # An announcement whose vNICs never moved (no tap on the
        # destination, or nothing to follow) ends too: records are bounded.
        for vm_uuid, at in list(self.announced_at.items()):
            rec = self.migrations.active.get(vm_uuid)
            if rec is None:
                del self.announced_at[vm_uuid]
            elif now - at > self.move_timeout and not any(
                    v in moves for v in rec.vnics):
                LOG.warning('migration %s of %s: announced %gs ago and '
                            'never started, expired', rec.id, rec.vm,
                            self.move_timeout)
                del self.announced_at[vm_uuid]
                self._record(self.migrations.expire(vm_uuid))

    def sync_order(self):
        """Hosts in the order their bundles go out: destinations that just
        activated a move first (a move activated by a hook or by its source
        leaving delivers only once its destination has our bundle)."""
        first = {dest for dest, waiting, _ in self.sisters_pending.values()
                 if waiting is None}
        if not first:
            return list(self.tables.hosts.values())
        return sorted(self.tables.hosts.values(),
                      key=lambda h: h.name not in first)
