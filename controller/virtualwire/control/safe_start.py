"""A safe start: the controller never deletes a wire it has not seen go.

Reconciliation removes from each switch whatever the desired table does not
hold. Against a missing, empty or older intent database (a new
--state-dir, a restored backup, a database recreated by mistake) that
would remove working wires from every switch. So a flow of a wire this
controller never saw in the intent database (its cookie names a connector
id that is not there, and was not there since the controller started) is
*held*: left on the switch, not deleted, and reported (log, `GET
/v1/status` `safe_start`). Wires removed while the controller runs were
seen, so their flows go as always.

The operator then either restores the database (the wires come back and
the held flows are right again) or says the database is right
(`POST /v1/intent/release-orphans`, `vwctl intent release-orphans`): the
held flows are deleted at the next sync. What this costs: a wire deleted
by another writer while this controller was down keeps its flows until
someone releases them.

A held flow joins whatever sits on its port, so it is held only while its
vNIC ports hold the vNIC they held when this controller last saw the host
(the runtime database's host record; else its first report now): a tap
name reused by a new guest (OVS gives a name back its old port number)
would otherwise join the new guest to the orphan wire's peer. Such a flow
is deleted, and the log says so. What this cannot tell, with the runtime
records lost too: a port reused while the controller was down.
"""
import logging
from typing import Dict, Set

from virtualwire.control.shared import Shared
from virtualwire.core import ids
from virtualwire.pipeline.flow import FlowDiff

LOG = logging.getLogger(__name__)


class SafeStart:
    """A part of the controller: owns what it has seen and what it holds."""

    def __init__(self, shared: Shared):
        self.shared = shared
        self.known_wires: Set[int] = set()   # connector ids seen in intent
        self.orphans_released = False
        # host -> {connector id: flows held}
        self.held: Dict[str, Dict[int, int]] = {}
        # host -> {ofport: vNIC id} as last seen before this start (or as
        # first reported since): whom a held flow's ports were for.
        self.orphan_ports: Dict[str, Dict[int, str]] = {}

    def recheck_held(self, h):
        """A host holding orphans reported (its ports may be reused): its
        whole table is diffed at the next sync, where `_port_reused`
        judges each held flow again."""
        if self.held.get(h.name) and not self.orphans_released:
            s = self.shared.sessions.get(h.dpid)
            if s is not None:
                s.needs_full = True

    def ports_before(self, hosts):
        """The hosts as last recorded before this start."""
        for name, h in hosts.items():
            self.orphan_ports[name] = _port_map(h)

    def wires_seen(self, cids):
        self.known_wires.update(cids)

    def hold_orphans(self, host, diff: FlowDiff, full=True) -> FlowDiff:
        """`diff` without the deletion of flows of never-seen wires. A
        full diff (the switch's whole table) says what the host holds; an
        incremental one only adds to it."""
        if self.orphans_released:
            self.held.pop(host, None)
            return diff
        if not diff.delete and not (full and host in self.held):
            return diff         # the usual sync: nothing to hold or forget
        keep, held = [], {}     # type: list, Dict[int, int]
        now_ports = _port_map(self.shared.tables.hosts.get(host))
        then_ports = self.orphan_ports.setdefault(host, now_ports)
        for f in diff.delete:
            cid = ids.connector_of_cookie(f.cookie)
            if cid and cid not in self.known_wires and \
                    not self._port_reused(host, f, cid, now_ports,
                                          then_ports):
                held[cid] = held.get(cid, 0) + 1
            else:
                keep.append(f)
        before = self._held_on(host)
        if full:
            self.held[host] = held
        else:
            for cid, n in held.items():
                self.held.setdefault(host, {})[cid] = n
        now = self._held_on(host)
        if now and now != before:
            LOG.error(
                'host %s holds flows of %d wire(s) the intent database does '
                'not have (%s): NOT deleting them. The database may be empty '
                'or older than the switches (a new state directory, a '
                'restored backup). Restore it, or if it is right: vwctl '
                'intent release-orphans', host, len(now),
                ', '.join(ids.fmt_connector(c) for c in sorted(now)[:8]))
        return FlowDiff(diff.add, diff.modify, keep) if held else diff

    @staticmethod
    def _port_reused(host, f, cid, now_ports, then_ports):
        for port in _ports_of(f):
            vnic = now_ports.get(port)
            if vnic is not None and vnic != then_ports.get(port):
                LOG.warning('host %s: a flow of wire %s (not in the intent '
                            'database) uses port %d, which now holds vNIC %s '
                            '(%s before): deleted, not held', host,
                            ids.fmt_connector(cid), port, vnic,
                            then_ports.get(port) or 'nothing')
                return True
        return False

    def _held_on(self, host):
        """Held flows of wires still unknown on `host` (a restored wire's
        are right again)."""
        return {c: n for c, n in self.held.get(host, {}).items()
                if c not in self.known_wires}

    def _held_now(self):
        out = {}
        for host in self.held:
            left = self._held_on(host)
            if left:
                out[host] = left
        return out

    def view(self):
        held = self._held_now()
        wires = sorted({c for h in held.values() for c in h})
        return {'held_wires': [ids.fmt_connector(c) for c in wires],
                'hosts': {h: sum(v.values()) for h, v in
                          sorted(held.items())},
                'released': self.orphans_released}

    def release(self):
        """The operator says the intent database is right: delete what it
        does not hold, on every switch, at the next sync."""
        self.shared.loop.assert_owner()
        view = self.view()
        self.orphans_released = True
        for s in self.shared.sessions.values():
            s.needs_full = True
        LOG.warning('orphan flows released by the operator: deleting the '
                    'flows of %d wire(s) the intent database does not have',
                    len(view['held_wires']))
        return view


def _port_map(h) -> Dict[int, str]:
    return {v.ofport: v.vnic_id for v in h.vnics if v.ofport > 0} \
        if h is not None else {}


def _ports_of(f):
    """The ports a flow takes frames from or gives them to."""
    out = [v for k, v in f.match if k == 'in_port']
    out += [a[1] for a in f.actions if a[0] == 'output']
    return [p for p in out if isinstance(p, int)]
