"""What every part of the controller reads, in one place.

The parts (`control.programming`, `control.migrating`, `control.holding`,
`control.admission`, `control.roles`, `control.extenders`,
`control.safe_start`, `control.provider_switches`) each own their own
state and never call one another; the `Controller` composes them and
carries what one part's event means to another. What they all need to
read lives here, each with one writer:

- `tables` (intent + hosts + placement -> flows) changes only through its
  own methods; a takeover's rebuild replaces it (so parts read
  `shared.tables`, never keep their own reference);
- `sessions` (dpid -> connected switch) is written only by the
  controller's switch events (up, down, hang-ups the parts ask for);
- `migrations`, the book of moves, changes only through its own methods;
  a part that changed a record says so with `record`, and the sync
  persists the records it gathered (switches never wait on a database);
- `stats` are counters: each part adds to its own names.
"""
from typing import Any, Callable, Dict

from virtualwire.control.loop import Loop
from virtualwire.control.migrations import Migration, MigrationBook
from virtualwire.pipeline.incremental import IncrementalTables
from virtualwire.southbound.session import SwitchSession


class Shared:
    def __init__(self, loop: Loop, clock: Callable[[], float],
                 tables: IncrementalTables, runtime: Any,
                 stats: Dict[str, int]):
        self.loop = loop
        self.clock = clock
        self.tables = tables
        self.runtime = runtime              # store.runtime.RuntimeStore
        self.stats = stats
        self.sessions: Dict[int, SwitchSession] = {}
        self.migrations = MigrationBook()
        self.changed: Dict[str, Migration] = {}   # id -> record to persist

    def record(self, m):
        """A migration record changed (None: nothing did)."""
        if m is not None:
            self.changed[m.id] = m

    def pop_changed(self) -> Dict[str, Migration]:
        out, self.changed = self.changed, {}
        return out

    def host_of_dpid(self, dpid):
        for h in self.tables.hosts.values():
            if h.dpid == dpid:
                return h.name
        return None

    def session_of(self, host):
        """The connected switch session of a host by name, or None."""
        h = self.tables.hosts.get(host)
        return self.sessions.get(h.dpid) if h is not None else None

    def session(self, dp):
        """The admitted session of this very connection, or None (a
        refused one, one waiting on a takeover probe, or one replaced)."""
        s = self.sessions.get(dp.id)
        return s if s is not None and s.dp is dp else None

    def connected_hosts(self):
        return {h.name for h in self.tables.hosts.values()
                if h.dpid in self.sessions and self.sessions[h.dpid].synced}
