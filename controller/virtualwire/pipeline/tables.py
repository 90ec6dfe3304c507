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
                       'pop_vlan'}),
    miss='drop',
    purpose='frames entering on an end or a carrier port leave towards '
            'the far end (or its host); anything else is dropped')

PIPELINE: Tuple[Table, ...] = (WIRE,)
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
