"""The pipeline declared as data (Faucet's faucet_pipeline.py is the model).

Every flow the controller computes names a table and a priority declared
here, matches only fields that table allows, uses only its actions and
carries a cookie from a declared cookie space; `check` enforces it, so a
new carrier or end kind cannot slip a flow in that nobody declared.

Today one table does everything: frames enter on a vNIC or a carrier port
and leave on the far end's carrier or port. Ingress checks and delivery
can get tables of their own later; they are declared here first.
"""
from dataclasses import dataclass
from typing import Dict, FrozenSet, Tuple

from virtualwire.core import ids


class PipelineError(ValueError):
    """A flow the pipeline does not allow (a bug in flow computation)."""


@dataclass(frozen=True)
class CookieSpace:
    name: str
    mark: int            # the high bits every cookie of the space carries
    mask: int            # which bits identify the space
    purpose: str


@dataclass(frozen=True)
class Table:
    id: int
    name: str
    priorities: Dict[str, int]          # role -> priority
    match_fields: FrozenSet[str]
    actions: FrozenSet[str]              # action kinds (Flow action[0])
    miss: str                            # what a frame matching nothing gets
    purpose: str

    def priority(self, role: str) -> int:
        return self.priorities[role]


# The low 32 bits of a wire cookie are its connector id; 0 is ours but
# belongs to no wire (table-miss entries and other infrastructure).
COOKIES: Tuple[CookieSpace, ...] = (
    CookieSpace('wire', ids.COOKIE_MARK, ids.COOKIE_MARK_MASK,
                "a wire's flows: one masked request finds them (stats) and "
                "they are told from anyone else's; bits 32-47 say what a "
                "flow's counter counts (core.ids ROLE_*)"),
    CookieSpace('switch', ids.SWITCH_COOKIE_MARK, ids.COOKIE_MARK_MASK,
                "a provider switch's own flows and the MACs it learned: "
                "bits 16-31 its number, 0-15 the port, 32-47 what the "
                "counter counts (core.ids SW_*)"),
)

WIRE = Table(
    id=0, name='wire',
    # 'held' sits under 'wire' so that the flow a destination's learn
    # action adds (at 'wire') is a new flow with its own counter, not the
    # held one modified (its drops would count as deliveries). 'reject'
    # counts carrier frames no wire accepts, apart from the table miss.
    priorities={'activate': 110, 'wire': 100, 'held': 90, 'reject': 1,
                'miss': 0},
    match_fields=frozenset({'in_port', 'vlan_vid', 'tunnel_id',
                            'tun_ipv4_src', 'tun_metadata0'}),
    actions=frozenset({'output', 'set_field', 'learn', 'push_vlan',
                       'pop_vlan', 'resubmit'}),
    miss='drop',
    purpose='frames entering on an end or a carrier port leave towards '
            'the far end (or its host, or into a switch port); anything '
            'else is dropped')

# A provider switch (core.switches) is four tables that a frame walks with
# resubmits, its switch's number in reg4 throughout. A wire delivering to
# a switch port loads the number and the port (reg5) and clears in_port,
# so that a flood may leave by the port the frame came in on (another
# wire on the same carrier port). Registers 4-7 are the switch's; reg1
# is an activation's learn (southbound.openflow).
SWITCH_IN = Table(
    id=1, name='switch-in',
    priorities={'bad-source': 200, 'port': 100},
    match_fields=frozenset({'reg4', 'reg5', 'eth_src'}),
    actions=frozenset({'learn_mac', 'set_field', 'resubmit'}),
    miss='drop',
    purpose="a frame entering a switch port: its source MAC learned for "
            "the port (within the port's limit), then looked up; a "
            "multicast source is dropped (no frame comes from a group)")

SWITCH_MAC = Table(
    id=2, name='switch-mac',
    priorities={'learned': 100},
    match_fields=frozenset({'reg4', 'eth_dst'}),
    actions=frozenset({'set_field'}),
    miss='nothing: the destination stays unknown (reg6 0)',
    purpose="learned MACs: the port (reg6) a destination was last seen "
            "on (a group address is never a source, so broadcast and "
            "multicast stay unknown: flooded)")

SWITCH_FWD = Table(
    id=3, name='switch-forward',
    priorities={'hairpin': 200, 'flood': 150, 'known': 100},
    match_fields=frozenset({'reg4', 'reg5', 'reg6', 'reg7'}),
    actions=frozenset({'set_field', 'resubmit'}),
    miss='drop',
    purpose="an unknown destination floods to every port but the one the "
            "frame came in on (and, from a part of a split switch, to no "
            "other part); a known one goes to its port, never back out of "
            "the port it came in on")

SWITCH_OUT = Table(
    id=4, name='switch-out',
    priorities={'wire': 100},
    match_fields=frozenset({'reg4', 'reg6'}),
    actions=WIRE.actions,
    miss='drop (a port without a wire)',
    purpose="a frame leaving a switch port goes down the port's wire, as "
            "a frame entering a wire end does")

PIPELINE: Tuple[Table, ...] = (WIRE, SWITCH_IN, SWITCH_MAC, SWITCH_FWD,
                               SWITCH_OUT)
BY_ID = {t.id: t for t in PIPELINE}

# Match fields a learn action may write (what OVS's learn can set from
# immediate values), checked like any other flow's.
LEARN_FIELDS = frozenset({'in_port', 'tunnel_id', 'tun_ipv4_src',
                          'tun_metadata0'})


def check(flow) -> None:
    """Raise PipelineError unless `flow` fits the declared pipeline."""
    table = BY_ID.get(flow.table)
    if table is None:
        raise PipelineError('flow in undeclared table %d: %s'
                            % (flow.table, flow))
    if flow.priority not in table.priorities.values():
        raise PipelineError('priority %d is not declared for table %s: %s'
                            % (flow.priority, table.name, flow))
    for name, _value in flow.match:
        if name not in table.match_fields:
            raise PipelineError('table %s does not match on %s: %s'
                                % (table.name, name, flow))
    learns = [a for a in flow.actions if a[0] == 'learn']
    for act in flow.actions:
        if act[0] not in table.actions:
            raise PipelineError('table %s does not allow action %s: %s'
                                % (table.name, act[0], flow))
        if act[0] == 'learn':
            _check_learn(table, act, flow)
        elif act[0] == 'learn_mac':
            _check_learn_mac(act, flow)
        elif act[0] == 'resubmit' and not (
                act[1] in BY_ID and act[1] > table.id):
            # Only onwards: a frame's walk through the tables ends.
            raise PipelineError('resubmit to table %r from %s: %s'
                                % (act[1], table.name, flow))
    # The first learn is the flow's own wire's (a guest's other vNICs'
    # may follow: pipeline.guests).
    if learns and learns[0][2] & ids.COOKIE_WIRE_MASK != \
            flow.cookie & ids.COOKIE_WIRE_MASK:
        raise PipelineError('a learned flow must keep its wire cookie: %s'
                            % flow)
    if not any(flow.cookie & s.mask == s.mark for s in COOKIES):
        raise PipelineError('cookie %#x is in no declared space: %s'
                            % (flow.cookie, flow))


def _check_learn(table, act, flow):
    if len(act) != 5:
        raise PipelineError('learn takes priority, cookie, match, port: %s'
                            % flow)
    _, priority, cookie, match, port = act
    if not isinstance(port, int) or not 0 < port < 0xFF00:
        raise PipelineError('a learned flow outputs to a port, not %r: %s'
                            % (port, flow))
    if priority not in table.priorities.values():
        raise PipelineError('learned priority %d undeclared: %s'
                            % (priority, flow))
    if not any(cookie & s.mask == s.mark for s in COOKIES):
        raise PipelineError('a learned flow needs a wire cookie: %s' % flow)
    for name, _value in match:
        if name not in LEARN_FIELDS:
            raise PipelineError('learn cannot match %s: %s' % (name, flow))


def _check_learn_mac(act, flow):
    """('learn_mac', cookie, port limit, idle timeout): in SWITCH_MAC, at
    'learned', {reg4: the frame's, eth_dst: its eth_src} -> reg6 := the
    frame's reg5 (southbound.openflow writes it as OVS's learn)."""
    if len(act) != 4:
        raise PipelineError('learn_mac takes cookie, limit, idle timeout: '
                            '%s' % flow)
    _, cookie, limit, idle = act
    if cookie & ids.COOKIE_MARK_MASK != ids.SWITCH_COOKIE_MARK:
        raise PipelineError('a learned MAC needs a switch cookie: %s' % flow)
    if not (isinstance(limit, int) and 0 < limit <= 65535 and
            isinstance(idle, int) and 0 < idle <= 65535):
        raise PipelineError('learn_mac limit and idle timeout are 1-65535: '
                            '%s' % flow)


def describe() -> str:
    """The pipeline in words (docs, `--show-pipeline`)."""
    lines = []
    for t in PIPELINE:
        prios = ', '.join('%s=%d' % kv for kv in
                          sorted(t.priorities.items(), key=lambda kv: -kv[1]))
        lines.append('table %d %s: %s (priorities %s; miss: %s)'
                     % (t.id, t.name, t.purpose, prios, t.miss))
    for s in COOKIES:
        lines.append('cookie space %s: %#x/%#x, %s'
                     % (s.name, s.mark, s.mask, s.purpose))
    return '\n'.join(lines)
