"""A provider switch moving to another host, make-before-break (issue 41).

Sent at once, a move's bundles race each other: a host whose VM sends to
the switch could point at the new host before that host has the switch
(frames dropped there), the new switch could send to a host not yet
accepting it, and frames in flight to the old host arrive after its
flows are gone. Measured on the lab under two 1 kHz streams: 64 and 101
datagrams lost over two moves. So the hosts a move changes get it in
stages, each once every one of them has confirmed the last (barrier):

  read    the old host's learned MACs are read (nothing sent yet)
  make    only flows with new matches: the switch on its new host, with
          the MACs carried over, and every host accepting the new one's
          frames; nothing sends to them yet
  switch  flows whose actions change: senders now send to the new host
          (a frame enters exactly one of the two switches: no duplicate)
  drain   the old switch still forwards what was in flight to it, for
          DRAIN seconds
  done    the old flows are deleted, and the MACs learned there

Holding a change back means leaving its key dirty for later: the desired
tables are already the final ones, the switches get them in order. Other
changes on those hosts wait with the move (for at most its stages'
timeouts). A stage whose hosts never answer goes on after STAGE_TIMEOUT;
a host that reconnects gets its whole table at once. Carried MACs are
not counted by OVS's learn limit on the new host until learned again.
"""
import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set, Tuple

from virtualwire.control.shared import Shared
from virtualwire.core import ids
from virtualwire.core.switches import ProviderSwitch
from virtualwire.pipeline.flow import FlowDiff
from virtualwire.pipeline.tables import SWITCH_MAC
from virtualwire.southbound import openflow

LOG = logging.getLogger(__name__)
READ, MAKE, SWITCH, DRAIN = 'read', 'make', 'switch', 'drain'
STAGE_TIMEOUT = 2.0       # s: a stage whose hosts never confirm goes on
DRAIN_TIME = 0.5          # s the old switch forwards what was in flight


@dataclass
class Move:
    sw: ProviderSwitch            # as it is now (on its new host)
    old: str                      # the host it leaves
    hosts: Set[str]               # hosts whose tables the move changes
    stage: str = READ
    since: float = 0.0            # when the stage began
    held: Dict[str, set] = field(default_factory=dict)   # host -> keys
    waiting: Optional[Dict[str, int]] = None   # host -> barrier xid
    carry: List = field(default_factory=list)  # learned, to the new host


class SwitchMoves:
    def __init__(self, shared: Shared):
        self.shared = shared
        self.moves: Dict[str, Move] = {}
        self.stats = shared.stats
        self.stats.update(switch_moves=0, switch_moves_timed_out=0)

    def start(self, old: ProviderSwitch, sw: ProviderSwitch, hosts):
        """`sw` (now on its new host) left `old.host`; `hosts` are those
        whose desired tables the move changed (not yet sent)."""
        self.finish(sw.name)          # a move not over: its rest at once
        s_old = self.shared.session_of(old.host)
        if s_old is None or s_old.installed is None or \
                self.shared.session_of(sw.host) is None:
            return                    # nothing to race: sent as it comes
        assert old.host is not None and sw.host is not None
        m = Move(sw, old.host, set(hosts) | {old.host, sw.host},
                 since=self.shared.clock())
        self.moves[sw.name] = m
        self.stats['switch_moves'] += 1
        LOG.info('switch %s: moving %s -> %s over %d hosts', sw.name,
                 old.host, sw.host, len(m.hosts))
        s_old.request(openflow.flow_stats_request(
            ids.switch_cookie(sw.number), ids.ONE_SWITCH_MASK),
            lambda body: self._read(m, body))

    def _read(self, m: Move, body):
        if self.moves.get(m.sw.name) is not m or m.stage != READ:
            return
        m.carry = [st for st in body if st.table_id == SWITCH_MAC.id and
                   ids.roles_of_cookie(st.cookie) & ids.SW_LEARNED]
        self._next(m, MAKE)

    def active_on(self, host) -> bool:
        return any(host in m.hosts for m in self.moves.values())

    # -- the sync's hooks ----------------------------------------------------
    def adjust(self, host, diff: FlowDiff,
               full) -> Tuple[FlowDiff, list]:
        """`diff` with what this stage holds back; and the messages to
        send after it (the MACs carried to a new host)."""
        after: list = []
        for m in self.moves.values():
            if host not in m.hosts:
                continue
            if full:
                m.held.pop(host, None)     # its whole table goes now
                continue
            diff = self._stage(m, host, diff)
            if host == m.sw.host and m.stage == MAKE and m.carry:
                after += self._carried(host, m)
        return diff, after

    def _stage(self, m, host, diff):
        """What stage `m.stage` lets go of `diff` on `host`: in `make`
        only flows of new keys (an add over an installed key, as a new
        cookie is sent, changes a flow: it waits with the modifies)."""
        if m.stage == READ:
            go = FlowDiff([], [], [])
        elif m.stage == MAKE:
            s = self.shared.session_of(host)
            have = s.installed if s is not None and s.installed else {}
            go = FlowDiff([f for f in diff.add if f.key not in have], [], [])
        else:
            go = FlowDiff(diff.add, diff.modify, [])
        kept = set(go.add) | set(go.modify)
        held = [f for f in diff.add + diff.modify + diff.delete
                if f not in kept]
        if held:
            m.held.setdefault(host, set()).update(f.key for f in held)
        return go

    def _carried(self, host, m):
        out = [openflow.learned_copy(st, m.sw.idle_timeout)
               for st in m.carry]
        LOG.info('switch %s: %d learned MACs carried to %s', m.sw.name,
                 len(out), host)
        m.carry = []
        return out

    def sent(self, sent):
        """{host: barrier xid} of the bundles a sync sent: a stage's sync
        waits for those of its hosts."""
        for m in list(self.moves.values()):
            if m.stage in (MAKE, SWITCH) and m.waiting is None:
                m.waiting = {h: x for h, x in sent.items() if h in m.hosts}
                self._confirmed(m)

    def confirmed(self, host, xid):
        for m in list(self.moves.values()):
            if m.waiting and m.waiting.get(host) == xid:
                del m.waiting[host]
                self._confirmed(m)

    def _confirmed(self, m):
        if m.waiting == {}:
            self._next(m, SWITCH if m.stage == MAKE else DRAIN)
            # An event, so that the loop's sync sends what is now free.
            self.shared.loop.post(lambda: None)

    def expire(self):
        """The timer: a drained move ends; a stage stuck on a silent host
        goes on."""
        now = self.shared.clock()
        for m in list(self.moves.values()):
            if m.stage == DRAIN and now - m.since >= DRAIN_TIME:
                self.finish(m.sw.name)
            elif m.stage != DRAIN and now - m.since >= STAGE_TIMEOUT:
                LOG.warning('switch %s: move stage %s unconfirmed after %gs '
                            '(waiting for %s): going on', m.sw.name,
                            m.stage, STAGE_TIMEOUT,
                            ', '.join(sorted(m.waiting or {})) or 'a read')
                self.stats['switch_moves_timed_out'] += 1
                self._next(m, {READ: MAKE, MAKE: SWITCH,
                               SWITCH: DRAIN}[m.stage])

    def finish(self, name):
        """End a move now: everything it held goes with the next sync."""
        m = self.moves.pop(name, None)
        if m is not None:
            self._release(m)
            LOG.info('switch %s: move to %s done', name, m.sw.host)

    def _next(self, m, stage):
        self._release(m)
        LOG.info('switch %s: move stage %s after %.1f ms', m.sw.name, stage,
                 (self.shared.clock() - m.since) * 1e3)
        m.stage, m.waiting, m.since = stage, None, self.shared.clock()

    def _release(self, m):
        for host, keys in m.held.items():
            self.shared.tables.redirty(host, keys)
        m.held = {}
