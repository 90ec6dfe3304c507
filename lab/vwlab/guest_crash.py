"""Has a lab guest crashed? Its console says so: the virtio ring broken,
an oops, a kernel BUG or panic. The guest boots with panic=-1, so a panic
reboots it at once and its responder answers again within ~3 s: a new
"ready" line is a crash too, even when the panic scrolled away. Counted,
so that a caller compares before and after (a console keeps old boots).

Why guests crash here: QEMU before 9.0 loses dirty pages when it migrates
a TCG guest (upstream 03bfc2188f, "physmem: Fix migration dirty bitmap
coherency with TCG memory access": the bitmap's fast path cleared bits
without re-arming the TCG TLB's write trap, so a page written after it
was sent is not sent again). Debian 12's QEMU 7.2.22 lacks the fix; the
destination runs with stale pages: list corruption, invalid opcodes, a
broken virtio ring. KVM tracks dirty pages itself and is not affected.
The lab's emulator wrapper keeps guests off that path (their RAM is no
multiple of 256 KiB: guest/qemu-tcg-single); these checks stay, for a
guest started without it and for whatever else breaks a TCG guest.
"""
MARKS = ('Kernel panic', 'BUG:', 'Oops', 'is not a head',
         'general protection fault', 'invalid opcode', 'vw-guest: ready')


def marks(console: str) -> int:
    """How many crash marks (boots included) a console shows."""
    return sum(console.count(m) for m in MARKS)


def crash_lines(console: str):
    """The console's lines that mark a crash (for an error message)."""
    return [line for line in console.splitlines()
            if any(m in line for m in MARKS[:-1])]


class GuestCrashed(AssertionError):
    """The lab's TCG guest crashed after a move (its console says so): what
    its streams lost then says nothing about the network."""


def check_guest(guest, booted: int) -> None:
    """Raise GuestCrashed if the guest's console shows more crash marks
    than `booted` (marks() once it answered)."""
    text = guest.console_text()
    if marks(text) > booted:
        raise GuestCrashed('guest %s crashed: %s' % (
            guest.name, crash_lines(text)[:4]))


class GuestStalled(GuestCrashed):
    """The lab's TCG guest ran nothing for seconds after a move although
    the switch kept handing it datagrams (the captures say so), and its
    console says nothing: seen in CI, 4.5 s until its stream ended, likely
    the same stale pages in a spot that hangs rather than oopses."""


# A silence this long while being handed datagrams is not a busy guest.
STALL_S = 1.0
STALL_HANDED = 20


def stall(frames, taps, windows, min_s=STALL_S, min_handed=STALL_HANDED):
    """(from, seconds, handed) of the longest time after the first RESUME
    that the guest sent nothing on any of its taps while they were handed
    `handed` frames, if over `min_s` with at least `min_handed`; else
    None. frames: every frame captured on the taps (`time host iface
    outgoing`: HostCaptures.frames_on; not only the lost datagrams, whose
    answers are missing by definition); taps:
    {(host, iface)} of all the guest's NICs (one NIC answering is not a
    stall: a wire that fails alone stays the network's); windows: the
    moves' [(stop, src, resume, dst)]. A pause restarts the clock."""
    resumes = sorted(w[2] for w in windows)
    if not resumes:
        return None
    events = sorted((f.time, f.outgoing) for f in frames
                    if (f.host, f.iface) in taps and f.time >= resumes[0])
    best, quiet, handed = None, resumes[0], 0
    for t, into in events:
        if any(w[0] <= t < w[2] for w in windows):
            continue                            # paused: not running at all
        resumed = max(r for r in resumes if r <= t)
        if resumed > quiet:
            quiet, handed = resumed, 0
        if not into:
            quiet, handed = t, 0
            continue
        handed += 1
        gap = t - quiet
        if gap > min_s and handed >= min_handed and (
                best is None or gap > best[1]):
            best = (quiet, gap, handed)
    return best


def check_running(guest, frames, taps, windows):
    """Raise GuestStalled if `stall` finds one."""
    s = stall(frames, taps, windows)
    if s is not None:
        raise GuestStalled(
            'guest %s sent nothing for %.1f s from %.3f (after RESUME) while '
            'its taps were handed %d frames' % (guest.name, s[1], s[0],
                                                   s[2]))
