"""The controller: its parts, composed, and the events that drive them.

Everything here runs on the control loop (`control.loop`): no locks, and
each handler calls `loop.assert_owner()`. Intent arrives only from the
intent database's change stream (`on_intent`), so each write is applied
once, whoever wrote it. Switch writes happen in `sync`, after each burst
of events: one atomic bundle per switch whose desired table changed.

Each part owns its state and never calls another part (Faucet's
managers, composed): this class hands one part's result to the next.

- `programming`: sync's bundles, generations, who waits for them;
- `safe_start`: flows of wires never seen in intent, kept;
- `moves`: migrations' activation, timers, sister switches;
- `cloud_word`: where the cloud places each vNIC, sources' departures;
- `holding`: frames held for a moving guest and released at activation;
- `admission`: which switches and host reports are believed;
- `roles`: active or standby;
- `extenders`: extender links, agents' reports and keys;
- `provider_switches`: switches the provider implements in OVS flows;
- `switch_moves`: a provider switch's move, make-before-break;
- `quiet_collections`: garbage collections kept off migrations;
- `views` reads them all for the API. What they share to read is
  `shared` (`control.shared`).
"""
import logging
import time
from typing import Any, Optional

from virtualwire.control import startup
from virtualwire.control.admission import PROBE, Admission
from virtualwire.control.cloud_word import CloudWord
from virtualwire.control.extenders import Extenders
from virtualwire.control.holding import Holding
from virtualwire.control.migrating import Moves
from virtualwire.control.programming import Programming
from virtualwire.control.provider_switches import ProviderSwitches
from virtualwire.control.quiet_collections import QuietCollections
from virtualwire.control.switch_moves import SwitchMoves
from virtualwire.control.refusals import Refusals
from virtualwire.control.roles import RESEND, STAND_BY, TAKE_OVER, Roles
from virtualwire.control.safe_start import SafeStart
from virtualwire.control.shared import Shared
from virtualwire.control.views import Views
from virtualwire.core.placement import Placement
from virtualwire.core.held_frames import (DEFAULT_BYTES, DEFAULT_FRAMES,
                                          DEFAULT_RATE)
from virtualwire.metrics import loss
from virtualwire.metrics.collector import Collector
from virtualwire.metrics.instruments import Instruments
from virtualwire.pipeline.flow import FlowDiff
from virtualwire.pipeline.incremental import IncrementalTables
from virtualwire.pipeline import switch as switch_pipeline
from virtualwire.southbound import openflow
from virtualwire.southbound.session import SwitchSession, hang_up

LOG = logging.getLogger(__name__)
DUMP_TIMEOUT = 10.0
BULK = 1000         # changes from which their cost is logged (batches)


class Controller:
    def __init__(self, loop, intent, runtime, host_dbs=None,
                 ovsdb_port=6640, move_timeout=900.0, clock=time.monotonic,
                 stats_interval=2.0, counter_lag=(loss.LAG, loss.FLIGHT),
                 instruments=None,
                 activation_settle=0.0, require_identity=False,
                 active=True, collector=None, hold=False,
                 hold_frames=DEFAULT_FRAMES, hold_bytes=DEFAULT_BYTES,
                 hold_rate=DEFAULT_RATE, strict=False,
                 activate_at_stop=False, quiet=None):
        self.loop = loop
        self.intent = intent            # store.intent.IntentStore (reads)
        self.runtime = runtime          # store.runtime.RuntimeStore
        self.host_dbs = host_dbs        # southbound.host_ovsdb.HostDbs
        self.ovsdb_port = ovsdb_port
        tables = IncrementalTables(Placement(strict))
        tables.hold = hold      # moves keep their destination's frames
        self.shared = Shared(loop, clock, tables, runtime,
                             {'switch_errors': 0})
        self.refusals = Refusals(self.shared.stats)
        self.programming = Programming(self.shared)
        self.safe_start = SafeStart(self.shared)
        self.moves = Moves(self.shared, move_timeout, activation_settle,
                           activate_at_stop)
        # The cloud's word on where each vNIC runs, and the sources'
        # reports of guests leaving (control.cloud_word).
        self.cloud_word = CloudWord(self.shared)
        self.holding = Holding(self.shared, hold_frames, hold_bytes,
                               hold_rate)
        # TLS: only certificates' names are believed (control.admission);
        # host OVSDBs are then read over ssl:, else tcp: (the lab flag).
        self.admission = Admission(self.shared, self.refusals,
                                   require_identity)
        self.roles = Roles(active)      # or a standby that writes nothing
        self.extenders = Extenders(self.shared, intent, self.refusals)
        self.provider_switches = ProviderSwitches(self.shared)
        self.switch_moves = SwitchMoves(self.shared)
        self.host_owner = {}            # host name -> OVSDB remote
        self.remembered = {}            # name -> Host, as last persisted
        self.started_from = None        # what start() read (control.startup)
        self.instruments = instruments or Instruments()
        loop.observe_lag = self.instruments.loop_lag.observe
        # Reads flow counters on its own timer; never writes a switch. Or
        # a collector process's figures (metrics.remote), off this loop.
        self.collector = collector or Collector(
            loop, self.shared, runtime, interval=stats_interval,
            lag=counter_lag[0], flight=counter_lag[1])
        self.views = Views(self)
        # Garbage collections kept off migrations (the entry point's; a
        # test's controller leaves the process's collector alone).
        self.quiet = quiet or QuietCollections(collector=_NoCollector())
        loop.idle = self.sync
        # The shared settings' watcher (control.shared_settings), set by
        # the entry point; None in tests that drive the controller alone.
        self.settings: Optional[Any] = None

    @property
    def active(self):
        return self.roles.active

    @property
    def tables(self):
        return self.shared.tables

    @property
    def sessions(self):
        return self.shared.sessions

    def start(self, live=None):
        """Start from the last observed hosts and migrations
        (`control.startup`)."""
        self.loop.assert_owner()
        startup.start(self, live)

    # ---- intent and the cloud's word -----------------------------------------
    def on_intent(self, events, n_wires=None):
        """Wire changes from the intent database (ours or another
        writer's), in commit order. If the count still disagrees (rows
        deleted while we were disconnected), reload it all."""
        self.loop.assert_owner()
        self.programming.intent_taken()
        t0 = time.perf_counter()
        for kind, cid, wire in events:
            if kind == 'upsert':
                self.safe_start.wires_seen((cid,))
                if self.tables.wires.get(cid) != wire:
                    self.tables.add_wire(wire)
            else:
                self.tables.remove_wire(cid)
        if len(events) >= BULK:
            LOG.info('intent: %d changes computed in %.0f ms', len(events),
                     (time.perf_counter() - t0) * 1e3)
        if n_wires is not None and n_wires != len(self.tables.wires):
            LOG.warning('intent has %d wires, we hold %d: reloading',
                        n_wires, len(self.tables.wires))
            startup.load_wires(self)

    def on_switches(self, switches):
        """The intent database's provider switches now (all of them)."""
        self.loop.assert_owner()
        for old, sw, hosts in self.provider_switches.apply(switches):
            self.switch_moves.start(old, sw, hosts)

    def on_words(self, changes):
        """The cloud's word on placement changed ({vnic: Word or None})."""
        self.loop.assert_owner()
        self.placement_events(self.cloud_word.apply(changes))

    def set_strict(self, strict):
        """Placement turned strict or trusting (the shared setting)."""
        self.loop.assert_owner()
        if strict != self.tables.placement.strict:
            LOG.warning('placement is now %s', 'strict: a vNIC the cloud '
                        'has not placed is nobody\'s' if strict else
                        'TRUSTING HOSTS: any host that plugs an unplaced '
                        'vNIC takes it (a lab setting)')
        self.placement_events(self.tables.set_strict(strict))

    # ---- hosts (their OVSDB) -------------------------------------------------
    def on_hosts(self, remote, hosts, identity=None):
        """What one host OVSDB reports now (`identity`: the names of its
        server's certificate). A name it no longer reports is free again
        (a bridge renamed, or the host answers elsewhere)."""
        self.loop.assert_owner()
        hosts = self.admission.admit_hosts(remote, hosts, identity)
        names = {h.name for h in hosts}
        for name, owner in list(self.host_owner.items()):
            if owner == remote and name not in names:
                del self.host_owner[name]
        for h in hosts:
            owner = self.host_owner.setdefault(h.name, remote)
            if owner != remote:
                LOG.warning('host name %s is used by %s and %s; ignoring the '
                            'second', h.name, owner, remote)
                continue
            self.placement_events(self.tables.set_host(h))
            if self.admission.evict_unadmitted(h):
                self._drop(h.dpid)
            self.moves.taps_seen(h)
            self.safe_start.recheck_held(h)
            if self.remembered.get(h.name) != h:
                self.remembered[h.name] = h
                if self.active:
                    self.runtime.save_host(h)   # queued, off the loop

    def announce_migration(self, doc):
        """The destination's hook (`Moves.announce_migration`); garbage
        collections wait until the move is over (control.quiet_collections)."""
        self.quiet.quiet()
        return self.moves.announce_migration(doc)

    def source_stopped(self, vm_uuid, host, reads=None, stopped_at=None):
        """A source's agent: its guest stopped for the last copy. What
        the activation asks for its held frames goes out in this event:
        left to the sync, it waited behind the REST reply and the burst's
        other events (158 ms in 2 of 40 bench moves)."""
        self.quiet.quiet()
        view = self.moves.source_stopped(vm_uuid, host, reads, stopped_at)
        self._pass_on()
        return view

    def placement_events(self, events):
        """What placement observed (moves seen, ended; claims refused)."""
        self.moves.placement_events(events)
        self._pass_on()

    # ---- switches ------------------------------------------------------------
    def on_switch_up(self, dp, identity=None, cert_expires=None):
        """A switch finished its OpenFlow handshake (`identity`: the
        names of its verified certificate, `cert_expires` when it expires;
        None without TLS)."""
        self.loop.assert_owner()
        verdict = self.admission.admit_switch(dp, identity)
        if verdict == PROBE:
            xid = self.admission.probe_takeover(dp, identity, cert_expires)

            def due():      # the probe's time is up (control.admission)
                p = self.admission.takeover_due(dp.id, xid)
                if p is not None:
                    self._take_over(p)
            self.loop.after(self.admission.switch_takeovers.probe, due)
            return
        if not verdict:
            hang_up(dp)
            return
        LOG.info('switch %016x connected from %s (certificate: %s)', dp.id,
                 dp.address, ', '.join(sorted(identity or ())) or 'none')
        s = SwitchSession(dp, identity=identity)
        s.cert_expires = cert_expires
        old = self.sessions.get(dp.id)
        if old is not None and old.dp is not dp:
            hang_up(old.dp)              # the same switch, reconnected
        self.sessions[dp.id] = s
        self.roles.send_role(s)         # before anything else it reads
        if self.host_dbs is not None and isinstance(dp.address, tuple) \
                and dp.address:
            self.host_dbs.watch('%s:%s:%d' % (
                'ssl' if self.admission.require_identity else 'tcp',
                dp.address[0], self.ovsdb_port))
        s.dump(lambda body: self._dumped(s, body))

    def _take_over(self, p):
        """A probed switch is gone: its newcomer takes its session."""
        old = self.sessions.get(p.dp.id)
        if old is not None and old.dp is p.old_dp:
            self._drop(p.dp.id)
        self.on_switch_up(p.dp, p.identity, p.cert_expires)

    def _drop(self, dpid):
        s = self.sessions.pop(dpid, None)
        if s is not None:
            hang_up(s.dp)

    def on_switch_down(self, dp):
        self.loop.assert_owner()
        if self.shared.session(dp) is not None:
            LOG.info('switch %016x disconnected', dp.id)
            del self.sessions[dp.id]
        p = self.admission.switch_takeovers.gone(dp)
        if p is not None:
            self._take_over(p)

    def on_multipart_reply(self, msg, more=False):
        self.loop.assert_owner()
        s = self.shared.session(msg.datapath)
        if s is not None:
            s.reply(msg, more)

    def on_barrier_reply(self, msg):
        self.loop.assert_owner()
        s = self.shared.session(msg.datapath)
        if s is not None:
            s.barrier_reply(msg)
            host = self.shared.host_of_dpid(msg.datapath.id)
            if host is not None:
                self.moves.sisters_confirmed(host, msg.xid)
                self.switch_moves.confirmed(host, msg.xid)
            self.programming.check_waiters()

    def _dumped(self, s: SwitchSession, body):
        """What the switch holds, so a reconnect (controller or switch
        restart) changes only what is wrong."""
        if self.sessions.get(s.dp.id) is not s:
            return
        # A switch's learned MACs are its own (pipeline.switch.learned).
        s.installed = {f.key: f for f in map(openflow.flow_from_stats, body)
                       if not switch_pipeline.learned(f)}
        s.needs_full = True
        s.dump_sent_at = None
        s.dumped_at = time.time()
        LOG.info('switch %016x holds %d flows', s.dp.id, len(s.installed))
        host = self.shared.host_of_dpid(s.dp.id)
        if host is not None:
            self.collector.on_dump(host, body)
            self.moves.activations_in(host, s.installed)

    def on_flow_removed(self, msg):
        self.loop.assert_owner()
        s = self.shared.session(msg.datapath)
        host = self.shared.host_of_dpid(msg.datapath.id) if s is not None else None
        if host is not None:
            self.collector.on_flow_removed(host, msg)

    def on_packet_in(self, msg):
        """A held frame, a source's copy, or a moving guest's first frame
        on its destination (control.holding, then control.migrating)."""
        self.loop.assert_owner()
        if self.shared.session(msg.datapath) is None:
            return      # not an admitted session: not its dpid's host's
        host = self.shared.host_of_dpid(msg.datapath.id)
        if host and not self.holding.hold_packet_in(host, msg):
            self.moves.on_packet_in(host, msg)
        self._pass_on()

    def _pass_on(self):
        """What the moves said since: held frames are released for each
        activation, and the cloud's word counts each claim refused."""
        activations, refused = self.moves.pop_said()
        for vnic, host in activations:
            self.holding.held_activation(
                vnic, host, self.moves.stop_reads.pop(vnic, None),
                self.moves.stopped_at.pop(vnic, None))
        for ev in refused:
            self.cloud_word.seen(ev)

    def on_switch_error(self, msg):
        self.loop.assert_owner()
        if self.roles.role_refused(msg):
            return
        s = self.shared.session(msg.datapath)
        if s is not None and s.tlv_xid is not None and msg.xid == s.tlv_xid:
            # The Geneve option was mapped already (an earlier connection
            # of ours): the flows that use it are valid.
            LOG.debug('switch %s has the Geneve TLV map already', s.dp.id)
            return
        self.shared.stats['switch_errors'] += 1
        dp = msg.datapath
        LOG.error('switch %s error type=%s code=%s',
                  '%016x' % dp.id if dp.id is not None else dp.address,
                  msg.type, msg.code)
        if s is not None and s.installed is not None:
            # Our picture of its table may be wrong now: dump again.
            s.installed = None
            s.dump(lambda body: self._dumped(s, body))

    # ---- trust and roles -----------------------------------------------------
    def on_revocations(self, entries):
        """The revocation list changed (control.admission)."""
        self.loop.assert_owner()
        for dpid in self.admission.on_revocations(entries, self.host_dbs):
            self._drop(dpid)

    def on_leadership(self, state):
        """store.leadership.State: this instance's role now."""
        self.loop.assert_owner()
        what = self.roles.on_leadership(state)
        if what == TAKE_OVER:
            startup.take_over(self)
        elif what in (STAND_BY, RESEND):
            for s in self.sessions.values():
                self.roles.send_role(s)

    # ---- timers --------------------------------------------------------------
    def collect(self):
        """The collector's timer: a standby reads no counters (their base
        in the database is the leader's to write)."""
        if self.active:
            self.collector.due()

    def poll_held(self):
        """The held frames' timer (control.holding), while leading."""
        if self.active:
            self.holding.poll_held()

    def tick(self):
        """Timers: moves never activated, switches that never answered,
        waits that a silent switch no longer holds up."""
        self.loop.assert_owner()
        self.programming.check_waiters()
        if self.active:
            self.moves.expire_moves()
            self.switch_moves.expire()
            self._pass_on()
        now = time.time()
        for s in list(self.sessions.values()):
            if s.dump_sent_at is not None and \
                    now - s.dump_sent_at > DUMP_TIMEOUT:
                LOG.error('switch %016x did not answer the flow dump',
                          s.dp.id)
                self._drop(s.dp.id)

    # ---- sync ----------------------------------------------------------------
    def sync(self):
        """After each burst of events: the switches to their desired
        tables (control.programming), each bundle with the flows a safe
        start keeps and the frames a move releases just before it; then
        the changed migration records, persisted (switches never wait on
        a database write)."""
        self.loop.assert_owner()
        self._pass_on()
        self.quiet.settle(bool(self.shared.migrations.active))
        if self.holding.logs.any_logged():
            self.holding.polls_wanted = True
        if not self.active or self.holding.awaiting_source() or \
                self.moves.sync_held():
            return      # held frames go out with the bundle they wait for
        sent = self.programming.sync(self.moves.sync_order(), self._adjust)
        self.moves.sisters_sent(sent)
        self.switch_moves.sent(sent)
        for m in self.shared.pop_changed().values():
            self.runtime.save_migration(
                m.view(), self.shared.migrations.keep_ids())
            self.instruments.migration_changed(m.view())

    def _adjust(self, host, diff: FlowDiff, full):
        diff, after = self.switch_moves.adjust(host, diff, full)
        if not self.switch_moves.active_on(host):   # not mid-move
            after += self.provider_switches.purges_for(host)
        return (self.safe_start.hold_orphans(host, diff, full),
                self.holding.packet_outs_for(host), after)


class _NoCollector:
    """The gc module's part QuietCollections uses, doing nothing."""

    def isenabled(self):
        return True

    def disable(self):
        pass

    def enable(self):
        pass
