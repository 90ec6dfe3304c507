"""Loss beyond doubt: which of a wire's frames can no longer arrive.

The rule, in one sentence: a frame is counted lost only once the far
end's counter, read when every frame that entered up to the moment the
near end was read has either been delivered or could not be any more
(after LAG + FLIGHT), still lacks it.

Why a rule and not entered minus delivered: OVS folds its datapath's
counts into a flow's counter only every so often (its revalidators, every
500 ms by default: `other_config:max-revalidator`; measured up to 494 ms
here, docs/benchmarks.rst), frames take time to cross, and the two ends
are read at different moments. During a 16 MiB TCP burst the raw
difference was ten thousand frames with nothing lost. So each sample
carries two times (`lower`: every count in it includes all that happened
before; `upper`: no count includes anything after), and for the newest
sample j the newest earlier sample i with upper_i + FLIGHT <= lower_j
gives

    lost among frames entered by upper_i  >=  entered_i - delivered_j

A count a switch loses (a delivering flow removed or replaced before its
last frames were folded in, a switch restarting) would make delivered
short for good, so such a *cut* starts a new segment: loss in it is
judged from the cut's delivered count and from the first sample read
wholly after the cut, and closed segments keep what they proved. Each
bound is below the truth, so their running sum is too; it never goes
down. What the counters cannot settle (in flight, not counted yet, or a
count a switch lost) is reported as *unsettled*, never as lost.

What it does not do: prove a small loss on a wire that never pauses
sooner than that loss outgrows about LAG + FLIGHT + one reading interval
of its traffic (docs/benchmarks.rst measures it). A host that cannot be
read holds back the judgement of the wires it counted for until it is
read again, and of every wire for AWAY (it may deliver frames of wires it
never counted for). So does a host known and never read yet (its switch
not connected to the reader since it started, or not named yet): CI saw
one a new collector process read 7 s late, and 6 frames it had delivered
judged lost. One unread for longer is taken as gone, so a host
cut off from the collector for over a minute while its guests still
receive frames of a wire new to it could show them lost. Pure: samples
in, figures out.
"""
import math
from typing import Dict, List, Optional, Set

from virtualwire import config_file

DIRECTIONS = ('a_to_b', 'b_to_a')
# s: the most a flow's counter may lag what it counted. OVS's default
# revalidator period is 500 ms; the rest is margin for a late revalidator.
LAG = 0.75
# s: the longest a frame takes from the counter where it enters to the one
# where it is delivered (queues, an extender's encryption, a shaped WAN).
# Pings across a wire saturated by TCP took at most 11 ms here; the rest
# is margin for a starved switch. At the default 2 s reading interval
# LAG + FLIGHT still let each reading judge the one before it.
FLIGHT = 0.5

# s: a host that stopped being read holds every wire's judgement back for
# this long (it may deliver frames of wires it never counted for before);
# after that it is taken as gone.
AWAY = 60.0

# A direction's state: [closed, segment best, base entered (None until a
# sample was read wholly after the cut), base delivered, cut time,
# judged-to time, cuts so far].
CLOSED, BEST, BASE_E, BASE_D, CUT_AT, JUDGED_TO, CUTS = range(7)


def _fresh():
    return [0, 0, 0, 0, -math.inf, None, 0]


class LossLedger:
    """Every wire's judged loss each way. Only wires that were cut or have
    judged something are stored (an idle fleet costs nothing)."""

    def __init__(self, lag=LAG, flight=FLIGHT):
        self.lag, self.flight = lag, flight
        self.states: Dict[int, List[Optional[list]]] = {}
        # Wires cut and not yet read wholly after it (`resolve`).
        self.pending: Set[int] = set()

    def forget(self, cid):
        self.states.pop(cid, None)
        self.pending.discard(cid)

    def _state(self, cid, k):
        st = self.states.setdefault(cid, [None, None])
        if st[k] is None:
            st[k] = _fresh()
        return st[k]

    def cut(self, cid, k, at, delivered):
        """Direction k (0: a_to_b) of the wire may have lost delivered
        counts at or before `at`; `delivered` is its count now."""
        s = self._state(cid, k)
        s[CLOSED] += s[BEST]
        s[BEST], s[BASE_E], s[BASE_D] = 0, None, delivered
        s[CUT_AT], s[JUDGED_TO] = at if at is not None else math.inf, None
        s[CUTS] += 1
        self.pending.add(cid)

    def resolve(self, cid, lower, raw):
        """A sample of a wire that is cut: read wholly after the cut, its
        entered count is where the new segment starts. The in-process
        collector samples every wire (`judge` does this); the collector
        process only busy ones, and calls this for the others."""
        st = self.states.get(cid)
        left = False
        for k, d in enumerate(DIRECTIONS):
            s = st[k] if st else None
            if s is None or s[BASE_E] is not None:
                continue
            if lower >= s[CUT_AT]:
                s[BASE_E] = raw[d][0]
            else:
                left = True
        if not left:
            self.pending.discard(cid)

    def lost(self, cid):
        """(a_to_b, b_to_a) lost beyond doubt, since the wire was made."""
        st = self.states.get(cid)
        if not st:
            return (0, 0)
        return tuple(s[CLOSED] + s[BEST] if s else 0 for s in st)

    def why(self, cid, k):
        """What an operator may ask of direction k when frames stay
        unsettled: how many times counts a switch may have lost started a
        new segment (frames in flight at a cut stay unsettled)."""
        st = self.states.get(cid)
        s = st[k] if st else None
        return {'loss_cuts': s[CUTS] if s is not None else 0}

    def judge(self, cid, history, lower_j, raw_j):
        """A new sample of the wire (its `lower` time and raw counts
        {direction: (entered, delivered, ...)}) after `history`, its
        earlier samples, oldest first, each (lower, upper, raw, ...).
        Returns the judged loss (a_to_b, b_to_a)."""
        st = self.states.get(cid)
        if st is None and not (raw_j['a_to_b'][0] or raw_j['b_to_a'][0]):
            return (0, 0)                   # nothing ever entered
        # The newest sample that ended FLIGHT before this one began.
        older = None
        for sample in reversed(history):
            if sample[1] + self.flight <= lower_j:
                older = sample
                break
        if cid in self.pending:
            self.resolve(cid, lower_j, raw_j)
        for k, d in enumerate(DIRECTIONS):
            s = st[k] if st else None
            if s is not None and s[BASE_E] is None:
                continue                    # not read wholly after its cut
            if older is None:
                continue
            cut_at = s[CUT_AT] if s else -math.inf
            if older[1] < cut_at:
                continue                    # entered before the cut
            base_e, base_d = (s[BASE_E], s[BASE_D]) if s else (0, 0)
            bound = (older[2][d][0] - base_e) - (raw_j[d][1] - base_d)
            if bound > (s[BEST] if s else 0):
                s = self._state(cid, k)
                st = self.states[cid]
                s[BEST], s[JUDGED_TO] = bound, older[1]
        return self.lost(cid)

    # -- durability (with the counters' base) --------------------------------
    def snapshot(self):
        def enc(s):
            if s is None:
                return None
            out = list(s)
            out[CUT_AT] = None if s[CUT_AT] in (-math.inf, math.inf) \
                else s[CUT_AT]
            return out
        return {str(cid): [enc(s) for s in st]
                for cid, st in self.states.items() if any(st)}

    def restore(self, snap):
        self.states, self.pending = {}, set()
        for cid, st in (snap or {}).items():
            dec: List[Optional[list]] = []
            for s in st:
                if s is None:
                    dec.append(None)
                    continue
                s = list(s) + [0] * (CUTS + 1 - len(s))
                if s[CUT_AT] is None:
                    # Cut at an unknown time (or never): a cut without a
                    # time waits for a later one rather than guess.
                    s[CUT_AT] = -math.inf if s[BASE_E] is not None \
                        else math.inf
                dec.append(s)
                if s[BASE_E] is None:
                    self.pending.add(int(cid))
            self.states[int(cid)] = dec


def floor(now, up_at, asked_at):
    """The oldest reading any count may date from: of every host up (or
    last up less than AWAY ago), when the request its last reading
    answered was sent; -inf for one never read. `up_at`: host -> when it
    was last seen up."""
    return min((asked_at.get(h, -math.inf) for h, t in up_at.items()
                if now - t < AWAY), default=now)


def lower_bound(floor, pins, asked_at, lag, base=None):
    """The `lower` time of a wire's sample: every count in it includes all
    that its flows counted before. `floor`: the oldest request among the
    switches read for this sample (a switch may hold flows of a wire it
    has not counted for yet); `pins`: the hosts that counted for the
    wire, each read last at `asked_at[host]` (a host not read since, e.g.
    disconnected, holds its wires' judgement back). `base`: floor - lag,
    computed once for many wires (and shared by those it is theirs)."""
    t = floor
    for h in pins:
        a = asked_at.get(h, -math.inf)
        if a < t:
            t = a
    if t == floor and base is not None:
        return base
    return t - lag


def add_arguments(p):
    """The controller's and the collector process's options: both judge
    loss the same way."""
    p.add_argument('--counter-lag', type=config_file.seconds(0, 10, above=True),
                   default=LAG,
                   metavar='SECONDS',
                   help="the most a switch's flow counters lag what they "
                        "counted: OVS's other_config:max-revalidator (500 "
                        'ms by default) plus a margin; a frame is judged '
                        'lost only after this and --max-flight (default: '
                        '%(default)s)')
    p.add_argument('--max-flight', type=config_file.seconds(0, 10, above=True),
                   default=FLIGHT,
                   metavar='SECONDS',
                   help='the longest a frame takes between the two ends of '
                        'a wire, queues and extenders included (default: '
                        '%(default)s)')
