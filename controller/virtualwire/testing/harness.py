"""Drive a real `Controller` with events, against a `FakeFabric`, with no
threads: the way unit tests exercise the control layer end to end.

Events enter as they do in production (switch up, host OVSDB change, REST
call, packet-in, timer tick); the controller's OpenFlow messages go to
the fake switches, whose replies and packet-ins come back as events, until
nothing is left to do (`settle`).
"""
import json
import time
import threading
from typing import Callable, Dict, List

from virtualwire.core.placement import Word, next_word
from virtualwire.store.placements import check as check_placement
from virtualwire.control.controller import Controller
from virtualwire.control.loop import Loop
from virtualwire.future import Future
from virtualwire.core import credentials, ids, links, tenancy
from virtualwire.testing.memory_revocations import MemoryRevocations
from virtualwire.core.model import Encap, ExtenderLink, Host, VnicPort, Wire
from virtualwire.store.errors import LinkExists, VnicTaken
from virtualwire.testing.fakeswitch import FakeFabric
from virtualwire.testing.memory_switches import MemorySwitches
from virtualwire.testing.memory_topologies import MemoryTopologies

TUN = 65000


class MemoryIntent:
    """The intent store's interface, in memory: writes come back to the
    controller as change events, as the database's do."""

    def connected(self):
        return self.up

    def __init__(self):
        self.rows: Dict[int, Wire] = {}
        self.link_rows: Dict[tuple, ExtenderLink] = {}
        self.credentials = MemoryCredentials()
        self.revocations = MemoryRevocations()
        self.switches = MemorySwitches()
        self.ownership = MemoryOwnership(self.switches)
        self.placements = MemoryPlacements()
        self.topologies = MemoryTopologies(self)
        self.on_change: Callable = lambda events, n: None
        self.up = True              # connected(): a test may cut it
        self._next = 0x1000
        # Commits are serialized and their changes handed on in commit
        # order, as ovsdb-server and IntentStore do.
        self._lock = threading.Lock()

    def wires(self):
        return dict(self.rows)

    def create_wire(self, a, b, cid=None):
        with self._lock:
            for w in self.rows.values():       # Binding's unique index
                for v in (a, b):
                    if v in w.ends():
                        raise VnicTaken('vNIC %s is already wired '
                                        '(connector %s)' % (
                                            v, ids.fmt_connector(
                                                w.connector_id)))
            self._next += 1
            w = Wire(cid or self._next, a, b, 'now')
            self.rows[w.connector_id] = w
            self.on_change([('upsert', w.connector_id, w)], len(self.rows))
            return w

    def delete_wire(self, cid):
        self.apply_batch([], [cid])

    def apply_batch(self, pairs, cids):
        with self._lock:
            taken = {v: c for v, c in self.taken_by(
                [v for p in pairs for v in p]).items() if c not in cids}
            if taken:
                raise VnicTaken('; '.join(
                    'vNIC %s is already wired (connector %s)'
                    % (v, ids.fmt_connector(c)) for v, c in taken.items()))
            events: list = []
            made = []
            for cid in cids:
                if self.rows.pop(cid, None) is not None:
                    events.append(('delete', cid, None))
            for a, b in pairs:
                self._next += 1
                w = Wire(self._next, a, b, 'now')
                self.rows[w.connector_id] = w
                made.append(w)
                events.append(('upsert', w.connector_id, w))
            self.on_change(events, len(self.rows))
            return made

    def taken_by(self, vnics):
        want = set(vnics)
        return {v: w.connector_id for w in self.rows.values()
                for v in w.ends() if v in want}

    def links(self):
        with self._lock:
            return sorted(self.link_rows.values())

    def create_link(self, a, b):
        a, b = sorted((a, b))
        with self._lock:
            if (a, b) in self.link_rows:
                raise LinkExists('extenders %s and %s are already linked'
                                 % (a, b))
            pa, pb = links.link_ports(list(self.link_rows.values()), a, b)
            k = ExtenderLink(a, b, pa, pb, 'now')
            self.link_rows[(a, b)] = k
            return k

    def delete_link(self, a, b):
        with self._lock:
            return self.link_rows.pop(tuple(sorted((a, b))), None) is not None


class MemoryCredentials:
    """store.credentials.CredentialStore's interface, in memory."""

    def __init__(self, clock=time.time):
        # (role, name) -> (digest, created_at, expires_at or None)
        self.rows: Dict[tuple, tuple] = {}
        self.clock = clock

    def issue(self, role, name, expires_in=None, now=None):
        role, name = credentials.check(role, name)
        token = credentials.new_token()
        now = self.clock() if now is None else now
        expires = None if expires_in is None else now + expires_in
        self.rows[(role, name)] = (credentials.digest(token), 'now', expires)
        return token, 'now', expires

    def revoke(self, role, name):
        return self.rows.pop((role, name), None) is not None

    def holder(self, token, now=None):
        d = credentials.digest(token)
        now = self.clock() if now is None else now
        return next((k for k, (dig, _, exp) in self.rows.items()
                     if dig == d and not credentials.expired(exp, now)),
                    None)

    def list(self):
        return [{'role': r, 'name': n, 'created_at': at, 'expires_at': exp}
                for (r, n), (_d, at, exp) in sorted(self.rows.items())]


class MemoryOwnership:
    """store.ownership.OwnershipStore's interface, in memory."""

    def __init__(self, switches=None):
        self.rows: Dict[str, str] = {}
        self.switches = switches

    def assign(self, vnic_id, tenant):
        ids.check_vnic_id(vnic_id)
        self.rows[vnic_id] = tenancy.check_name(tenant)
        return 'now'

    def release(self, vnic_id):
        ids.check_vnic_id(vnic_id)
        return self.rows.pop(vnic_id, None) is not None

    def owners(self):
        return dict(self.rows)

    def end_owners(self):
        return dict(self.rows, **(self.switches.end_owners()
                                  if self.switches else {}))


class MemoryPlacements:
    """store.placements.PlacementStore's interface, in memory; each
    change is handed to on_change({vnic: Word or None}) as the watch
    (control.cloud_word.PlacementWatch) hands the database's."""

    def __init__(self):
        self.rows: Dict[str, Word] = {}
        self.on_change: Callable = lambda changes: None

    def available(self):
        return True

    def words(self):
        return dict(self.rows)

    def place(self, vnic, host, by, now):
        check_placement(vnic, host)
        word = self.rows[vnic] = next_word(self.rows.get(vnic), host)
        self.on_change({vnic: word})
        return word

    def forget(self, vnic):
        found = self.rows.pop(vnic, None) is not None
        if found:
            self.on_change({vnic: None})
        return found


class MemoryRuntime:
    def __init__(self):
        self.host_rows: Dict[str, Host] = {}
        self.migration_rows: Dict[str, dict] = {}
        self.counter_text = ''

    def hosts(self):
        return dict(self.host_rows)

    def migrations(self):
        return list(self.migration_rows.values())

    def save_host(self, h):
        self.host_rows[h.name] = h
        return _done()

    def save_migration(self, rec, keep=()):
        self.migration_rows[rec['id']] = dict(rec)
        return _done()

    def counters(self):
        return json.loads(self.counter_text) if self.counter_text else None

    def save_counters(self, snap):
        self.counter_text = json.dumps(snap)      # as the store would
        return _done()


def _done():
    f = Future()
    f.set(None)
    return f


class Harness:
    def __init__(self, intent=None, runtime=None, fabric=None,
                 move_timeout=900.0, require_identity=False, active=True,
                 hold=False, hold_frames=512, hold_bytes=1 << 20,
                 hold_rate=5000, strict=False, activate_at_stop=False):
        self.now = 1000.0
        self.loop = Loop('test')
        self.intent = intent or MemoryIntent()
        self.runtime = runtime or MemoryRuntime()
        self.fabric = fabric or FakeFabric()
        self.ctl = Controller(self.loop, self.intent, self.runtime,
                              move_timeout=move_timeout,
                              clock=lambda: self.now,
                              require_identity=require_identity,
                              active=active, hold=hold,
                              hold_frames=hold_frames,
                              hold_bytes=hold_bytes, hold_rate=hold_rate,
                              strict=strict,
                              activate_at_stop=activate_at_stop)
        self.require_identity = require_identity
        self.intent.placements.on_change = lambda ch: self.loop.post(
            self.ctl.on_words, ch)
        self.intent.on_change = lambda ev, n: self.loop.post(
            self.ctl.on_intent, ev, n)
        self.ports: Dict[str, List] = {}
        self.carrier = 'gre'        # what hosts offer unless told
        self.loop.post(self.ctl.start)
        self.settle()

    # -- the world -------------------------------------------------------------
    def ip(self, name):
        return '198.19.0.%d' % int(name[1:])

    def host(self, name, *vnics, connect=True, vm='', identity=None,
             dpid=None, carrier=None, hold_port=None):
        """Host `name` ('h1'...) with vNICs [(id, ofport)] (all of guest
        `vm`, if given): its OVSDB reports them and (the first time) its
        switch connects. `identity`: the names of the certificate its
        OVSDB and switch present (default: {name} when the controller
        requires certificates, else none). `hold_port`: its vw-hold's
        ofport (it keeps held frames itself)."""
        self.ports[name] = list(vnics)
        carrier = carrier or self.carrier
        if identity is None and self.require_identity:
            identity = frozenset({name})
        if dpid is None:        # under certificates, vw-host-setup's
            dpid = ids.derived_dpid(name) if self.require_identity \
                else int(name[1:])
        h = Host(name, dpid,
                 (Encap(carrier, self.ip(name), TUN),),
                 vnics=tuple(VnicPort(v, 'vnet%d' % p, p, vm_id=vm)
                             for v, p in vnics), hold_port=hold_port)
        self.loop.post(self.ctl.on_hosts, 'tcp:%s' % name, [h], identity)
        if connect and name not in self.fabric.switches:
            dp = self.fabric.add(name, h.dpid, {TUN: self.ip(name)},
                                 geneve={TUN} if carrier == 'geneve' else ())
            self.loop.post(self.ctl.on_switch_up, dp, identity)
        self.settle()
        return h

    def reconnect(self, name):
        """The switch connects (again): the controller dumps its table."""
        self.loop.post(self.ctl.on_switch_up, self.fabric.switches[name])
        self.settle()

    # -- what REST does --------------------------------------------------------
    def connect(self, a, b):
        ids.check_wire_ends(a, b)
        w = self.intent.create_wire(a, b)
        self.settle()
        return self.loop.call(self.ctl.views.wire_view, w.connector_id)

    def disconnect(self, cid):
        self.loop.call(self.ctl.views.wire, cid)
        self.intent.delete_wire(cid)
        self.settle()

    def call(self, fn, *args):
        out = self.loop.call(fn, *args)
        self.settle()
        return out

    def collect(self):
        """One collector cycle: every switch's counters read."""
        self.loop.post(self.ctl.collector.poll)
        self.settle()

    def tick(self, seconds):
        self.now += seconds
        self.loop.post(self.ctl.tick)
        self.settle()

    # -- the fabric ------------------------------------------------------------
    def settle(self, rounds=100):
        """Run events and hand the switches' answers back until quiet."""
        for _ in range(rounds):
            self.loop.run_pending()
            if not self._deliver():
                return
        raise AssertionError('controller and fabric never settled')

    def _deliver(self):
        """Hand the switches' messages to the controller, as os-ken would."""
        inbox = self.fabric.drain()
        for kind, _dp, msg in inbox:
            if kind == 'barrier':
                self.loop.post(self.ctl.on_barrier_reply, msg)
            elif kind == 'stats':
                self.loop.post(self.ctl.on_multipart_reply, msg, False)
            elif kind == 'packet_in':
                self.loop.post(self.ctl.on_packet_in, msg)
            elif kind == 'flow_removed':
                self.loop.post(self.ctl.on_flow_removed, msg)
            elif kind == 'error':
                self.loop.post(self.ctl.on_switch_error, msg)
            elif kind == 'echo':
                self.loop.post(self.ctl.admission.on_echo_reply, msg)
        return bool(inbox)

    def run_threads(self):
        """Run the loop on a thread of its own and deliver the switches'
        answers from another, as in production (for callers that block on
        the loop, e.g. REST). Returns stop()."""
        stopped = threading.Event()

        def deliver():
            while not stopped.is_set():
                if not self._deliver():
                    stopped.wait(0.001)
        threads = [threading.Thread(target=self.loop.run, daemon=True),
                   threading.Thread(target=deliver, daemon=True)]
        for t in threads:
            t.start()

        def stop():
            stopped.set()
            self.loop.stop()
            for t in threads:
                t.join(5)
        return stop

    def send(self, host, port, **kw):
        """Deliveries of a frame entering host's port; packet-ins it caused
        reach the controller before this returns."""
        out = self.fabric.deliveries(host, port, **kw)
        self.settle()
        return out

    def flow_mods(self):
        """Flow mods the switches have received so far, per host."""
        return {n: sum(1 for m in sw.sent if type(m).__name__ == 'OFPFlowMod')
                for n, sw in self.fabric.switches.items()}
