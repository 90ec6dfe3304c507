"""Starting, and starting again as the new leader: the controller's parts
filled from the databases and from what this instance watched, in the
order that keeps every working wire's flows.

A start reads the last observed hosts and migrations; live views (`live`,
or as each host's OVSDB is read) replace them, so missing knowledge never
removes a working wire's flows. Moves under way come first, so claims
are read as source/destination, not arrival order.

A standby becoming active (`take_over`) asks every switch for MASTER with
the new term, dumps each table again and rebuilds its state as a
restarted controller does (migrations in flight, move timers from their
records), so the first sync sends a healthy switch nothing.
"""
import logging
import time

from virtualwire.control.migrations import MigrationBook
from virtualwire.control.roles import canonical_records
from virtualwire.core.placement import Placement
from virtualwire.pipeline.incremental import IncrementalTables

LOG = logging.getLogger(__name__)


def start(ctl, live=None):
    saved_hosts, records = ctl.runtime.hosts(), ctl.runtime.migrations()
    # What this start read: a takeover before anything else was seen
    # need not do it again (see rebuild).
    ctl.started_from = (saved_hosts, canonical_records(records))
    ctl.remembered = dict(saved_hosts)
    ctl.safe_start.ports_before(saved_hosts)   # whom held flows were for
    ctl.remembered.update(live or {})
    tables = ctl.shared.tables
    ctl.shared.migrations.restore(records)
    for m in ctl.shared.migrations.active.values():
        for v, src in m.sources.items():
            if src and src != m.destination:
                if m.hold is not None:
                    tables.hold_by_vnic[v] = m.hold
                tables.placement.start_move(v, src, m.destination)
    placements = getattr(ctl.intent, 'placements', None)
    if placements is not None:        # before claims are read
        ctl.on_words(placements.words())
    for h in ctl.remembered.values():
        ctl.placement_events(tables.set_host(h))
    switches = getattr(ctl.intent, 'switches', None)
    if switches is not None:          # before the wires plugged into them
        ctl.provider_switches.apply(switches.switches())
    load_wires(ctl)
    ctl.collector.start()


def load_wires(ctl):
    """Every wire in the intent database, as the desired state."""
    wires = ctl.intent.wires()
    ctl.safe_start.wires_seen(wires)
    ctl.shared.tables.set_wires(wires)


def take_over(ctl):
    """This instance leads now (control.roles said so)."""
    t0 = time.monotonic()
    rebuilt = rebuild(ctl)
    for s in list(ctl.sessions.values()):
        ctl.roles.send_role(s)
        # Its table as it is now: the last leader may have changed it
        # since our dump; the first sync then sends only what differs.
        s.installed = None
        s.dump(lambda body, s=s: ctl._dumped(s, body))
    LOG.info('active now, term %d: state %s in %.0f ms, %d switches '
             'dumped again', ctl.roles.term, 'rebuilt' if rebuilt else
             'as read at start', (time.monotonic() - t0) * 1e3,
             len(ctl.sessions))


def rebuild(ctl):
    """State from the database and what we watched, as a restart makes
    it: the standby's own guesses (moves it saw in host views, records it
    never saved) are dropped. Not done when nothing was seen since start()
    and the database holds what start() read (a lone instance taking the
    lock as it starts): the state is a restart's already, and building
    every wire's flows twice would double the start-up. Returns whether
    it rebuilt."""
    if not ctl.host_owner and ctl.started_from == (
            ctl.runtime.hosts(), canonical_records(ctl.runtime.migrations())):
        return False
    live = dict(ctl.remembered)       # live host views (on_hosts)
    old = ctl.shared.tables
    # The same settings as before: holding, and strict placement (a
    # standby that took over must not start trusting hosts).
    tables = IncrementalTables(Placement(old.placement.strict))
    tables.hold = old.hold
    ctl.shared.tables = tables
    ctl.shared.migrations = MigrationBook()
    ctl.shared.changed.clear()
    ctl.moves.reset()
    start(ctl, live)
    ctl.moves.restore_timers()
    return True
