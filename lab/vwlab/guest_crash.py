"""Has a lab guest crashed? Its console says so: the virtio ring broken,
an oops, a kernel BUG or panic. The guest boots with panic=-1, so a panic
reboots it at once and its responder answers again within ~3 s: a new
"ready" line is a crash too, even when the panic scrolled away. Counted,
so that a caller compares before and after (a console keeps old boots)."""

MARKS = ('Kernel panic', 'BUG:', 'Oops', 'is not a head',
         'general protection fault', 'invalid opcode', 'vw-guest: ready')


def marks(console: str) -> int:
    """How many crash marks (boots included) a console shows."""
    return sum(console.count(m) for m in MARKS)


def crash_lines(console: str, since: int = 0):
    """The console's lines from character `since` on that mark a crash
    (for an error message)."""
    return [line.strip() for line in console[since:].splitlines()
            if any(m in line for m in MARKS[:-1])]
