"""Per-wire counters that never go backwards, from flow counters that do.

A flow's packet counter restarts whenever the flow does: a migration
removes the source's flows, a wire change replaces them, an OVS restart
loses them all. So nothing here trusts a flow's absolute count for a
wire's history: each flow's counter is followed per switch and only its
increase since the last reading is credited, to what the flow's cookie
says it counts (`core.ids` ROLE_*), at the time it counted it. A flow
that went away credits its final count once (a flow-removed message), a
counter that went down started again (credited from zero).

Pure: readings in, totals out; `snapshot`/`restore` make the state
durable, so a restarted controller credits exactly what the switches
counted meanwhile (their flows kept counting).
"""
from typing import Dict, List, Tuple

from virtualwire.core import ids
from virtualwire.metrics.loss import LossLedger

DIRECTIONS = (('a_to_b', 'a', 'b'), ('b_to_a', 'b', 'a'))
ENTERS = {'a': ids.ROLE_ENTERS_A, 'b': ids.ROLE_ENTERS_B}
DELIVERS = {'a': ids.ROLE_DELIVERS_A, 'b': ids.ROLE_DELIVERS_B}
HELD = {'a': ids.ROLE_HELD_A, 'b': ids.ROLE_HELD_B}
# A delivering flow of direction k (0: a_to_b) whose counts a switch may
# have lost: that direction's loss is judged anew (`loss.LossLedger.cut`).
CUT_ROLES = ((ids.ROLE_DELIVERS_B, 0), (ids.ROLE_DELIVERS_A, 1))
HOST_ROLES = {'rejected': ids.ROLE_REJECTED, 'unwired': ids.ROLE_UNWIRED,
              'held': ids.ROLE_HELD_A | ids.ROLE_HELD_B}
_BITS = [1 << b for b in range(32, 48)]

Reading = Tuple[object, int, int, int]        # key, cookie, packets, bytes
_NONE = (0, 0)


def _zero():
    """A wire's or host's counts: {role bit: [packets, bytes]}, holding only
    the roles that counted something. Sparse on purpose: most wires of a
    large fleet are idle, and a full table of 16 roles was 2.2 KB per wire
    (220 MB of the collector at 100,000 wires)."""
    return {}


class FlowCounters:
    """Keys are opaque to this class (`southbound.counter_keys` makes them:
    bytes). `decoded(key)` turns one into the tuple form bases saved
    before those keys had: given, such a base is matched to the first
    readings after it is restored, and credits only what came since."""

    def __init__(self, decoded=None, ledger=None):
        self.decoded = decoded
        # What is lost beyond doubt (`loss`), and which hosts counted for
        # each wire (a host not read since holds its judgement back).
        self.loss = ledger if ledger is not None else LossLedger()
        self.pins: Dict[int, Tuple[str, ...]] = {}
        self.seen: Dict[str, Dict[object, Tuple[int, int, int]]] = {}
        # host -> {decoded key: reading} restored from an older base, until
        # that host's first reading.
        self.legacy: Dict[str, Dict[tuple, Tuple[int, int, int]]] = {}
        self.wires: Dict[int, Dict[int, List[int]]] = {}
        self.identity: Dict[int, str] = {}      # cid -> wire created_at
        self.hosts: Dict[str, Dict[int, List[int]]] = {}
        # cid -> its raw counts (`raw`) before the first credit since the
        # last `take_touched`: which wires moved, and from where (the
        # collector process keeps history for those only).
        self.touched: Dict[int, dict] = {}

    # -- what exists ---------------------------------------------------------
    def track(self, wires):
        """wires: {cid: identity (its creation time)}. A wire deleted is
        forgotten; one recreated under the same id starts from zero."""
        for cid in [c for c in self.wires if c not in wires]:
            self.forget(cid)
        for cid, ident in wires.items():
            self.track_one(cid, ident)

    def track_one(self, cid, ident):
        """One wire exists with this identity (its creation time)."""
        have = self.identity.get(cid)
        if have is None and cid in self.wires:
            self.identity[cid] = ident      # counted before it was known
        elif have != ident:
            self.identity[cid] = ident
            self.touched.setdefault(cid, self.raw(cid))
            self.wires[cid] = _zero()
            self.loss.forget(cid)
            self.pins.pop(cid, None)

    def forget(self, cid):
        """A wire deleted."""
        self.wires.pop(cid, None)
        self.identity.pop(cid, None)
        self.touched.pop(cid, None)
        self.loss.forget(cid)
        self.pins.pop(cid, None)

    # -- readings ------------------------------------------------------------
    def poll(self, host, readings, at=None, fresh=False):
        """Every flow of ours on `host` with its counters, read at once
        (the reply taken at `at`). Returns True if a flow went away or
        started again since the last reading (worth saving the state at
        once). Such a flow, or one whose cookie changed, may have lost
        counts OVS had not folded in yet: a cut (without `at`, its
        direction's judgement waits for good rather than guess). So is
        a flow new to us in a `fresh` reading, the first since the switch
        (re)connected: it may stand in for one removed unread while no
        flow-removed message could reach us (a connected switch sends
        one for each of our flows). Not seen: a flow removed and added
        again unread between two readings of a connected switch, with
        no flow-removed message, that counted past its old count."""
        before = self.seen.get(host, {})
        legacy = self.legacy.pop(host, None)
        now = {}
        changed = False
        cuts = []
        for key, cookie, packets, nbytes in readings:
            old = before.get(key)
            if old is None and legacy:
                old = legacy.get(self.decoded(key))
            if old is None or packets < old[1] or nbytes < old[2]:
                dp, db = packets, nbytes          # new, or started again
                if old is not None:
                    changed = True
                    cuts.append((old[0], -1))
                if fresh:
                    cuts.append((cookie, -1))
            else:
                dp, db = packets - old[1], nbytes - old[2]
                if old[0] != cookie:
                    # Counts OVS folds in late go to the new cookie: lost
                    # only for a role the new one does not have.
                    cuts.append((old[0], ~ids.roles_of_cookie(cookie)))
            if dp or db:
                self._credit(host, cookie, dp, db)
            now[key] = (cookie, packets, nbytes)
        self.seen[host] = now
        gone = set(before) - set(now)
        cuts.extend((before[k][0], -1) for k in gone)
        self._cut(cuts, at)
        return changed or bool(gone)

    def _cut(self, cookies, at):
        """[(cookie, roles that may have lost counts)]."""
        for cookie, mask in cookies:
            cid = ids.connector_of_cookie(cookie)
            roles = ids.roles_of_cookie(cookie) & mask
            if not cid or not roles or cid not in self.wires:
                continue
            for role, k in CUT_ROLES:
                if roles & role:
                    d = DIRECTIONS[k]
                    self.loss.cut(cid, k, at, self.raw(cid)[d[0]][1])

    def removed(self, host, key, cookie, packets, nbytes, at=None):
        """A flow's final counters (OpenFlow flow-removed, taken at `at`):
        OVS may not have folded its last frames in, so a delivering
        flow's removal is a cut (`poll`)."""
        old = self.seen.get(host, {}).pop(key, None)
        if old is None and self.legacy.get(host):
            old = self.legacy[host].pop(self.decoded(key), None)
        if old is not None and packets >= old[1] and nbytes >= old[2]:
            packets, nbytes = packets - old[1], nbytes - old[2]
        if packets or nbytes:
            self._credit(host, cookie, packets, nbytes)
        self._cut([(cookie, -1)], at)

    def _credit(self, host, cookie, dp, db):
        cid = ids.connector_of_cookie(cookie)
        roles = ids.roles_of_cookie(cookie)
        if cid is None or not roles:
            return
        if cid and cid not in self.touched:
            self.touched[cid] = self.raw(cid)
        # A wire's first frames can be read before `track` hears of it.
        into = [self.wires.setdefault(cid, _zero())] if cid else []
        if cid and host not in self.pins.get(cid, ()):
            self.pins[cid] = self.pins.get(cid, ()) + (host,)
        if cid == 0 or roles & HOST_ROLES['held']:
            into.append(self.hosts.setdefault(host, _zero()))
        for counts in into:
            for bit in _BITS:
                if roles & bit:
                    c = counts.get(bit)
                    if c is None:
                        counts[bit] = [dp, db]
                    else:
                        c[0] += dp
                        c[1] += db

    # -- figures -------------------------------------------------------------
    def raw(self, cid):
        """{direction: (entered packets, delivered packets, entered bytes,
        delivered bytes)}: what rates and windowed loss are made of."""
        c = self.wires.get(cid) or {}
        out = {}
        for d, src, dst in DIRECTIONS:
            e = c.get(ENTERS[src], _NONE)
            v = c.get(DELIVERS[dst], _NONE)
            out[d] = (e[0], v[0], e[1], v[1])
        return out

    def take_touched(self):
        """{cid: raw counts before} of the wires credited since the last
        call; starts a new round."""
        out, self.touched = self.touched, {}
        return out

    def wire(self, cid, zero_if_unknown=False):
        """{'a_to_b': {...}, 'b_to_a': {...}}; for a wire not tracked,
        None (or zeros: a wire made since the last reading).
        lost: frames the network took in at one end that can no longer
        reach the other (`loss`: never more than were lost); unsettled:
        entered and neither delivered nor lost beyond doubt (in flight,
        not folded into a counter yet, or counts a switch lost)."""
        c = self.wires.get(cid)
        if c is None:
            if not zero_if_unknown:
                return None
            c = _zero()
        lost = self.loss.lost(cid)
        out = {}
        for k, ((name, src, dst), judged) in enumerate(zip(DIRECTIONS,
                                                           lost)):
            e, d, h = (c.get(ENTERS[src], _NONE), c.get(DELIVERS[dst], _NONE),
                       c.get(HELD[dst], _NONE))
            out[name] = {'entered_packets': e[0], 'entered_bytes': e[1],
                         'delivered_packets': d[0], 'delivered_bytes': d[1],
                         'held_packets': h[0],
                         'lost_packets': judged,
                         'unsettled_packets': max(0, e[0] - d[0] - judged),
                         **self.loss.why(cid, k)}
        return out

    def host(self, name):
        c = self.hosts.get(name) or _zero()
        out = {}
        for what, mask in HOST_ROLES.items():
            out[what + '_packets'] = sum(v[0] for b, v in c.items() if b & mask)
            out[what + '_bytes'] = sum(v[1] for b, v in c.items() if b & mask)
        return out

    # -- durability ----------------------------------------------------------
    def snapshot(self):
        """A JSON-able copy of everything (`restore` takes it back).
        Flows that counted nothing and wires with no counts are left out:
        restored, they read as new, which credits the same (their whole
        count, from zero), so an idle fleet saves next to nothing."""
        def counts(c):
            return {str(b): list(v) for b, v in c.items() if v != [0, 0]}
        return {
            'seen': {h: [[_key_json(k), *v] for k, v in flows.items()
                         if v[1] or v[2]]
                     for h, flows in self.seen.items()},
            'wires': {str(cid): [self.identity.get(cid, ''), counts(c)]
                      for cid, c in self.wires.items() if counts(c)},
            'hosts': {h: counts(c) for h, c in self.hosts.items()},
            'loss': self.loss.snapshot(),
            'pins': {str(cid): list(p) for cid, p in self.pins.items()
                     if cid in self.wires}}

    def restore(self, snap, at=None):
        self.touched = {}

        def counts(d):
            return {int(b): list(v) for b, v in d.items() if v != [0, 0]}
        self.seen, self.legacy = {}, {}
        for h, rows in snap.get('seen', {}).items():
            self.seen[h] = {bytes.fromhex(r[0]): tuple(r[1:]) for r in rows
                            if isinstance(r[0], str)}
            old = {_key_from_json(r[0]): tuple(r[1:]) for r in rows
                   if not isinstance(r[0], str)}
            if old and self.decoded is not None:
                self.legacy[h] = old
            else:                           # keys that were tuples all along
                self.seen[h].update(old)
        self.wires, self.identity = {}, {}
        for cid, (ident, c) in snap.get('wires', {}).items():
            self.wires[int(cid)] = counts(c)
            if ident:
                self.identity[int(cid)] = ident
        self.hosts = {h: counts(c) for h, c in snap.get('hosts', {}).items()}
        self.loss.restore(snap.get('loss'))
        self.pins = {int(cid): tuple(p)
                     for cid, p in snap.get('pins', {}).items()}
        if 'loss' not in snap:
            # A base saved before loss was judged: the counts it carries
            # may hold a switch's lost counts; judge from the next reading.
            for cid in self.wires:
                for k in (0, 1):
                    self.loss.cut(cid, k, at, self.raw(cid)[
                        DIRECTIONS[k][0]][1])


def _key_json(key):
    if isinstance(key, bytes):
        return key.hex()
    table, priority, match = key
    return [table, priority, [list(m) for m in match]]


def _key_from_json(k):
    return (k[0], k[1], tuple(tuple(m) for m in k[2]))
