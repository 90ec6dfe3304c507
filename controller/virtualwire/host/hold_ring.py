"""Frames towards a live-migrating vNIC, kept on its destination host
itself (pure: `vw-frame-hold` feeds it frames and messages, and sends
what it returns).

Why on the host: held in the controller, every frame of a move costs a
packet-in and its release a packet-out, and the first held frame reached
the guest 17-19 ms after RESUME at p50 (86-94 ms at worst, issue 42);
the controller ran 0.45-1.9 s behind one 1 kHz stream on two cores.
Kept here, a frame crosses no connection until it is released, and the
release is one message.

The destination's switch pushes an 802.1ad tag onto each frame for a
moving vNIC (VID = the vNIC's *slot* on this host, given by the
controller) and outputs it to the internal port `vw-hold`; each slot's
frames wait in a ring, oldest first, bounded in frames and bytes. The
controller says through the same port (a packet-out of an `ETHERTYPE`
frame, `parse_message`) where the guest stopped reading on its source:
the digest (`core.held_frames.digest`) of the last frame it read there,
with those of a few before it. The ring finds that run and sends every
frame after it back into `vw-hold` tagged with the slot (the switch pops
the tag and hands it to the tap), then passes each later frame through
as it comes, until told to close. The answer goes back the same way.

The switch also copies the guest's own frames here while the move is
pending, tagged with the slot and priority 7: the guest runs here. If no
release follows within ORPHAN_AFTER (the controller stopped or cut off),
or the controller's beats (`beat` messages: it still holds the move)
stop for BEAT_LOST, the ring drops what it held and passes later frames
on, so a guest is not cut off for as long as its controller is away.

What it protects against: a frame sent during the pause lost, or one
the guest read on its source delivered again (as far as the controller's
digests place the cut). What it does not: frames the bound evicted (told
in the answer), identical frames told apart beyond their order, a host
that lies (its switch could drop the frames anyway: nothing here widens
what a host can do).
"""
import collections
import json
import re
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Optional, Sequence, Tuple

from virtualwire.core.held_frames import digest, hold_bounded
# Our messages' EtherType, and the answers' tag (every flow on `vw-hold`
# matches its VLAN id alone: pipeline.host_hold).
from virtualwire.pipeline.host_hold import ANSWER_SLOT, ETHERTYPE

__all__ = ['ANSWER_SLOT', 'ETHERTYPE', 'HoldRings', 'parse_message']

MAX_SLOTS = 64              # moving vNICs held at once on one host
# Per slot. Larger than the controller's own ring: a release comes as late
# as the controller is behind its switches' packet-ins (the source's
# copies), and the run it names must still be here (a bench move, 657 ms
# behind at 1 kHz: 512 frames would not do). 64 full slots: 128 MiB.
DEFAULT_FRAMES = 2048
DEFAULT_BYTES = 2 << 20
MAX_SKIP = 65536
_IFNAME = re.compile(r'^[A-Za-z0-9_.:-]{1,15}$')    # a Linux interface name
MAX_AGE = 30.0              # s a ring waits for its release
PASS_FOR = 10.0             # s a released slot passes frames without close
MAX_MESSAGE = 1400          # bytes of a message's JSON
MAX_AFTER = 16              # digests in a release
# How long a release told to wait for its run does (absent "wait"). The
# run is what the guest read on its source; it reaches this host later
# than the release when the far end's path here is the longer one (across
# the extenders while the source is in the far end's own site).
WAIT_FOR = 0.25
# s from the guest's first frame here (pipeline.host_hold.runs_signal) to
# letting frames through with no release: the controller is away (its
# learn fallback is off where a ring holds, pipeline.wire). Longer than
# a controller that is only behind sheds the move (control.lag_guard
# RING_BEHIND) plus its wait for our answer.
ORPHAN_AFTER = 2.0
# A controller that means to release a slot says so (a "beat") every
# control.host_rings.BEAT_EVERY while it holds the move. Once the guest
# runs here, beats missing for BEAT_LOST mean the controller is gone
# (killed, or cut off): the slot passes then, not ORPHAN_AFTER after the
# guest ran. A controller only behind its packet-ins still beats (its
# timer runs between them). Rings never beaten keep ORPHAN_AFTER alone.
BEAT_LOST = 0.5


class BadMessage(ValueError):
    """A message this ring cannot act on: the answer says why."""


@dataclass
class Message:
    op: str                         # release | drop | close | beat
    slot: int
    ident: int = 0                  # echoed in the answer
    after: List[bytes] = field(default_factory=list)
    # If the ring has no run that ends with `after`: deliver all it holds
    # (the run was evicted: everything left is after it), none (the guest
    # read all of the ring), or wait for the run (it has not come yet:
    # every frame before it was read, those after it go; not come within
    # WAIT_FOR, the ring is dropped). The controller knows which from the
    # copies; unsaid, none (a loss, never a duplicate).
    absent: str = 'none'
    # Frames after the run the guest read too: the count said so, their
    # copies had not reached the controller yet (it was behind).
    skip: int = 0
    # The guest's port on this host: released and passed frames are
    # written to it directly, not back through the switch (unsaid: back
    # into vw-hold, tagged, for a flow to deliver; OVS's userspace
    # datapath then runs a receive batch flow by flow, so frames of two
    # megaflows, e.g. tagged and untagged, may leave out of order).
    port: Optional[str] = None


def parse_message(payload: bytes) -> Message:
    """An `ETHERTYPE` frame's payload (after the Ethernet header), as the
    controller writes it: JSON {"op", "slot", "id", "after": [hex]}."""
    if len(payload) > MAX_MESSAGE:
        raise BadMessage('message of %d bytes (at most %d)'
                         % (len(payload), MAX_MESSAGE))
    try:
        doc = json.loads(payload.rstrip(b'\0').decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise BadMessage('not JSON: %s' % e) from None
    if not isinstance(doc, dict):
        raise BadMessage('not a JSON object')
    op, slot, ident = doc.get('op'), doc.get('slot'), doc.get('id', 0)
    if op not in ('release', 'drop', 'close', 'beat'):
        raise BadMessage('op must be release, drop, close or beat, not %r'
                         % (op,))
    if not isinstance(slot, int) or isinstance(slot, bool) or \
            not 1 <= slot < ANSWER_SLOT:
        raise BadMessage('slot must be a VLAN id 1-%d, not %r'
                         % (ANSWER_SLOT - 1, slot))
    if not isinstance(ident, int) or isinstance(ident, bool):
        raise BadMessage('id must be an integer, not %r' % (ident,))
    after = doc.get('after', [])
    if not isinstance(after, list) or len(after) > MAX_AFTER:
        raise BadMessage('after must be a list of at most %d digests'
                         % MAX_AFTER)
    absent = doc.get('absent', 'none')
    if absent not in ('all', 'none', 'wait'):
        raise BadMessage('absent must be all, none or wait, not %r'
                         % (absent,))
    skip = doc.get('skip', 0)
    if not isinstance(skip, int) or isinstance(skip, bool) or \
            not 0 <= skip <= MAX_SKIP:
        raise BadMessage('skip must be an integer 0-%d, not %r'
                         % (MAX_SKIP, skip))
    port = doc.get('port')
    if port is not None and (not isinstance(port, str) or
                             not _IFNAME.match(port)):
        raise BadMessage('port must be an interface name, not %r' % (port,))
    try:
        digests = [bytes.fromhex(d) for d in after]
    except (TypeError, ValueError):
        raise BadMessage('after holds a digest that is not hex') from None
    if any(len(d) != len(digest(b'')) for d in digests):
        raise BadMessage('a digest must be %d bytes' % len(digest(b'')))
    return Message(op, slot, ident, digests, absent, skip, port)


def answer(doc: dict) -> bytes:
    return json.dumps(doc, sort_keys=True).encode()


@dataclass
class SlotRing:
    """One moving vNIC's frames, oldest first."""
    opened: float
    max_frames: int = DEFAULT_FRAMES
    max_bytes: int = DEFAULT_BYTES
    ring: Deque[Tuple[bytes, bytes]] = field(
        default_factory=collections.deque)
    ring_bytes: int = 0
    held: int = 0                   # frames ever put in the ring
    evicted: int = 0
    released_at: Optional[float] = None
    passed: int = 0                 # sent on after the release
    # A release waiting for its run (absent "wait"): the message, and when
    # it came.
    waiting: Optional[Message] = None
    waiting_since: float = 0.0
    skip_left: int = 0              # frames still to come the guest read
    port: Optional[str] = None      # where they go (Message.port)
    runs_since: Optional[float] = None  # the guest's first frame here
    beat_at: Optional[float] = None     # the controller's last beat

    def hold(self, frame: bytes) -> None:
        self.held += 1
        self.ring_bytes, evicted = hold_bounded(
            self.ring, self.ring_bytes, frame, self.max_frames,
            self.max_bytes)
        self.evicted += evicted

    def after(self, read: Sequence[bytes]) -> Optional[int]:
        """Index of the first frame after where the guest stopped reading:
        after the latest frame whose digest is `read`'s last and whose
        elders hold most of `read`'s others (the run tells repeated frames
        apart); None if the ring holds no frame like `read`'s last.
        `read` empty: the guest read none of the ring.

        Most, not all: a frame one side got and the other did not (a
        switch's queue overflowing on the source or here, under load)
        must not hide the run. Exact, a bench move lost 197 datagrams so
        (issue 42's note)."""
        if not read:
            return 0
        ds = [d for d, _ in self.ring]
        want = len(read) - 1
        best, best_score = None, -1
        for end in range(len(ds) - 1, -1, -1):
            if ds[end] != read[-1]:
                continue
            score = run_score(ds[max(0, end - 2 * want):end], read[:-1])
            if score > best_score:
                best, best_score = end, score
            if score == min(want, end):
                break           # the latest with the whole run before it
        return None if best is None else best + 1


def run_score(elders: Sequence[bytes], run: Sequence[bytes]) -> int:
    """How many of `run` appear among `elders`, in order, gaps allowed
    on both sides (a longest common subsequence of at most 16 x 32)."""
    prev = [0] * (len(run) + 1)
    for d in elders:
        cur = [0]
        for j, r in enumerate(run):
            cur.append(prev[j] + 1 if d == r else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


class HoldRings:
    """Every slot's ring on this host, and what to send for each event:
    `frame()` and `message()` return [(target, bytes)] to send: a port
    name (the guest's port: written to it directly), a slot (back into
    `vw-hold`, tagged) or None (an answer, into `vw-hold`)."""

    def __init__(self, max_slots=MAX_SLOTS, max_frames=DEFAULT_FRAMES,
                 max_bytes=DEFAULT_BYTES, max_age=MAX_AGE,
                 pass_for=PASS_FOR):
        self.slots: Dict[int, SlotRing] = {}
        self.max_slots, self.max_age, self.pass_for = \
            max_slots, max_age, pass_for
        self.max_frames, self.max_bytes = max_frames, max_bytes
        self.refused = 0            # frames for a slot past max_slots
        self.expired = 0            # rings never released, dropped
        self.orphaned = 0           # guest ran, no release: passed on
        self.orphaned_now: List[int] = []   # since the caller last looked

    def frame(self, slot: int, frame: bytes, now: float):
        if not 1 <= slot < ANSWER_SLOT:
            return []               # no slot the controller gives
        r = self._open(slot, now)
        if r is None:
            self.refused += 1
            return []
        if r.released_at is not None:
            r.released_at = now     # passing: kept open while frames come
            if r.skip_left > 0:
                r.skip_left -= 1
                return []
            r.passed += 1
            return [(r.port or slot, frame)]
        r.hold(frame)
        m = r.waiting
        if m is not None and r.ring[-1][0] == m.after[-1] and \
                r.after(m.after) == len(r.ring):
            # The run the guest read ends here: all held was read.
            r.skip_left = m.skip
            return self._released(r, m, now, [], found=True, waited_ms=round(
                (now - r.waiting_since) * 1e3, 1))
        return []

    def _open(self, slot: int, now: float) -> Optional[SlotRing]:
        """The slot's ring, opened if new; None past max_slots."""
        r = self.slots.get(slot)
        if r is None and len(self.slots) < self.max_slots:
            r = self.slots[slot] = SlotRing(now, self.max_frames,
                                            self.max_bytes)
        return r

    def runs(self, slot: int, now: float) -> None:
        """The slot's guest sent a frame on this host: it runs here. A
        release should follow at once (the controller activates the move
        by then); tick() lets frames through if none comes."""
        if not 1 <= slot < ANSWER_SLOT:
            return
        r = self._open(slot, now)
        if r is not None and r.runs_since is None:
            r.runs_since = now

    def message(self, payload: bytes, now: float):
        try:
            m = parse_message(payload)
        except BadMessage as e:
            return [(None, answer({'op': 'error', 'error': str(e)}))]
        if m.op == 'beat':
            # Unanswered: one every BEAT_EVERY per held slot. It opens the
            # slot (as a release does) so that the first frame finds it
            # beaten.
            r = self._open(m.slot, now)
            if r is not None:
                r.beat_at = now
            return []
        base = {'op': m.op + 'd' if m.op != 'drop' else 'dropped',
                'slot': m.slot, 'id': m.ident}
        if m.op != 'release':
            gone = self.slots.pop(m.slot, None)
            return [(None, answer(dict(base, held=gone.held if gone else 0)))]
        # A slot nothing reached yet opens: it passes from now on, within
        # the same bound on slots as frames have.
        r = self._open(m.slot, now)
        if r is None:
            return [(None, answer(dict(base, error='%d slots open '
                                       'already' % self.max_slots)))]
        if r.released_at is not None or r.waiting is not None:
            return [(None, answer(dict(base, error='slot %d was released '
                                       'already' % m.slot)))]
        start = r.after(m.after)
        frames = [f for _, f in r.ring]
        if start is None and m.absent == 'wait' and m.after:
            r.waiting, r.waiting_since = m, now
            return []               # answered when the run comes
        if start is None:
            frames = frames if m.absent == 'all' else []
        else:
            frames = frames[start + m.skip:]
            r.skip_left = max(0, start + m.skip - len(r.ring))
        return self._released(r, m, now, frames, found=start is not None)

    @staticmethod
    def _released(r: SlotRing, m: Message, now: float, frames, **said):
        r.port = m.port
        out = [(m.port or m.slot, f) for f in frames]
        doc = dict({'op': 'released', 'slot': m.slot, 'id': m.ident},
                   delivered=len(out), held=r.held, evicted=r.evicted,
                   **said)
        r.ring.clear()
        r.ring_bytes = 0
        r.released_at, r.waiting = now, None
        return out + [(None, answer(doc))]

    def tick(self, now: float):
        """Releases whose run did not come within WAIT_FOR, and slots
        whose guest has run here for ORPHAN_AFTER with no release: the
        ring is dropped (which of it the guest read is not known: a loss,
        never a duplicate), later frames pass; what to send."""
        out = []
        for slot, r in self.slots.items():
            due = self._orphan_due(r)
            if due is not None and now >= due:
                # No controller said what the guest read: which held
                # frames it had is unknown (a loss, never a duplicate).
                r.ring.clear()
                r.ring_bytes, r.released_at = 0, now
                self.orphaned += 1
                self.orphaned_now.append(slot)
            if r.waiting is not None and now - r.waiting_since >= WAIT_FOR:
                dropped = len(r.ring)
                out += self._released(r, r.waiting, now, [], found=False,
                                      dropped=dropped, waited_ms=round(
                                          (now - r.waiting_since) * 1e3, 1))
        return out

    def next_deadline(self) -> Optional[float]:
        """When tick() next has a release to end, if any."""
        times = [r.waiting_since + WAIT_FOR for r in self.slots.values()
                 if r.waiting is not None]
        times += [t for t in map(self._orphan_due, self.slots.values())
                  if t is not None]
        return min(times) if times else None

    @staticmethod
    def _orphan_due(r: SlotRing) -> Optional[float]:
        """When an unreleased slot whose guest runs passes on its own:
        ORPHAN_AFTER after the guest ran, sooner if its controller beat
        and stopped (BEAT_LOST after the later of its last beat and the
        guest's first frame)."""
        if r.runs_since is None or r.released_at is not None or \
                r.waiting is not None:
            return None
        due = r.runs_since + ORPHAN_AFTER
        if r.beat_at is not None:
            due = min(due, max(r.runs_since, r.beat_at) + BEAT_LOST)
        return due

    def expire(self, now: float) -> List[int]:
        """Slots dropped: a ring not released within max_age of its
        opening or its controller's last beat (its move aborted, or the
        controller lost it), or a released one idle for pass_for. Timed
        from the beat, not the opening alone: a move may take minutes (four
        guests between clouds at once: 60-150 s), and a ring dropped during
        its pause lost every frame of it (ensemble bench, issue 42)."""
        gone = [s for s, r in self.slots.items()
                if (r.released_at is None and
                    now - max(r.opened, r.beat_at or r.opened) > self.max_age)
                or (r.released_at is not None and
                    now - r.released_at > self.pass_for)]
        for s in gone:
            if self.slots.pop(s).released_at is None:
                self.expired += 1
        return gone
