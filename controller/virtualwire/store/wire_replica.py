"""The intent database's Wire table, kept as model Wires by our own monitor.

Why not the `ovs` IDL: it keeps a Row with a Datum per column and an
Atom per value; measured with 100,000 wires, the IDL's replica of the
Wire table held 300 MiB (3 KB a wire), and the collector kept one too.
Kept as `Wire`s (which the controller's world holds anyway) the table is
a dict of small objects. The other, small tables stay with the IDL.

Leader only, as the IDL is: the replica follows the member the IDL is
connected to (the IDL checks it is the cluster's leader and moves if
not), so it never reads a member cut off from the cluster while the IDL
reads another.

Changes come out as events in commit order: ('upsert', cid, Wire) and
('delete', cid, None). After a reconnection the table is read again and
only its difference from what was known comes out (a wire deleted while
the connection was down is reported deleted).
"""
import logging

import ovs.poller

from os_ken.lib import hub

from virtualwire.core.model import Wire
from virtualwire.ovsdb import fast_json
from virtualwire.ovsdb.monitor_session import MonitorSession
from virtualwire.ovsdb.pump import Pump

LOG = logging.getLogger(__name__)
fast_json.install()

DB = 'VirtualWire'
COLUMNS = ['connector_id', 'end_a', 'end_b', 'created_at']


def _wire(row):
    return Wire(row['connector_id'], row['end_a'], row['end_b'],
                row['created_at'])


class WireTable:
    """Pure: the rows by connector id, the events their changes make."""

    def __init__(self):
        self.rows = {}               # connector id -> Wire
        self.events = []

    def replace(self, result):
        """The monitor's reply on a (new) connection: everything."""
        old, self.rows = self.rows, {}
        for change in (result or {}).get('Wire', {}).values():
            w = _wire(change['new'])
            self.rows[w.connector_id] = w
        for cid in old.keys() - self.rows.keys():
            self.events.append(('delete', cid, None))
        for cid, w in self.rows.items():
            if old.get(cid) != w:
                self.events.append(('upsert', cid, w))

    def update(self, updates):
        """A notification: "old" of a deleted row holds every monitored
        column, of a modified one the columns that changed."""
        for change in (updates or {}).get('Wire', {}).values():
            new, old = change.get('new'), change.get('old') or {}
            gone = old.get('connector_id')
            if gone is not None and (new is None or
                                     new['connector_id'] != gone):
                if self.rows.pop(gone, None) is not None:
                    self.events.append(('delete', gone, None))
            if new is not None:
                w = _wire(new)
                self.rows[w.connector_id] = w
                self.events.append(('upsert', w.connector_id, w))

    def take_events(self):
        events, self.events = self.events, []
        return events


class WireReplica(Pump):
    """The Wire table over a session of our own to the member `follow`
    (an IdlClient) is connected to; on_change(self) after each batch of
    changes. `lock` guards `table`; `ran` is set each time the pump has
    read what the server sent."""

    def __init__(self, follow, on_change=None):
        self.follow = follow
        self.on_change = on_change
        self.table = WireTable()
        self.lock = hub.Semaphore()
        self.ran = hub.Event()
        self.monitor = MonitorSession(DB, 'vw-wires',
                                      {'Wire': {'columns': COLUMNS}},
                                      'intent database')
        self._stopped = False
        self._thread = None
        self.ready = False           # the first whole table has arrived

    def wait_ready(self, timeout):
        waited = 0.0
        while not self.ready and waited < timeout:
            hub.sleep(0.02)
            waited += 0.02
        return self.ready

    def _close(self):
        self.monitor.close()

    def _target(self):
        """The member the IDL is connected to now, or None."""
        session = getattr(self.follow.idl, '_session', None)
        if session is None or not session.is_connected():
            return None
        return session.get_name()

    def _replace(self, result):
        self.table.replace(result)
        self.ready = True

    def _pump(self):
        while True:
            with self.lock:
                if self._stopped:
                    return
                target = self._target()
                if target is not None and target != self.monitor.remote:
                    self.monitor.open(target, backoff_ms=1000)
                changed = self.monitor.run(self._replace, self.table.update)
                poller = ovs.poller.Poller()
                self.monitor.wait(poller)
                self.ran.set()
            if changed and self.on_change is not None:
                try:
                    self.on_change(self)
                except Exception:
                    LOG.exception('Wire change handler failed')
            # The IDL may move to another member: look again soon.
            poller.timer_wait(200)
            poller.block()
