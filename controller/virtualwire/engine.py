"""The controller's engine: merges intent and host state, computes every
host's desired flow table (pure `flows.compute_flows`) and brings each
connected switch to it with one atomic bundle per change.

One sync loop does all switch writes, so there is never a race between two
writers; everything else only marks the state dirty.
"""
import logging
import time

from os_ken.lib import hub

from virtualwire import flows as fl
from virtualwire import ids, ofmsg
from virtualwire.host_ovsdb import HostDb
from virtualwire.intent_store import VnicTaken
from virtualwire.migrations import (ABORTED, TIMED_OUT, MigrationBook,
                                    MigrationRefused)
from virtualwire.model import World

LOG = logging.getLogger(__name__)


class ApiError(Exception):
    """A request that cannot be done; carries the HTTP status to answer."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class DpConn:
    def __init__(self, dp):
        self.dp = dp
        self.installed = None        # {key: Flow} once the dump is in
        self.needs_full = True       # diff the whole table on next sync
        self.bundle_id = 1
        self.connected_at = time.time()
        self.confirmed_at = None     # barrier reply after our last bundle
        self.barrier_xid = None


class Engine:
    def __init__(self, store, ovsdb_port=6640, static_host_dbs=(),
                 move_timeout=900):
        self.store = store
        self.move_timeout = move_timeout
        self.move_seen = {}          # vnic -> monotonic time move first seen
        self.ovsdb_port = ovsdb_port
        self._reload_intent = False
        self.host_dbs = {}           # remote -> HostDb
        self.host_owner = {}         # host name -> remote it is live from
        self.remembered = {}         # name -> Host, as last persisted
        self.tables = fl.IncrementalTables()
        self.migrations = MigrationBook()
        self.state_lock = hub.Semaphore()
        self.dps = {}                # dpid -> DpConn
        self.pending_replies = {}    # xid -> (list, Event)
        self.api_lock = hub.Semaphore()
        self._dirty = hub.Event()
        self._thread = None
        self.stats = {'syncs': 0, 'bundles': 0, 'flow_mods': 0,
                      'switch_errors': 0}
        for remote in static_host_dbs:
            self.watch_host_db(remote)

    # ---- lifecycle -------------------------------------------------------
    def _load_intent(self):
        wires = self.store.wires()
        with self.state_lock:
            self.tables.set_wires(wires)

    def start(self):
        # Start from the last observed hosts: live views replace them as
        # each host's OVSDB is read, so missing knowledge never removes a
        # working wire's flows.
        self.remembered = self.store.hosts()
        # Migrations under way when we stopped: their moves come first, so
        # the hosts' claims are read as source and destination, not by
        # arrival order (which a restart loses).
        self.migrations.restore(self.store.migrations())
        for m in self.migrations.active.values():
            for v, src in m.sources.items():
                if src and src != m.destination:
                    self.tables.start_move(v, src, m.destination)
        for h in self.remembered.values():
            self.tables.set_host(h)
        self._load_intent()
        self._thread = hub.spawn(self._loop)

    def mark_dirty(self):
        self._dirty.set()

    def _loop(self):
        while True:
            self._dirty.wait(timeout=5)
            self._dirty.clear()
            try:
                self.sync()
            except Exception:
                LOG.exception('sync failed')
                hub.sleep(0.5)
                self._dirty.set()

    # ---- observed state --------------------------------------------------
    def world(self):
        """Intent and host state as one value (for views and checks)."""
        with self.state_lock:
            return World(wires=dict(self.wires), hosts=dict(self.tables.hosts),
                         moves=dict(self.tables.moves))

    def intent_changed(self, events=(), n_wires=None):
        """Apply Wire changes seen in the intent database (ours or another
        writer's). If the count still disagrees (e.g. rows deleted while we
        were disconnected), reload it all, once, in the sync loop."""
        with self.state_lock:
            for kind, cid, wire in events:
                self._apply(kind, cid, wire)
            if n_wires is not None and n_wires != len(self.wires):
                self._reload_intent = True
        self.mark_dirty()

    @property
    def wires(self):
        """connector id -> Wire (the flow tables' own copy of the intent)."""
        return self.tables.wires

    @property
    def vnic_wire(self):
        """vNIC id -> connector id."""
        return self.tables.by_vnic

    def _apply(self, kind, cid, wire=None):
        """One wire change, idempotent: our own writes come back as
        database events too, and may arrive before the writer applies them.
        Caller holds state_lock."""
        if kind == 'upsert':
            if self.wires.get(cid) != wire:
                self.tables.add_wire(wire)
        else:
            self.tables.remove_wire(cid)

    def watch_host_db(self, remote):
        if remote in self.host_dbs:
            return
        db = HostDb(remote, self._host_update)
        self.host_dbs[remote] = db
        hub.spawn(self._start_host_db, db)

    def _start_host_db(self, db):
        delay = 0.2
        while True:
            try:
                db.start()
                LOG.info('reading host OVSDB %s', db.remote)
                return
            except Exception as e:  # not up yet: keep trying, slowly
                LOG.warning('host OVSDB %s: %s', db.remote, e)
                hub.sleep(delay)
                delay = min(delay * 2, 5)

    def _host_update(self, remote, hosts):
        # A name this OVSDB no longer reports is free again (a bridge was
        # renamed, or the host now answers from another address).
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
            with self.state_lock:
                self.tables.set_host(h)
            if self.remembered.get(h.name) != h:
                try:
                    self.store.save_host(h)
                    self.remembered[h.name] = h
                except Exception as e:
                    LOG.error('could not persist host %s: %s', h.name, e)
        self.mark_dirty()

    # ---- switches --------------------------------------------------------
    def dp_connected(self, dp):
        LOG.info('switch %016x connected from %s', dp.id, dp.address)
        self.dps[dp.id] = DpConn(dp)
        if isinstance(dp.address, tuple) and dp.address:
            self.watch_host_db('tcp:%s:%d' % (dp.address[0], self.ovsdb_port))
        hub.spawn(self._initial_dump, dp)

    def dp_disconnected(self, dp):
        conn = self.dps.get(dp.id)
        if conn is not None and conn.dp is dp:
            LOG.info('switch %016x disconnected', dp.id)
            del self.dps[dp.id]

    def _initial_dump(self, dp):
        """Learn what the switch already has, so a reconnect (controller or
        switch restart) changes only what is wrong."""
        try:
            stats = self.request(dp, ofmsg.flow_stats_request(dp), timeout=10)
        except TimeoutError:
            LOG.error('switch %016x did not answer the flow dump', dp.id)
            dp.close()
            return
        conn = self.dps.get(dp.id)
        if conn is None or conn.dp is not dp:
            return
        conn.installed = {f.key: f for f in map(ofmsg.flow_from_stats,
                                                 stats)}
        self._activations_in(dp.id, conn.installed)
        conn.needs_full = True
        LOG.info('switch %016x holds %d flows', dp.id, len(conn.installed))
        self.mark_dirty()

    def _host_of_dpid(self, dpid):
        for h in self.tables.hosts.values():
            if h.dpid == dpid:
                return h.name
        return None

    def packet_in(self, dp, msg):
        """The copy of a moving guest's RARP its destination sends us once
        its learn action has switched delivery over: clean up around it."""
        data = bytes(msg.data or b'')
        if len(data) < 14 or int.from_bytes(data[12:14], 'big') != \
                fl.ETH_RARP:
            return
        port = msg.match.get('in_port')
        with self.state_lock:
            host = self._host_of_dpid(dp.id)
            vnic = self.tables.vnic_at(host, port) if host else None
            done = vnic is not None and self.tables.activate(vnic, host)
            m = self.migrations.activated(vnic, host) if done else None
        if done:
            LOG.info('vNIC %s activated on %s (RARP)', vnic, host)
            self.mark_dirty()
            # Off the OpenFlow event thread: other switches' events go on.
            hub.spawn(self._persist, m)

    def _activations_in(self, dpid, installed):
        """A destination that learned its flow while we were not listening
        (controller restarted mid-migration) has activated the move."""
        with self.state_lock:
            host = self._host_of_dpid(dpid)
            if host is None:
                return
            pending = fl.activation_flows(self.tables.table_map(host))
            for key, rarp in pending.items():
                port = dict(rarp.match)['in_port']
                have = installed.get(key)
                if have is not None and have.actions == (('output', port),):
                    vnic = self.tables.vnic_at(host, port)
                    if vnic and self.tables.activate(vnic, host):
                        m = self.migrations.activated(vnic, host)
                        LOG.info('vNIC %s found activated on %s', vnic, host)
                        hub.spawn(self._persist, m)

    def switch_error(self, dp, msg):
        self.stats['switch_errors'] += 1
        LOG.error('switch %016x error type=%s code=%s', dp.id, msg.type,
                  msg.code)
        conn = self.dps.get(dp.id)
        if conn is not None and conn.installed is not None:
            # Our picture of its table may be wrong now: dump again.
            conn.installed = None
            hub.spawn_after(0.5, self._initial_dump, dp)

    def request(self, dp, msg, timeout=5.0):
        """Send a multipart request, return the concatenated body."""
        dp.set_xid(msg)
        ev, body = hub.Event(), []
        self.pending_replies[msg.xid] = (body, ev)
        try:
            dp.send_msg(msg)
            if not ev.wait(timeout=timeout):
                raise TimeoutError('no reply from switch %016x' % dp.id)
            return body
        finally:
            self.pending_replies.pop(msg.xid, None)

    def barrier_reply(self, msg):
        conn = self.dps.get(msg.datapath.id)
        if conn is not None and conn.barrier_xid == msg.xid:
            conn.confirmed_at = time.time()

    def multipart_reply(self, msg):
        entry = self.pending_replies.get(msg.xid)
        if entry is None:
            return
        entry[0].extend(msg.body)
        if not msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE:
            entry[1].set()

    def sync(self):
        """Bring switches whose desired table changed (or that just
        connected) to it: one atomic bundle each, only the difference."""
        self.stats['syncs'] += 1
        if self._reload_intent:
            self._reload_intent = False
            with self.api_lock:
                self._load_intent()
        with self.state_lock:
            self._expire_moves()
            changed = []
            for vnic, move in self.tables.pop_inferred():
                dest = self.tables.hosts.get(move.destination)
                port = dest.vnic_map().get(vnic) if dest else None
                m = self.migrations.inferred(
                    vnic, port.vm_id if port else '', move.source,
                    move.destination)
                if m is not None:
                    LOG.info('vNIC %s moving %s -> %s (seen in OVSDB, not '
                             'announced)', vnic, move.source, move.destination)
                    changed.append(m)
            for vnic, move, outcome in self.tables.pop_finished():
                LOG.info('vNIC %s move %s -> %s %s', vnic, move.source,
                         move.destination, outcome)
                self.move_seen.pop(vnic, None)
                changed.append(self.migrations.move_finished(vnic, outcome))
            dirty = self.tables.pop_dirty()
            work = []
            for h in self.tables.hosts.values():
                conn = self.dps.get(h.dpid)
                if conn is None or conn.installed is None:
                    continue
                table = self.tables.table_map(h.name)
                if conn.needs_full:
                    # Just connected (or re-dumped): the whole table.
                    conn.needs_full = False
                    diff = fl.diff_flows(conn.installed.values(),
                                         table.values())
                elif h.name in dirty:
                    diff = fl.diff_keys(conn.installed, table, dirty[h.name])
                else:
                    continue
                if diff:
                    fl.apply_diff(conn.installed, diff)
                    work.append((h, conn, diff))
        for host, conn, diff in work:
            msgs = ofmsg.diff_messages(conn.dp, diff)
            for m in ofmsg.bundle(conn.dp, conn.bundle_id, msgs):
                conn.dp.send_msg(m)
            conn.bundle_id = (conn.bundle_id + 1) & 0xFFFFFFFF or 1
            barrier = conn.dp.ofproto_parser.OFPBarrierRequest(conn.dp)
            conn.dp.set_xid(barrier)
            conn.barrier_xid = barrier.xid
            conn.dp.send_msg(barrier)
            self.stats['bundles'] += 1
            self.stats['flow_mods'] += len(msgs)
            LOG.info('host %s: +%d ~%d -%d flows', host.name, len(diff.add),
                     len(diff.modify), len(diff.delete))
        # Records after the flows: switches never wait on a database write.
        for m in {id(m): m for m in changed if m is not None}.values():
            self._persist(m)

    def _expire_moves(self):
        """A move never activated within move_timeout (a migration stuck or
        aborted without its destination port going away) is cancelled:
        the wire goes back to exactly its pre-migration flows."""
        now = time.monotonic()
        for v in [v for v in self.move_seen if v not in self.tables.moves]:
            del self.move_seen[v]
        for v, m in list(self.tables.moves.items()):
            since = self.move_seen.setdefault(v, now)
            if not m.activated and now - since > self.move_timeout:
                LOG.warning('vNIC %s: move to %s not activated in %gs, '
                            'cancelled', v, m.destination, self.move_timeout)
                self.tables.cancel_move(v, TIMED_OUT)

    # ---- API operations --------------------------------------------------
    def connect(self, end_a, end_b):
        ids.check_vnic_id(end_a)
        ids.check_vnic_id(end_b)
        if end_a == end_b:
            raise ApiError(422, 'a wire needs two different vNICs, got %s '
                                'twice' % end_a)
        with self.api_lock:
            for v in (end_a, end_b):
                if v in self.vnic_wire:
                    raise ApiError(409, 'vNIC %s is already wired (connector '
                                        '%s)' % (v, ids.fmt_connector(
                                            self.vnic_wire[v])))
            try:
                wire = self.store.create_wire(end_a, end_b)
            except VnicTaken as e:      # another writer got there first
                raise ApiError(409, str(e))
            with self.state_lock:
                self._apply('upsert', wire.connector_id, wire)
        self.mark_dirty()
        return wire

    def disconnect(self, connector_id):
        with self.api_lock:
            if connector_id not in self.wires:
                raise ApiError(404, 'no wire with connector id %s'
                               % ids.fmt_connector(connector_id))
            self.store.delete_wire(connector_id)
            with self.state_lock:
                self._apply('delete', connector_id)
        self.mark_dirty()

    def _ends(self, wire):
        """Where a wire's ends are plugged, without building a World (this
        runs on every API call: O(1), not O(vNICs))."""
        with self.state_lock:
            loc = {v: l for v in wire.ends()
                   for l in [self.tables.location(v)] if l is not None}
            moves = {v: self.tables.moves[v] for v in wire.ends()
                     if v in self.tables.moves}
            return loc, fl.wire_state(wire, self.tables.hosts, loc), moves

    def wire_view(self, wire):
        loc, state, moves = self._ends(wire)
        la, lb = loc.get(wire.end_a), loc.get(wire.end_b)
        return {
            'id': wire.connector_id,
            'connector_id': ids.fmt_connector(wire.connector_id),
            'a': wire.end_a, 'b': wire.end_b,
            'state': state,
            'host_a': la.host if la else None,
            'host_b': lb.host if lb else None,
            'created_at': wire.created_at,
            # Ends being live-migrated: both hosts receive the wire until
            # the guest's RARP activates the destination.
            'moving': {v: {'source': m.source, 'destination': m.destination,
                           'activated': m.activated}
                       for v, m in moves.items()},
        }

    def get_wire(self, connector_id):
        wire = self.wires.get(connector_id)
        if wire is None:
            raise ApiError(404, 'no wire with connector id %s'
                           % ids.fmt_connector(connector_id))
        return wire

    # ---- live migrations (announced by the libvirt hook) ----------------
    def announce_migration(self, doc):
        with self.state_lock:
            hosts = self.tables.hosts
            connected = {h.name for h in hosts.values()
                         if h.dpid in self.dps and
                         self.dps[h.dpid].installed is not None}

            def location(v):
                loc = self.tables.location(v)
                return loc.host if loc else None
            try:
                m = self.migrations.announce(doc, set(hosts), connected,
                                             location)
            except MigrationRefused as e:
                LOG.warning('migration refused: %s', e.message)
                raise ApiError(e.status, e.message)
            for v, src in m.sources.items():
                if src != m.destination:
                    self.tables.start_move(v, src, m.destination)
        LOG.info('migration %s: %s (%s) %s -> %s', m.id, m.vm, m.vm_uuid,
                 sorted(set(m.sources.values())), m.destination)
        self.mark_dirty()
        self._persist(m)
        return m

    def _persist(self, m):
        """Save a migration record so a restarted controller knows which
        host is the source of each move (arrival order is lost)."""
        if m is None:
            return
        try:
            self.store.save_migration(m.view(), self.migrations.keep_ids())
        except Exception as e:
            LOG.error('could not persist migration %s: %s', m.id, e)

    def migration_released(self, vm_uuid, host):
        with self.state_lock:
            m = self.migrations.released(vm_uuid, host)
            if m is not None and m.state == ABORTED:
                for v in m.vnics:
                    mv = self.tables.moves.get(v)
                    if mv is not None and mv.destination == host:
                        self.tables.cancel_move(v)
        self.mark_dirty()
        if m is not None:
            LOG.info('migration %s of %s %s (%.2fs)', m.id, m.vm, m.state,
                     m.ended_at - m.started_at)
            self._persist(m)
        return m

    def wire_stats(self, connector_id):
        """Packets and bytes each way, from the wire's flow counters."""
        wire = self.get_wire(connector_id)
        loc, state, _moves = self._ends(wire)
        by_name = dict(self.tables.hosts)
        cookie = ids.wire_cookie(connector_id)
        out = {'id': connector_id,
               'connector_id': ids.fmt_connector(connector_id),
               'state': state}
        for src, dst, key in ((wire.end_a, wire.end_b, 'a_to_b'),
                              (wire.end_b, wire.end_a, 'b_to_a')):
            out[key] = {'sent_packets': 0, 'sent_bytes': 0,
                        'delivered_packets': 0, 'delivered_bytes': 0}
            for end, what in ((src, 'sent'), (dst, 'delivered')):
                lo = loc.get(end)
                host = by_name.get(lo.host) if lo else None
                conn = self.dps.get(host.dpid) if host else None
                if conn is None:
                    continue
                stats = self.request(
                    conn.dp, ofmsg.flow_stats_request(
                        conn.dp, cookie, 0xFFFFFFFFFFFFFFFF))
                for s in stats:
                    f = ofmsg.flow_from_stats(s)
                    m = dict(f.match)
                    hit = (m.get('in_port') == lo.ofport
                           and 'tunnel_id' not in m) if what == 'sent' else \
                        ('output', lo.ofport) in f.actions
                    if hit:
                        out[key][what + '_packets'] += s.packet_count
                        out[key][what + '_bytes'] += s.byte_count
        return out
