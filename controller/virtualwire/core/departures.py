"""A move believed because both ends say so (pure).

Under strict placement a vNIC moves only on the cloud's word. The cloud
says it one of two ways: an orchestrator credential places the vNIC on
the destination (`vwctl vnics place`), or the two hypervisors agree. The
destination's libvirt hook announces the guest arriving (`POST
/v1/migrations`); the source's agent (`vw-host-agent`, reading libvirt's
own migration job) reports the same guest leaving (`POST
/v1/migrations/departures`), with the address its migration stream goes
to when it could see one. `Departures.authorize` pairs the two.

What this protects against: one compromised hypervisor. A destination
alone (announcing a guest it wants) moves nothing, and a source alone
can only give away vNICs the cloud placed on it. When the source saw
its stream's peer, a destination whose addresses do not include it is
refused, so another host cannot pose as the destination of a real
migration. What it does not: two compromised hypervisors together can
move the source's own vNICs between them; a migration stream the agent
cannot see (tunnelled through libvirtd) is paired by guest alone, so a
host that announces the guest in the moment between the real
destination's announcement and the source's report could be believed.
"""
import ipaddress
import uuid
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Tuple

from virtualwire.core import errors, ids
from virtualwire.core.placement import Word, next_word

WINDOW = 120.0      # s a report waits for its other half


@dataclass(frozen=True)
class Departure:
    """The source `host` reports guest `vm_uuid` migrating out, its
    ports' `vnics`, the stream's peer address `to_address` if seen."""
    host: str
    vm_uuid: str
    vnics: FrozenSet[str]
    to_address: Optional[str]
    at: float


def parse(doc, host, now):
    """A Departure from a `POST /v1/migrations/departures` body sent by
    hypervisor `host`, or Malformed / Invalid saying what is wrong."""
    if not isinstance(doc, dict):
        raise errors.Malformed('the body is a JSON object')
    unknown = sorted(set(doc) - {'host', 'vm_uuid', 'vnics', 'to_address'})
    if unknown:
        raise errors.Malformed('unknown field(s): %s' % ', '.join(unknown))
    if doc.get('host') != host:
        raise errors.Invalid('host must be the reporting host %s' % host)
    vnics = doc.get('vnics')
    if not isinstance(vnics, list) or not vnics or len(vnics) > 64:
        raise errors.Invalid('vnics must list the guest\'s vNIC ids (1 to '
                             '64)')
    for v in vnics:
        ids.check_vnic_id(v)
    to = doc.get('to_address')
    if to is not None:
        try:
            to = str(ipaddress.ip_address(to))
        except (TypeError, ValueError):
            raise errors.Invalid('to_address must be an IP address, not %r'
                                 % (to,)) from None
    try:
        vm_uuid = str(uuid.UUID(doc.get('vm_uuid')))
    except (TypeError, ValueError, AttributeError):
        raise errors.Invalid('vm_uuid must be a UUID, got %r'
                             % (doc.get('vm_uuid'),)) from None
    return Departure(host, vm_uuid,
                     frozenset(vnics), to, now)


class Departures:
    """Reports of guests leaving, each kept WINDOW seconds."""

    def __init__(self):
        self.pending: Dict[str, Departure] = {}     # vm_uuid -> report
        # vm_uuid -> (source, when) of the last report a move spent: the
        # agent may say it again before it hears it was (`said_again`).
        self.spent: Dict[str, Tuple[str, float]] = {}

    def report(self, d: Departure):
        self.pending[d.vm_uuid] = d

    def expire(self, now):
        for k in [k for k, d in self.pending.items() if now - d.at > WINDOW]:
            del self.pending[k]
        for k in [k for k, (_h, at) in self.spent.items()
                  if now - at > WINDOW]:
            del self.spent[k]

    def said_again(self, d: Departure, moved_on: bool) -> bool:
        """Whether `d` repeats a report its move already spent (its vNICs
        all placed off its host since: `moved_on`). Kept, it would be
        judged against the guest's next move."""
        self.expire(d.at)
        spent = self.spent.get(d.vm_uuid)
        return moved_on and spent is not None and spent[0] == d.host

    def authorize(self, vm_uuid: str, destination: str,
                  destination_addresses, vnics, words: Dict[str, Word],
                  now) -> Tuple[Dict[str, Word], List[str]]:
        """A migration of `vm_uuid` to `destination` was announced with
        `vnics`: ({vnic: the Word that lets it move}, [why each vNIC that
        could not move did not]). Empty until the source has reported."""
        self.expire(now)
        d = self.pending.get(vm_uuid)
        if d is None:
            return {}, []
        if d.host == destination:
            return {}, []       # the report of its move here, before
        if d.to_address is not None and \
                d.to_address not in destination_addresses:
            return {}, ['%s sends guest %s to %s, which is not %s\'s'
                        % (d.host, vm_uuid, d.to_address, destination)]
        out: Dict[str, Word] = {}
        why = []
        for v in sorted(vnics):
            word = words.get(v)
            if v not in d.vnics:
                why.append('vNIC %s is not among the ports %s reported '
                           'leaving' % (v, d.host))
            elif word is None:
                why.append('vNIC %s is not placed: only the cloud may '
                           'place it first' % v)
            elif word.host == destination:
                continue                    # already allowed there
            elif word.host != d.host:
                why.append('vNIC %s is placed on %s, not on %s which '
                           'reported it leaving' % (v, word.host, d.host))
            else:
                out[v] = next_word(word, destination)
        if out:
            del self.pending[vm_uuid]      # spent: one report, one move
            self.spent[vm_uuid] = (d.host, now)
        return out, why
