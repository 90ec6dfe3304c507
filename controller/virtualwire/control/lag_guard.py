"""How far behind its switches' packet-ins the controller runs, measured
by the held frames' source polls (a part of control.holding).

A poll of a source tap's counters is answered behind every packet-in its
switch queued before it, so its round trip is the controller's backlog;
a poll still unanswered counts too, or the lag is known only once the
answer that measures it comes (an ensemble's grew from 2.3 s to 55 s
so). A poll asked on a connection since gone is never answered, and is
not a lag. Over BEHIND every held vNIC but the one held longest stops
holding (its pause is the nearest); over FAR_BEHIND, that one too.

Bench moves of one guest with two held vNICs ran 0.3-1.3 s behind and
lost no copy; an ensemble's lag grew past 50 s, and the last held vNIC
alone took it from 0.7 s to 9.2 s (its copies overflowed, no cut was
found). The held test's single vNIC ran 0.45-0.82 s behind in moves
that kept their promise; at 1.0 s its bounded ring evicted 121 frames
the guest never read (the release came that much later), and at
1.7-1.9 s two moves lost 1,131 and 1,329 datagrams (the guest's first
frame came behind its source's leaving, and what was still queued for
the release was dropped): hence FAR_BEHIND 0.75 s. OVS queues at most
512 packet-ins, and the socket's bytes, beyond.
"""
from typing import Callable, Dict, List, Mapping, Optional, Tuple

BEHIND = 0.5
FAR_BEHIND = 0.75
# A vNIC held on its destination host (control.host_rings) costs only its
# source's copies, and a release from a count past them skips what was
# read: it stops holding once the run it names may have left the host's
# ring (host.hold_ring: 2048 frames, 2 s at 1 kHz).
RING_BEHIND = 1.5
RATE_WINDOW = 0.1    # seconds over which a vNIC's frame rate is judged


def to_shed(lag: float, held: List[str]) -> List[str]:
    """Pure: the held vNICs (oldest first) that stop holding at `lag`."""
    if lag <= BEHIND:
        return []
    return held[0 if lag > FAR_BEHIND else 1:]


class LagGuard:
    """Owns each held vNIC's worst poll round trip and its oldest poll
    still out."""

    def __init__(self, clock: Callable[[], float], session_of):
        self.clock, self.session_of = clock, session_of
        self.behind: Dict[str, float] = {}
        # vNIC -> (when its oldest unanswered poll was asked, the switch
        # session asked)
        self.unanswered: Dict[str, Tuple[float, object]] = {}

    def asked(self, vnic, session) -> float:
        now = self.clock()
        self.unanswered.setdefault(vnic, (now, session))
        return now

    def answered(self, vnic, asked) -> float:
        """The poll asked at `asked` came back: its lag."""
        self.unanswered.pop(vnic, None)
        lag = self.clock() - asked
        self.behind[vnic] = max(lag, self.behind.get(vnic, 0.0))
        return lag

    def oldest_out(self, held, sources: Mapping[str, str]) -> float:
        """How long the oldest poll still out has waited, over the `held`
        vNICs (`sources`: vNIC -> its source host, while it moves);
        forgets the rest."""
        for v in [v for v in self.behind if v not in held]:
            del self.behind[v]
        for v, (_, s) in list(self.unanswered.items()):
            if v not in held or v not in sources or \
                    self.session_of(sources[v]) is not s:
                del self.unanswered[v]
        now = self.clock()
        return now - min((t for t, _ in self.unanswered.values()),
                         default=now)

    def worst(self, vnic) -> float:
        """The vNIC's worst poll round trip so far."""
        return self.behind.get(vnic, 0.0)

    def recorded(self, vnic) -> float:
        """The vNIC's worst lag, for its release's record."""
        return self.behind.pop(vnic, 0.0)


class RateGuard:
    """Owns each held vNIC's frames counted over RATE_WINDOW. Faster than
    `rate` (--hold-rate), holding stops for the rest of the move: its ring
    would hold less than a pause, and every frame costs packet-ins (two
    held in the controller, one, the source's copy, held on the host)."""

    def __init__(self, clock: Callable[[], float], rate: int):
        self.clock, self.rate = clock, rate
        self.arrivals: Dict[str, Tuple[float, int]] = {}

    def counted(self, vnic) -> None:
        since, n = self.arrivals.get(vnic) or (self.clock(), 0)
        self.arrivals[vnic] = (since, n + 1)

    def forget(self, vnic) -> None:
        self.arrivals.pop(vnic, None)

    def keep(self, vnics) -> None:
        for v in [v for v in self.arrivals if v not in vnics]:
            del self.arrivals[v]

    def too_fast(self, vnic) -> Optional[str]:
        """Why it stops holding, once a window says so; else None."""
        since, n = self.arrivals.get(vnic) or (self.clock(), 0)
        took = self.clock() - since
        if took < RATE_WINDOW:
            self.arrivals[vnic] = (since, n)
            return None
        del self.arrivals[vnic]
        if not self.rate or n / took <= self.rate:
            return None
        return '%d frames/s, above --hold-rate %d' % (round(n / took),
                                                     self.rate)
