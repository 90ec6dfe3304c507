"""Live migrations announced by the libvirt hook: validation and records.

The destination's `migrate begin` hook announces a guest arriving with its
vNICs; the controller accepts only what it can follow (every vNIC known,
the destination host connected), otherwise the hook fails the migration
and the guest stays on its source. `release end` from a host says the guest
left it: on the source that completes the move, on the destination it is an
abort. Pure logic: the controller passes in what it observes.
"""
import time
import uuid as uuidlib
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Tuple

from virtualwire.core import errors, ids
from virtualwire.core.placement import ABORTED, COMPLETED, TIMED_OUT

HISTORY = 200          # finished migrations kept for `GET /v1/migrations`
# Announced migrations in progress to one destination at most: a host's
# hook (or a compromised host) cannot pile up records without bound.
MAX_PER_DESTINATION = 32

# A vNIC's move, step by step (besides the migration's `started_at`, when
# it was announced, and `activated`): its tap appeared on the destination
# (OVSDB), every other switch whose flows changed at activation confirmed
# them (barrier replies), and how the move ended: the source port went
# (completed), the destination's went (aborted), or it was cancelled.
TAP, SISTERS = 'tap_appeared', 'sisters_moved'
# The source's agent said libvirt paused the guest there for the last copy
# (QEMU's STOP): the moment the guest stopped reading its source tap.
STOPPED = 'source_stopped'
# Held frames: the controller told the destination's ring (or its switch,
# frames held here) where the guest stopped reading, and the ring said it
# delivered them: between them, what a late first held frame waited for.
RELEASED, DELIVERED = 'held_released', 'held_delivered'
ENDED = {COMPLETED: 'source_left', ABORTED: 'destination_left',
         TIMED_OUT: 'timed_out'}

# States: PREPARED (announced; the guest is being copied), COMPLETED (the
# guest left its source), ABORTED (it left, or never reached, the
# destination), TIMED_OUT (not activated within --move-timeout: its wires
# went back to the source alone; should the migration finish later, it is
# followed from OVSDB when the source port goes, as if never announced).
PREPARED = 'prepared'
__all__ = ['PREPARED', 'COMPLETED', 'ABORTED', 'TIMED_OUT', 'TAP', 'SISTERS',
           'STOPPED', 'RELEASED', 'DELIVERED',
           'Migration', 'MigrationBook', 'parse_announce', 'parse_vm_uuid']


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
    # vNIC -> when the guest's first frame on the destination switched
    # delivery there, and what did it (`core.frames`: 'rarp', 'garp',
    # 'ipv6-na', 'ipv4', ...; or 'found-in-table', 'release-hook',
    # 'source-left')
    activated: Dict[str, float] = field(default_factory=dict)
    activated_by: Dict[str, str] = field(default_factory=dict)
    # vNIC -> how its move ended in the data plane ('completed'|'aborted'|
    # 'timed-out')
    moves: Dict[str, str] = field(default_factory=dict)
    # 'hook' (announced) or 'ovsdb' (a vNIC seen on a second host without
    # an announcement: the hook could not reach the controller)
    found_by: str = 'hook'
    # vNIC -> {step: when} for the timeline (STEPS), and vNIC -> the hosts
    # whose flows changed at its activation ('sisters').
    steps: Dict[str, Dict[str, float]] = field(default_factory=dict)
    sisters: Dict[str, List[str]] = field(default_factory=dict)
    # vNIC -> what its held frames came to (core.held_release.Release)
    held: Dict[str, dict] = field(default_factory=dict)
    # Asked to hold frames (True/False), or the controller's default (None)
    hold: Optional[bool] = None

    def view(self):
        d = asdict(self)
        d['vnics'] = list(self.vnics)
        return d


def parse_announce(doc):
    """Validate a `POST /v1/migrations` body; returns (vm, vm_uuid, vnics,
    destination, hold) or raises Malformed / Invalid."""
    unknown = sorted(set(doc) - {'vm', 'vm_uuid', 'vnics', 'destination',
                                 'hold'})
    if unknown:
        raise errors.Malformed('unknown field(s): %s' % ', '.join(unknown))
    for k in ('vm', 'vm_uuid', 'vnics', 'destination'):
        if k not in doc:
            raise errors.Malformed('missing field: %s' % k)
    vm, vm_uuid, vnics, dest = (doc['vm'], doc['vm_uuid'], doc['vnics'],
                                doc['destination'])
    if not isinstance(vm, str) or not vm or len(vm) > 256:
        raise errors.Invalid('vm must be a domain name')
    vm_uuid = parse_vm_uuid(vm_uuid)
    if not isinstance(vnics, list) or not 1 <= len(vnics) <= 64:
        raise errors.Invalid('vnics must be a list of 1 to 64 vNIC ids')
    for v in vnics:
        ids.check_vnic_id(v)
    if len(set(vnics)) != len(vnics):
        raise errors.Invalid('vnics lists a vNIC twice')
    if not isinstance(dest, str) or not dest:
        raise errors.Invalid('destination must be a host name')
    hold = doc.get('hold')
    if hold is not None and not isinstance(hold, bool):
        raise errors.Invalid('hold must be true or false')
    return vm, vm_uuid, tuple(vnics), dest, hold


def parse_vm_uuid(value):
    """A libvirt domain UUID in canonical form, or Invalid."""
    try:
        if not isinstance(value, str):
            raise ValueError
        return str(uuidlib.UUID(value))
    except ValueError:
        raise errors.Invalid('vm_uuid must be a UUID, got %r'
                             % (value,)) from None


class MigrationBook:
    def __init__(self):
        self.active: Dict[str, Migration] = {}           # vm_uuid -> record
        self.history: "OrderedDict[str, Migration]" = OrderedDict()

    def announce(self, doc, hosts, connected, location, vm_id=None):
        """hosts: known host names; connected: names with a live switch;
        location(vnic) -> host name or None; vm_id(vnic) -> the guest UUID
        its port carries (libvirt's external_ids:vm-id) or ''. Returns the
        Migration. What a hook may announce is bounded: only vNICs of the
        guest it names (when their ports say whose they are), not already
        on the destination, not moving under another guest's migration,
        and at most MAX_PER_DESTINATION in progress per destination;
        refusals name no other host."""
        vm, vm_uuid, vnics, dest, hold = parse_announce(doc)
        if dest not in hosts:
            raise errors.NotFound('destination host %s is unknown to the '
                                  'controller' % dest)
        if dest not in connected:
            raise errors.Conflict('destination host %s is not connected to '
                                  'the controller' % dest)
        missing = [v for v in vnics if location(v) is None]
        if missing:
            raise errors.NotFound('vNIC(s) %s not plugged on any host: the '
                                  'controller cannot follow them'
                                  % ', '.join(missing))
        self._check_claim(vm_uuid, vnics, dest, location, vm_id)
        for key, other in list(self.active.items()):
            if other.found_by == 'ovsdb' and set(other.vnics) & set(vnics):
                del self.active[key]    # the announcement supersedes it
        old = self.active.get(vm_uuid)
        if old is not None:
            # A retry after a failed attempt the hook never reported.
            self._end(old, ABORTED)
        m = Migration(id=str(uuidlib.uuid4()), vm=vm, vm_uuid=vm_uuid,
                      vnics=vnics, sources={v: location(v) for v in vnics},
                      destination=dest, hold=hold)
        self.active[vm_uuid] = m
        return m

    def _check_claim(self, vm_uuid, vnics, dest, location, vm_id):
        here = [v for v in vnics if location(v) == dest]
        if here:
            raise errors.Conflict('vNIC(s) %s already on %s: nothing to '
                                  'migrate' % (', '.join(here), dest))
        for v in vnics:
            try:        # a port without a UUID for vm-id cannot be checked
                owner = parse_vm_uuid(vm_id(v)) if vm_id else None
            except errors.Invalid:
                owner = None
            if owner is not None and owner != vm_uuid:
                raise errors.Conflict('vNIC %s is not guest %s\'s'
                                      % (v, vm_uuid))
        for other in self.active.values():
            taken = sorted(set(other.vnics) & set(vnics))
            if taken and other.found_by == 'hook' and \
                    other.vm_uuid != vm_uuid:
                raise errors.Conflict('vNIC(s) %s already being migrated '
                                      '(migration %s)'
                                      % (', '.join(taken), other.id))
        busy = [m for m in self.active.values() if m.destination == dest
                and m.found_by == 'hook' and m.vm_uuid != vm_uuid]
        if len(busy) >= MAX_PER_DESTINATION:
            raise errors.Conflict('%s has %d migrations in progress, the '
                                  'most one host may have; retry when one '
                                  'ends' % (dest, len(busy)))

    def expire(self, vm_uuid):
        """An announced migration none of whose vNICs started moving
        within the move timeout. Returns the ended record or None."""
        m = self.active.get(vm_uuid)
        return self._end(m, TIMED_OUT) if m is not None else None

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
        old = self.active.get(key)
        if old is not None and old.destination == destination and \
                old.found_by == 'ovsdb':
            old.vnics = old.vnics + (vnic,)
            old.sources[vnic] = source
            return old
        if old is not None:
            self._end(old, ABORTED)
        m = Migration(id=str(uuidlib.uuid4()), vm='', vm_uuid=key,
                      vnics=(vnic,), sources={vnic: source},
                      destination=destination, found_by='ovsdb')
        self.active[key] = m
        return m

    def known(self, vm_uuid):
        """Has any migration of this guest been recorded?"""
        return vm_uuid in self.active or any(
            m.vm_uuid == vm_uuid for m in self.history.values())

    def leaving_source(self, vm_uuid, host):
        """The active Migration of the guest if `host` is one of its
        sources (the guest leaving it completes the migration), else None."""
        m = self.active.get(vm_uuid)
        if m is None or host == m.destination or \
                host not in m.sources.values():
            return None
        return m

    def released(self, vm_uuid, host):
        """The guest left `host`. Returns the ended Migration, or None."""
        m = self.active.get(vm_uuid)
        if m is not None and host == m.destination:
            return self._end(m, ABORTED)
        if self.leaving_source(vm_uuid, host) is not None:
            return self._end(m, COMPLETED)
        return None

    def activated(self, vnic, host, trigger, when=None):
        """vNIC's guest showed up on `host` (data-plane activation), by
        `trigger`. Returns the record, or None if no migration has it."""
        for m in self.active.values():
            if vnic in m.vnics and m.destination == host:
                if vnic not in m.activated:
                    m.activated[vnic] = when or time.time()
                    m.activated_by[vnic] = trigger
                return m
        return None

    def held_released(self, vnic, view, update=False):
        """The destination got vNIC's held frames: `view` says how many
        (update: more of it, e.g. frames delivered late, to the record
        that has its release, which may have ended since)."""
        for m in list(self.active.values()) + list(reversed(
                self.history.values()))[:8]:
            if vnic in m.vnics and (not update or vnic in m.held):
                if update and all(m.held[vnic].get(k) == v
                                  for k, v in view.items()):
                    return None
                m.held[vnic] = dict(m.held.get(vnic, {}), **view)
                return m
        return None

    def step(self, vnic, name, when=None, destination=None, hosts=None):
        """A vNIC's move reached step `name` (once). The record may have
        ended already: switches confirm after the source left when the
        release hook was the trigger. Returns the record, or None."""
        for m in list(self.active.values()) + list(reversed(
                self.history.values()))[:8]:
            if vnic in m.vnics and destination in (None, m.destination):
                steps = m.steps.setdefault(vnic, {})
                if name in steps:
                    return None
                steps[name] = when or time.time()
                if hosts is not None:
                    m.sisters[vnic] = sorted(hosts)
                return m
        return None

    def move_finished(self, vnic, outcome):
        """A vNIC's move ended (its source or destination port went away).
        When every vNIC's has, the migration is over even if the hook never
        said so (it could not reach us). Returns the record if it changed."""
        for m in list(self.active.values()):
            if vnic in m.vnics:
                m.moves[vnic] = outcome
                m.steps.setdefault(vnic, {}).setdefault(
                    ENDED.get(outcome, outcome), time.time())
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
