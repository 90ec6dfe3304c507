"""Where each vNIC's traffic goes, and its live migrations: pure.

A vNIC is *claimed* by every host it is plugged on. Plugged on two hosts it
is moving (announced by the libvirt hook, or inferred when no hook could
reach us): traffic goes to the source until the guest's first frame on the
destination activates it. The source leaving completes the move; the destination
leaving aborts it. Methods return the events that happened; the caller
(`control`) records them. Nothing here does I/O.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

from virtualwire.core.model import Location, Move

COMPLETED = 'completed'
ABORTED = 'aborted'
TIMED_OUT = 'timed-out'


@dataclass(frozen=True)
class MoveSeen:
    """A vNIC appeared on a second host with no announced move."""
    vnic: str
    move: Move


@dataclass(frozen=True)
class MoveEnded:
    vnic: str
    move: Move
    outcome: str          # COMPLETED | ABORTED | TIMED_OUT


def place(claims: Optional[Dict[str, int]], move: Optional[Move]
          ) -> Tuple[Optional[Location], Optional[Location]]:
    """(delivery Location, shadow Location or None) of a vNIC plugged on
    `claims` ({host: ofport}, in arrival order) with an optional Move."""
    if not claims:
        return None, None
    if move is not None and move.source in claims and \
            move.destination in claims:
        src = Location(move.source, claims[move.source])
        dst = Location(move.destination, claims[move.destination])
        return (dst, None) if move.activated else (src, dst)
    if move is not None and move.destination in claims and move.activated:
        return Location(move.destination, claims[move.destination]), None
    if move is not None and move.source in claims:
        return Location(move.source, claims[move.source]), None
    name = next(iter(claims))
    return Location(name, claims[name]), None


@dataclass(frozen=True)
class Word:
    """The cloud's word on where a vNIC may run (OVN's requested-chassis):
    `host`, and while a move it authorized is under way, `previous` (the
    source, until the move completes)."""
    host: str
    previous: Optional[str] = None

    def allows(self, host: str) -> bool:
        return host in (self.host, self.previous)


def next_word(current: Optional[Word], host: str) -> Word:
    """The word after the cloud names `host`: moved from another host,
    that host stays allowed until the guest has left it."""
    if current is None:
        return Word(host)
    if current.host != host:
        return Word(host, current.host)
    return current


@dataclass(frozen=True)
class ClaimRefused:
    """A host plugged a vNIC the cloud placed elsewhere (or, strict, has
    not placed at all: `word` None): not believed."""
    vnic: str
    host: str
    word: Optional[Word]


class Placement:
    """Claims and moves of every vNIC. Each mutator returns
    (vNICs whose placement may have changed, events).

    A vNIC the cloud has placed (`set_word`) is claimed only by the hosts
    its word allows; another host plugging it is *refused*: remembered
    (`refused`, for status and metrics) but never a claim, so no traffic
    goes there and no move is inferred. A vNIC with no word is claimed by
    whoever plugs it, unless placement is `strict` (the default of the
    controller): then by nobody, until the cloud places it."""

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.claims: Dict[str, Dict[str, int]] = {}   # arrival order
        self.moves: Dict[str, Move] = {}
        self.words: Dict[str, Word] = {}
        self.refused: Dict[str, Dict[str, int]] = {}  # vnic -> {host: port}

    def allows(self, vnic: str, host: str) -> bool:
        """May `host` claim `vnic`?"""
        word = self.words.get(vnic)
        return (not self.strict) if word is None else word.allows(host)

    def set_strict(self, strict: bool):
        """Placement turned strict (unplaced vNICs are nobody's) or not:
        every unplaced vNIC is judged again. Returns (changed, events)."""
        if strict == self.strict:
            return set(), []
        self.strict = strict
        changed: Set[str] = set()
        events: List[object] = []
        for vnic in sorted((set(self.claims) | set(self.refused)) -
                           set(self.words)):
            c, e = self.set_word(vnic, None)
            changed |= c
            events += e
        return changed, events

    def awaiting(self, vnic: str, host: str) -> bool:
        """Is `host` the destination of `vnic`'s announced move?"""
        move = self.moves.get(vnic)
        return move is not None and move.destination == host

    def where(self, vnic: str):
        return place(self.claims.get(vnic), self.moves.get(vnic))

    def location(self, vnic: str) -> Optional[Location]:
        return self.where(vnic)[0]

    def plug(self, host: str, old: Dict[str, int], new: Dict[str, int]):
        """Host `host`'s vNIC ports went from `old` to `new` ({vnic: ofport})."""
        changed: Set[str] = set()
        events: List[object] = []
        for vnic in set(old) | set(new):
            if old.get(vnic) == new.get(vnic):
                continue
            port = new.get(vnic)
            if port is not None and port > 0 and \
                    not self.allows(vnic, host):
                first = host not in self.refused.get(vnic, {})
                self.refused.setdefault(vnic, {})[host] = port
                # A destination plugged before the word of its announced
                # move came (the source's report follows it): no alarm
                # unless the move ends without that word.
                if first and not self.awaiting(vnic, host):
                    events.append(ClaimRefused(vnic, host,
                                               self.words.get(vnic)))
                continue
            self._unrefuse(vnic, host)
            changed.add(vnic)
            claims = self.claims.setdefault(vnic, {})
            if port is not None and port > 0:
                arriving = host not in claims
                claims[host] = port
                if arriving:
                    events += self._arrived(vnic, host)
            elif claims.pop(host, None) is not None:
                events += self._left(vnic, host)
            if not claims:
                del self.claims[vnic]
        return changed, events

    def _unrefuse(self, vnic, host):
        ports = self.refused.get(vnic)
        if ports is not None:
            ports.pop(host, None)
            if not ports:
                del self.refused[vnic]

    def set_word(self, vnic: str, word: Optional[Word]):
        """The cloud placed `vnic` (None: it no longer says). Claims it
        now forbids become refusals, and refusals it now allows become
        claims (a destination plugged before the cloud authorized the
        move). Returns (changed, events)."""
        move = self.moves.get(vnic)
        if word is not None and word.previous is not None and \
                word.previous not in self.claims.get(vnic, {}) and \
                not (move is not None and move.source == word.previous):
            # Nothing to move from there. (A move restored at a restart,
            # before any host is read, keeps its source: it is the guest's
            # until the guest leaves it, and its leaving ends the move.)
            word = Word(word.host)
        if word is None:
            self.words.pop(vnic, None)
        else:
            self.words[vnic] = word
        claimed = dict(self.claims.get(vnic, {}))
        refused = dict(self.refused.get(vnic, {}))
        changed: Set[str] = set()
        events: List[object] = []
        for host, port in claimed.items():
            if not self.allows(vnic, host):
                c, e = self.plug(host, {vnic: port}, {})
                self.refused.setdefault(vnic, {})[host] = port
                changed |= c
                events += e + [ClaimRefused(vnic, host, word)]
        for host, port in refused.items():
            if self.allows(vnic, host):
                self._unrefuse(vnic, host)
                c, e = self.plug(host, {}, {vnic: port})
                changed |= c
                events += e
        return changed, events

    def _arrived(self, vnic, host):
        """A vNIC plugged on a second host is a live migration to it, even
        if no hook announced it (the hook may not reach us)."""
        claims, move = self.claims[vnic], self.moves.get(vnic)
        if move is not None and host in (move.source, move.destination):
            return []
        others = [h for h in claims if h != host]
        if not others:
            return []
        src = move.source if move is not None and move.source in claims \
            else others[0]
        self.moves[vnic] = Move(src, host)
        return [MoveSeen(vnic, self.moves[vnic])]

    def _left(self, vnic, host):
        move = self.moves.get(vnic)
        word = self.words.get(vnic)
        if word is not None and word.previous == host:
            # The source the cloud let go of has: it may not come back.
            self.words[vnic] = Word(word.host)
        if move is not None and host == move.source:
            return [self._finish(vnic, COMPLETED)]
        if move is not None and host == move.destination:
            return [self._finish(vnic, ABORTED)]
        return []

    def _finish(self, vnic, outcome):
        return MoveEnded(vnic, self.moves.pop(vnic), outcome)

    def start_move(self, vnic: str, source: str, destination: str) -> bool:
        """A move announced (hook) or restored (restart), before or while
        its destination tap appears. True if that changed anything."""
        move = self.moves.get(vnic)
        if move is not None and (move.source, move.destination) == \
                (source, destination):
            return False
        self.moves[vnic] = Move(source, destination)
        return True

    def activate(self, vnic: str, host: str) -> bool:
        """The guest showed up on `host` (its first frame there): deliver there
        from now on. True if that activated a move."""
        move = self.moves.get(vnic)
        if move is None or move.activated or move.destination != host or \
                host not in self.claims.get(vnic, {}):
            return False
        self.moves[vnic] = Move(move.source, move.destination, True)
        return True

    def cancel_move(self, vnic: str, outcome: str = ABORTED):
        """Forget a move (timed out, or aborted while its destination port
        is still there): traffic goes back to the source alone."""
        if vnic not in self.moves:
            return []
        dest = self.moves[vnic].destination
        events: List[object] = [self._finish(vnic, outcome)]
        if dest in self.refused.get(vnic, {}):
            # Its destination never got the word: refused after all.
            events.append(ClaimRefused(vnic, dest, self.words.get(vnic)))
        return events
