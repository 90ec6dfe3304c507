"""Live migrations announced by the libvirt hook: validation and records.

The destination's `migrate begin` hook announces a guest arriving with its
vNICs; the controller accepts only what it can follow (every vNIC known,
the destination host connected), otherwise the hook fails the migration
and the guest stays on its source. `release end` from a host says the guest
left it: on the source that completes the move, on the destination it is an
abort. Pure logic: the engine passes in what it observes.
"""
import time
import uuid as uuidlib
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Dict, Optional, Tuple

from virtualwire import ids

HISTORY = 200          # finished migrations kept for `GET /v1/migrations`

PREPARED = 'prepared'      # announced; the guest is being copied
COMPLETED = 'completed'    # the guest left its source
ABORTED = 'aborted'        # the guest left (or never reached) the destination
# Not activated within the controller's --move-timeout: its wires went back
# to the source alone (a migration that finishes later is then followed from
# OVSDB when the source port goes, as if no hook had announced it).
TIMED_OUT = 'timed-out'


class MigrationRefused(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Migration:
    id: str
    vm: str
    vm_uuid: str
    vnics: Tuple[str, ...]
    sources: Dict[str, Optional[str]]     # vNIC -> host it was on
    destination: str
    state: str = PREPARED
    started_at: float = field(default_factory=time.time)
    ended_at: Optional[float] = None
    # vNIC -> when its RARP switched delivery to the destination
    activated: Dict[str, float] = field(default_factory=dict)
    # vNIC -> how its move ended in the data plane ('completed'|'aborted'|
    # 'timed-out')
    moves: Dict[str, str] = field(default_factory=dict)
    # 'hook' (announced) or 'ovsdb' (a vNIC seen on a second host without
    # an announcement: the hook could not reach the controller)
    found_by: str = 'hook'

    def view(self):
        d = asdict(self)
        d['vnics'] = list(self.vnics)
        return d


def parse_announce(doc):
    """Validate a `POST /v1/migrations` body; returns (vm, vm_uuid, vnics,
    destination) or raises MigrationRefused(400/422)."""
    unknown = sorted(set(doc) - {'vm', 'vm_uuid', 'vnics', 'destination'})
    if unknown:
        raise MigrationRefused(400, 'unknown field(s): %s' % ', '.join(unknown))
    for k in ('vm', 'vm_uuid', 'vnics', 'destination'):
        if k not in doc:
            raise MigrationRefused(400, 'missing field: %s' % k)
    vm, vm_uuid, vnics, dest = (doc['vm'], doc['vm_uuid'], doc['vnics'],
                                doc['destination'])
    if not isinstance(vm, str) or not vm or len(vm) > 256:
        raise MigrationRefused(422, 'vm must be a domain name')
    try:
        vm_uuid = str(uuidlib.UUID(str(vm_uuid)))
    except ValueError:
        raise MigrationRefused(422, 'vm_uuid must be a UUID, got %r'
                               % (vm_uuid,))
    if not isinstance(vnics, list) or len(vnics) > 64:
        raise MigrationRefused(422, 'vnics must be a list of up to 64 vNIC '
                                    'ids')
    for v in vnics:
        ids.check_vnic_id(v)
    if len(set(vnics)) != len(vnics):
        raise MigrationRefused(422, 'vnics lists a vNIC twice')
    if not isinstance(dest, str) or not dest:
        raise MigrationRefused(422, 'destination must be a host name')
    return vm, vm_uuid, tuple(vnics), dest


class MigrationBook:
    def __init__(self):
        self.active: Dict[str, Migration] = {}           # vm_uuid -> record
        self.history: "OrderedDict[str, Migration]" = OrderedDict()

    def announce(self, doc, hosts, connected, location):
        """hosts: known host names; connected: names with a live switch;
        location(vnic) -> host name or None. Returns the Migration."""
        vm, vm_uuid, vnics, dest = parse_announce(doc)
        if dest not in hosts:
            raise MigrationRefused(404, 'destination host %s is unknown to '
                                        'the controller' % dest)
        if dest not in connected:
            raise MigrationRefused(409, 'destination host %s is not '
                                        'connected to the controller' % dest)
        missing = [v for v in vnics if location(v) is None]
        if missing:
            raise MigrationRefused(404, 'vNIC(s) %s not plugged on any host: '
                                        'the controller cannot follow them'
                                   % ', '.join(missing))
        for key, other in list(self.active.items()):
            if other.found_by == 'ovsdb' and set(other.vnics) & set(vnics):
                del self.active[key]    # the announcement supersedes it
        old = self.active.get(vm_uuid)
        if old is not None:
            # A retry after a failed attempt the hook never reported.
            self._end(old, ABORTED)
        m = Migration(id=str(uuidlib.uuid4()), vm=vm, vm_uuid=vm_uuid,
                      vnics=vnics, sources={v: location(v) for v in vnics},
                      destination=dest)
        self.active[vm_uuid] = m
        return m

    def inferred(self, vnic, vm_uuid, source, destination):
        """A vNIC plugged on a second host with no announcement (the hook
        could not reach us): recorded so that a restart still knows which
        host is its source. Returns the record if it changed, else None."""
        for m in self.active.values():
            if vnic in m.vnics:
                if m.destination == destination:
                    return None                     # announced already
                self._end(m, ABORTED)               # superseded
                break
        key = vm_uuid or 'vnic:' + vnic
        m = self.active.get(key)
        if m is not None and m.destination == destination and \
                m.found_by == 'ovsdb':
            m.vnics = m.vnics + (vnic,)
            m.sources[vnic] = source
            return m
        if m is not None:
            self._end(m, ABORTED)
        m = Migration(id=str(uuidlib.uuid4()), vm='', vm_uuid=key,
                      vnics=(vnic,), sources={vnic: source},
                      destination=destination, found_by='ovsdb')
        self.active[key] = m
        return m

    def released(self, vm_uuid, host):
        """The guest left `host`. Returns the ended Migration, or None."""
        m = self.active.get(vm_uuid)
        if m is None:
            return None
        if host == m.destination:
            return self._end(m, ABORTED)
        if host in m.sources.values():
            return self._end(m, COMPLETED)
        return None

    def activated(self, vnic, host, when=None):
        """vNIC's guest announced itself on `host` (data-plane activation)."""
        for m in self.active.values():
            if vnic in m.vnics and m.destination == host:
                m.activated.setdefault(vnic, when or time.time())
                return m
        return None

    def move_finished(self, vnic, outcome):
        """A vNIC's move ended (its source or destination port went away).
        When every vNIC's has, the migration is over even if the hook never
        said so (it could not reach us). Returns the record if it changed."""
        for m in list(self.active.values()):
            if vnic in m.vnics:
                m.moves[vnic] = outcome
                if len(m.moves) == len(m.vnics):
                    ends = set(m.moves.values())
                    self._end(m, COMPLETED if ends == {COMPLETED} else
                              TIMED_OUT if TIMED_OUT in ends else ABORTED)
                return m
        return None

    def _end(self, m, state):
        m.state, m.ended_at = state, time.time()
        self.active.pop(m.vm_uuid, None)
        self.history[m.id] = m
        while len(self.history) > HISTORY:
            self.history.popitem(last=False)
        return m

    def restore(self, records):
        """Load records saved by `save_migration` (controller restart)."""
        for d in sorted(records, key=lambda d: d.get('started_at') or 0):
            try:
                m = Migration(**dict(d, vnics=tuple(d['vnics'])))
            except (TypeError, KeyError):
                continue
            if m.state == PREPARED:
                self.active[m.vm_uuid] = m
            else:
                self.history[m.id] = m
        while len(self.history) > HISTORY:
            self.history.popitem(last=False)

    def keep_ids(self):
        return [m.id for m in self.all()]

    def all(self):
        return list(self.active.values()) + list(reversed(
            self.history.values()))
