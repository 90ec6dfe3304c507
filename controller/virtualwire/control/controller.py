"""The controller's state and the handlers of every event that changes it.

Everything here runs on the control loop (`control.loop`): no locks, and
each handler calls `loop.assert_owner()`. Intent arrives only from the
intent database's change stream (`on_intent`), so each write is applied
once, whoever wrote it. Switch writes happen in `sync`, after each burst
of events: one atomic bundle per switch whose desired table changed.
Migrations are `control.migrating`; read-only views are `control.views`.
"""
import logging
import time
from typing import Any, Optional

from virtualwire.control.cloud_word import CloudWord
from virtualwire.control.admission import PROBE, AdmissionChecks
from virtualwire.control.extenders import ExtenderHandlers
from virtualwire.control.gateways import GatewayChecks
from virtualwire.control.holding import HoldHandlers
from virtualwire.control.migrating import MigrationHandlers
from virtualwire.control.migrations import MigrationBook
from virtualwire.control.programmed import Programmed
from virtualwire.control.roles import Roles, canonical_records
from virtualwire.control.safe_start import SafeStart
from virtualwire.control.views import Views
from virtualwire.core import tenancy
from virtualwire.core.extender_keys import ExtenderKeys
from virtualwire.core.placement import Placement
from virtualwire.core.held_frames import (DEFAULT_BYTES, DEFAULT_FRAMES,
                                         DEFAULT_RATE)
from virtualwire.metrics import loss
from virtualwire.metrics.collector import Collector
from virtualwire.metrics.instruments import Instruments
from virtualwire.pipeline.flow import diff_flows, diff_keys
from virtualwire.pipeline.incremental import IncrementalTables
from virtualwire.southbound import openflow
from virtualwire.southbound.session import SwitchSession, hang_up

LOG = logging.getLogger(__name__)
DUMP_TIMEOUT = 10.0
BULK = 1000         # changes from which their cost is logged (batches)


class Controller(MigrationHandlers, HoldHandlers, ExtenderHandlers,
                 GatewayChecks, AdmissionChecks, SafeStart, Programmed, Roles,
                 Views):
    def __init__(self, loop, intent, runtime, host_dbs=None,
                 ovsdb_port=6640, move_timeout=900.0, clock=time.monotonic,
                 stats_interval=2.0, counter_lag=(loss.LAG, loss.FLIGHT),
                 instruments=None,
                 activation_settle=0.0, require_identity=False,
                 active=True, collector=None, hold=False,
                 hold_frames=DEFAULT_FRAMES, hold_bytes=DEFAULT_BYTES,
                 hold_rate=DEFAULT_RATE, strict=False):
        self.loop = loop
        self.intent = intent            # store.intent.IntentStore (reads)
        self.runtime = runtime          # store.runtime.RuntimeStore
        self.host_dbs = host_dbs        # southbound.host_ovsdb.HostDbs
        self.ovsdb_port = ovsdb_port
        self.move_timeout = move_timeout
        self.activation_settle = activation_settle
        self.sync_held_until = None     # clock(): see MigrationHandlers
        self.clock = clock
        self.tables = IncrementalTables(Placement(strict))
        # The cloud's word on where each vNIC runs (control.cloud_word).
        self.cloud_word = CloudWord(self.tables)
        self.migrations = MigrationBook()
        self.sessions = {}              # dpid -> SwitchSession
        self.host_owner = {}            # host name -> OVSDB remote
        self.remembered = {}            # name -> Host, as last persisted
        self.move_seen = {}             # vnic -> clock() when first seen
        self.announced_at = {}          # vm_uuid -> clock() at announcement
        self.changed_records = {}       # id -> Migration to persist
        self.sisters_pending = {}       # vnic -> activation's other switches
        self.sister_hosts = {}
        self.reports = {}               # extender -> its agent's last report
        self.rotations = {}             # extender -> public key to replace
        self.hurry_until = {}           # extender -> its rotation's hurry
        self.extender_keys = ExtenderKeys()
        self.stats = {'syncs': 0, 'bundles': 0, 'flow_mods': 0,
                      'switch_errors': 0, 'held_delivered': 0,
                      'held_evicted': 0, 'held_late': 0,
                      'held_late_dropped': 0, 'held_abandoned': 0,
                      'sync_host_failures': 0, 'extender_key_changes': 0,
                      'extender_keys_refused': 0}
        # Moves keep their destination's frames (control.holding): by
        # default, or as each migration asks.
        self.hold_frames, self.hold_bytes = hold_frames, hold_bytes
        self.hold_rate = hold_rate
        self.tables.hold = hold
        self.holding, self.awaiting_reads, self.arrivals = {}, {}, {}
        self.releases, self.released, self.late = {}, {}, {}
        self.polls_wanted = False
        # Intent changes taken in, and who waits for one to be programmed
        # on the switches (control.programmed).
        self.generation = 0
        self.waiters = []
        # TLS: only certificates' names are believed (control.admission);
        # host OVSDBs are then read over ssl:, else tcp: (the lab flag).
        self.init_admission(require_identity)
        # Flows of wires never seen in intent are not deleted (safe_start).
        self.init_safe_start()
        # Active, or a standby that writes nothing (control.roles).
        self.init_roles(active)
        self.instruments = instruments or Instruments()
        loop.observe_lag = self.instruments.loop_lag.observe
        # Reads flow counters on its own timer; never writes a switch. Or
        # a collector process's figures (metrics.remote), off this loop.
        self.collector = collector or Collector(
            loop, self, runtime, interval=stats_interval,
            lag=counter_lag[0], flight=counter_lag[1])
        loop.idle = self.sync
        # The shared settings' watcher (control.shared_settings), set by
        # the entry point; None in tests that drive the controller alone.
        self.settings: Optional[Any] = None

    # ---- start ---------------------------------------------------------------
    def start(self, live=None):
        """Start from the last observed hosts and migrations: live views
        (`live`, or as each host's OVSDB is read) replace them, so missing
        knowledge never removes a working wire's flows. Moves under way
        come first, so claims are read as source/destination, not arrival
        order."""
        self.loop.assert_owner()
        saved_hosts, records = self.runtime.hosts(), self.runtime.migrations()
        # What this start read: a takeover before anything else was seen
        # need not do it again (control.roles).
        self.started_from = (saved_hosts, canonical_records(records))
        self.remembered = dict(saved_hosts)
        self.ports_before(saved_hosts)      # whom held flows were for
        self.remembered.update(live or {})
        self.migrations.restore(records)
        for m in self.migrations.active.values():
            for v, src in m.sources.items():
                if src and src != m.destination:
                    if m.hold is not None:
                        self.tables.hold_by_vnic[v] = m.hold
                    self.tables.placement.start_move(v, src, m.destination)
        placements = getattr(self.intent, 'placements', None)
        if placements is not None:        # before claims are read
            self.on_words(placements.words())
        for h in self.remembered.values():
            self._placement_events(self.tables.set_host(h))
        wires = self.intent.wires()
        self.wires_seen(wires)
        self.tables.set_wires(wires)
        self.collector.start()

    # ---- intent --------------------------------------------------------------
    def on_intent(self, events, n_wires=None):
        """Wire changes from the intent database (ours or another
        writer's), in commit order. If the count still disagrees (rows
        deleted while we were disconnected), reload it all."""
        self.loop.assert_owner()
        self.generation += 1
        t0 = time.perf_counter()
        for kind, cid, wire in events:
            if kind == 'upsert':
                self.known_wires.add(cid)
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
            wires = self.intent.wires()
            self.wires_seen(wires)
            self.tables.set_wires(wires)

    def wire(self, cid):
        self.loop.assert_owner()
        w = self.tables.wires.get(cid)
        if w is None:
            raise tenancy.no_wire(cid)
        return w

    def on_words(self, changes):
        """The cloud's word on placement changed ({vnic: Word or None})."""
        self.loop.assert_owner()
        self._placement_events(self.cloud_word.apply(changes))

    def set_strict(self, strict):
        """Placement turned strict or trusting (the shared setting)."""
        self.loop.assert_owner()
        if strict != self.tables.placement.strict:
            LOG.warning('placement is now %s', 'strict: a vNIC the cloud '
                        'has not placed is nobody\'s' if strict else
                        'TRUSTING HOSTS: any host that plugs an unplaced '
                        'vNIC takes it (a lab setting)')
        self._placement_events(self.tables.set_strict(strict))

    # ---- hosts (their OVSDB) -------------------------------------------------
    def on_hosts(self, remote, hosts, identity=None):
        """What one host OVSDB reports now (`identity`: the names of its
        server's certificate). A name it no longer reports is free again
        (a bridge renamed, or the host answers elsewhere)."""
        self.loop.assert_owner()
        hosts = self.admit_hosts(remote, hosts, identity)
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
            self._placement_events(self.tables.set_host(h))
            self.evict_unadmitted(h)
            self.taps_seen(h)
            self.recheck_held(h)
            if self.remembered.get(h.name) != h:
                self.remembered[h.name] = h
                if self.active:
                    self.runtime.save_host(h)   # queued, off the loop

    def host_of_dpid(self, dpid):
        for h in self.tables.hosts.values():
            if h.dpid == dpid:
                return h.name
        return None

    # ---- switches ------------------------------------------------------------
    def on_switch_up(self, dp, identity=None, cert_expires=None):
        """A switch finished its OpenFlow handshake (`identity`: the
        names of its verified certificate, `cert_expires` when it expires;
        None without TLS)."""
        self.loop.assert_owner()
        verdict = self.admit_switch(dp, identity)
        if verdict == PROBE:
            self.probe_takeover(dp, identity, cert_expires)
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
        self.send_role(s)               # before anything else it reads
        if self.host_dbs is not None and isinstance(dp.address, tuple) \
                and dp.address:
            self.host_dbs.watch('%s:%s:%d' % (
                'ssl' if self.require_identity else 'tcp', dp.address[0],
                self.ovsdb_port))
        s.dump(lambda body: self._dumped(s, body))

    def on_switch_down(self, dp):
        self.loop.assert_owner()
        s = self.sessions.get(dp.id)
        if s is not None and s.dp is dp:
            LOG.info('switch %016x disconnected', dp.id)
            del self.sessions[dp.id]
        self.takeover_after_down(dp)

    def _session(self, dp):
        s = self.sessions.get(dp.id)
        return s if s is not None and s.dp is dp else None

    def on_multipart_reply(self, msg, more=False):
        self.loop.assert_owner()
        s = self._session(msg.datapath)
        if s is not None:
            s.reply(msg, more)

    def on_barrier_reply(self, msg):
        self.loop.assert_owner()
        s = self._session(msg.datapath)
        if s is not None:
            s.barrier_reply(msg)
            host = self.host_of_dpid(msg.datapath.id)
            if host is not None:
                self.sisters_confirmed(host, msg.xid)
            self.check_waiters()

    def _dumped(self, s: SwitchSession, body):
        """What the switch holds, so a reconnect (controller or switch
        restart) changes only what is wrong."""
        if self.sessions.get(s.dp.id) is not s:
            return
        s.installed = {f.key: f for f in map(openflow.flow_from_stats, body)}
        s.needs_full = True
        s.dump_sent_at = None
        s.dumped_at = time.time()
        LOG.info('switch %016x holds %d flows', s.dp.id, len(s.installed))
        host = self.host_of_dpid(s.dp.id)
        if host is not None:
            self.collector.on_dump(host, body)
        self.activations_in(s.dp.id, s.installed)

    def on_flow_removed(self, msg):
        self.loop.assert_owner()
        s = self._session(msg.datapath)
        host = self.host_of_dpid(msg.datapath.id) if s is not None else None
        if host is not None:
            self.collector.on_flow_removed(host, msg)

    def on_switch_error(self, msg):
        self.loop.assert_owner()
        if self.role_refused(msg):
            return
        s = self._session(msg.datapath)
        if s is not None and s.tlv_xid is not None and msg.xid == s.tlv_xid:
            # The Geneve option was mapped already (an earlier connection
            # of ours): the flows that use it are valid.
            LOG.debug('switch %s has the Geneve TLV map already', s.dp.id)
            return
        self.stats['switch_errors'] += 1
        dp = msg.datapath
        LOG.error('switch %s error type=%s code=%s',
                  '%016x' % dp.id if dp.id is not None else dp.address,
                  msg.type, msg.code)
        s = self._session(dp)
        if s is not None and s.installed is not None:
            # Our picture of its table may be wrong now: dump again.
            s.installed = None
            s.dump(lambda body: self._dumped(s, body))

    def collect(self):
        """The collector's timer: a standby reads no counters (their base
        in the database is the leader's to write)."""
        if self.active:
            self.collector.due()

    def tick(self):
        """Timers: moves never activated, switches that never answered,
        waits that a silent switch no longer holds up."""
        self.loop.assert_owner()
        self.check_waiters()
        if self.active:
            self.expire_moves()
        now = time.time()
        for s in list(self.sessions.values()):
            if s.dump_sent_at is not None and \
                    now - s.dump_sent_at > DUMP_TIMEOUT:
                LOG.error('switch %016x did not answer the flow dump',
                          s.dp.id)
                del self.sessions[s.dp.id]
                hang_up(s.dp)

    # ---- sync ----------------------------------------------------------------
    def sync(self):
        """Bring switches whose desired table changed (or that just
        connected) to it: one atomic bundle each, only the difference.
        Then persist changed migration records (switches never wait on a
        database write)."""
        self.loop.assert_owner()
        if not self.active or self.sync_held():
            return
        self.stats['syncs'] += 1
        t0, mods = time.perf_counter(), self.stats['flow_mods']
        dirty = self.tables.pop_dirty()
        sent = {}
        for h in self.sync_order():
            s = self.sessions.get(h.dpid)
            if s is None or s.installed is None:
                continue
            table = self.tables.table_map(h.name)
            full = s.needs_full
            if full:
                s.needs_full = False
                diff = diff_flows(s.installed.values(), table.values())
            elif h.name in dirty:
                diff = diff_keys(s.installed, table, dirty[h.name])
            else:
                continue
            diff = self.hold_orphans(h.name, diff, full)
            outs = self.packet_outs_for(h.name)
            if diff or outs:
                try:
                    self.stats['flow_mods'] += s.send_diff(diff, before=outs)
                except Exception:   # isolated: the other hosts go on
                    LOG.exception('host %s: its changes could not be '
                                  'encoded; nothing sent to it, its whole '
                                  'table is diffed again next sync', h.name)
                    self.stats['sync_host_failures'] += 1
                    s.needs_full = True
                    continue
                self.stats['bundles'] += 1
                sent[h.name] = s.barrier_xid
                LOG.info('host %s: +%d ~%d -%d flows', h.name,
                         len(diff.add), len(diff.modify), len(diff.delete))
        mods = self.stats['flow_mods'] - mods
        if mods >= BULK:
            LOG.info('sync: %d flow mods in %d bundles built and sent in '
                     '%.0f ms', mods, len(sent),
                     (time.perf_counter() - t0) * 1e3)
        for h in self.tables.hosts.values():
            s = self.sessions.get(h.dpid)
            if s is not None and s.installed is not None:
                self.confirm_sync(s, h.name in sent)
        self.check_waiters()
        self.sisters_sent(sent)
        records, self.changed_records = self.changed_records, {}
        for m in records.values():
            self.runtime.save_migration(m.view(), self.migrations.keep_ids())
            self.instruments.migration_changed(m.view())
