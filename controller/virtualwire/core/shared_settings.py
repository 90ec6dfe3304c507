"""Settings every controller instance must share, as OVN keeps its own in
`NB_Global:options`: an active and a standby that read them from one
place (the intent database's Global row) cannot disagree on how a
migration is held or timed out.

Each is also a controller flag. A flag is the instance's fallback for a
setting the row does not hold; the first active instance writes its
flags for those into the row (`seed`), and from then on the row rules.
Changed at run time with `vwctl config set NAME VALUE` (REST: PUT
/v1/settings/NAME), applied by every instance within a second.
Pure: text in, values out.
"""
from dataclasses import dataclass
from typing import Callable, Dict

from virtualwire.core import errors


@dataclass(frozen=True)
class Setting:
    name: str            # the flag's long option, without '--'
    parse: Callable      # text -> value, or errors.Invalid
    help: str


def _number(text, name, low, high, kind=float, unit=''):
    try:
        v = kind(text)
    except (TypeError, ValueError):
        raise errors.Invalid('%s must be a %s%s, not %r' % (
            name, 'whole number' if kind is int else 'number', unit, text))
    if not low <= v <= high:
        raise errors.Invalid('%s must be %s to %s%s, not %s'
                             % (name, low, high, unit, text))
    return v


def _on_off(text, name):
    if text not in ('on', 'off'):
        raise errors.Invalid('%s must be on or off, not %r' % (name, text))
    return text


HOLD_HOSTS = 'hosts'      # hold where the destination keeps a ring


def hold_mode(text):
    """The tables' `hold` for a setting's value: True, False or
    HOLD_HOSTS (pipeline.incremental.IncrementalTables.holds)."""
    return {'on': True, 'off': False}.get(text, HOLD_HOSTS)


def _hold(text):
    if text not in ('on', 'off', HOLD_HOSTS):
        raise errors.Invalid('hold must be on, off or %s, not %r'
                             % (HOLD_HOSTS, text))
    return text


STRICT = 'strict'
TRUST_HOSTS = 'insecure-trust-hosts'


def _placement(text):
    if text not in (STRICT, TRUST_HOSTS):
        raise errors.Invalid('placement must be %s or %s, not %r'
                             % (STRICT, TRUST_HOSTS, text))
    return text


SETTINGS = {s.name: s for s in (
    Setting('placement', _placement,
            'strict: a vNIC is claimed only on the host the cloud placed '
            'it on (vwctl vnics place), and moves only when the cloud or '
            'its source host says so; %s: any host that plugs an '
            'unplaced vNIC takes it (a lab\'s, never a cloud\'s)'
            % TRUST_HOSTS),
    # Whatever the flag takes (any positive number), or a controller
    # started with it could not seed its own value.
    Setting('move-timeout',
            lambda t: _number(t, 'move-timeout', 0.001, float('inf'),
                              unit=' seconds'),
            "cancel a vNIC move not activated by the guest's first frame "
            'within this many seconds'),
    Setting('hold', _hold,
            "hold a moving vNIC's frames for migrations that do not say: "
            'on, off, or %s (where its destination keeps them itself: '
            "vw-host-setup's default, vw-hold)" % HOLD_HOSTS),
    Setting('hold-frames',
            lambda t: _number(t, 'hold-frames', 1, 65536, int),
            'held frames kept per moving vNIC'),
    Setting('hold-bytes',
            lambda t: _number(t, 'hold-bytes', 1500, 64 << 20, int),
            'and at most this many bytes of them'),
    Setting('hold-rate',
            lambda t: _number(t, 'hold-rate', 0, 1000000, int),
            'frames a second above which a move stops holding (0: none)'),
    Setting('copy-log', lambda t: _on_off(t, 'copy-log'),
            "where both hosts of a move keep frames, keep the copies of "
            "what its source tap is handed on that host (vw-frame-hold's "
            'copy log), not in the controller; off: copies to the '
            'controller'),
    Setting('activate-at-stop', lambda t: _on_off(t, 'activate-at-stop'),
            "switch a moving vNIC's delivery to its destination when its "
            "source's agent says QEMU stopped the guest there; off: at the "
            "guest's first frame on the destination"),
    Setting('activation-settle-ms',
            lambda t: _number(t, 'activation-settle-ms', 0, 1000, int),
            "wait after a guest's first frame before the cleanup bundles"),
    Setting('stats-interval',
            lambda t: _number(t, 'stats-interval', 1, 5, unit=' seconds'),
            "read every switch's flow counters this often"),
)}


def parse(name, text):
    """The value of setting `name` from `text`; errors.Invalid (naming
    the setting and what it takes) for an unknown name or a bad value."""
    s = SETTINGS.get(name)
    if s is None:
        raise errors.Invalid('no shared setting %r; there are: %s'
                             % (name, ', '.join(sorted(SETTINGS))))
    if not isinstance(text, str):
        raise errors.Invalid('%s takes its value as a string' % name)
    return s.parse(text)


def from_flags(args):
    """{name: text} of the instance's flags (argparse namespace)."""
    return {n: str(getattr(args, n.replace('-', '_'))) for n in SETTINGS}


def effective(options, flags):
    """{name: (value, source)}: the row's word where it has one (a value
    it holds that no longer parses falls back to the flag, and says so),
    else the instance's flag."""
    out: Dict[str, tuple] = {}
    for n in SETTINGS:
        text = options.get(n)
        if text is not None:
            try:
                out[n] = (parse(n, text), 'intent database')
                continue
            except errors.Invalid as e:
                out[n] = (parse(n, flags[n]), 'flag (database value refused: '
                          '%s)' % e.message)
                continue
        out[n] = (parse(n, flags[n]), 'flag')
    return out


def seed(options, flags):
    """What the first active instance writes: its flags for the settings
    the row does not hold yet."""
    return {n: flags[n] for n in SETTINGS if n not in options}
