"""Which WireGuard public key an extender's peers are given (pure).

An agent reports its public key with its token (`control.extenders`). A
token alone used to be enough to replace the key, and peers adopted it
at once: a stolen token read the peers' traffic. Now a key is taken only
when two channels agree:

- the report (the extender's token), and
- the extender's own OVSDB (`external_ids:vw-public-key`, written there
  by its agent), which the controller reads over TLS from the host's
  recorded address and believes only under a certificate naming it
  (`control.admission`).

So replacing the key needs the extender's certificate and its OVSDB, not
just its token. A key change the operator did not ask for (`rotate-key`)
is taken at most once per CHANGE_GAP (an agent reinstalled makes a new
key; a thief holding the host itself cannot make peers flap keys). Every
change is logged, counted and audited; a report whose key its OVSDB does
not confirm within CONFIRM_GRACE (the two channels race by a report or
two during a legitimate rotation) is refused and alarms, and the peers
keep the key they have.

What this does not stop: whoever controls the extender machine itself
(its certificate, its OVSDB and its token) is the extender.
"""
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

CHANGE_GAP = 60.0
CONFIRM_GRACE = 3.0
MAX_WAITING = 1024      # unconfirmed keys remembered (a token's flood)


@dataclass(frozen=True)
class KeyEvent:
    kind: str               # 'changed' | 'refused'
    old: Optional[str]
    new: str
    why: str = ''


@dataclass
class ExtenderKeys:
    accepted: Dict[str, str] = field(default_factory=dict)
    changed_at: Dict[str, float] = field(default_factory=dict)
    # (extender, key) -> when its report first carried that key unconfirmed
    waiting: Dict[Tuple[str, str], float] = field(default_factory=dict)
    refused: set = field(default_factory=set)     # alarmed once each

    def take(self, name: str, reported: str, published: str, now: float,
             asked: bool) -> Tuple[Optional[str], Optional[KeyEvent]]:
        """The key peers are given after this report (None: none yet),
        and what happened, if anything worth an alarm or the audit log.
        `published`: the key the extender's OVSDB shows; `asked`: the
        operator asked this extender for a new key."""
        old = self.accepted.get(name)
        if reported == old:
            return old, None
        if reported != published:
            if len(self.waiting) >= MAX_WAITING:
                self.prune(now, keep=0.0)
            since = self.waiting.setdefault((name, reported), now)
            if now - since < CONFIRM_GRACE or (name, reported) in \
                    self.refused:
                return old, None
            self.refused.add((name, reported))
            return old, KeyEvent('refused', old, reported, (
                'extender %s reports public key %s, which its own OVSDB '
                '(read under its certificate) does not show (%s): not '
                'given to its peers' % (name, reported,
                                        published or 'no key')))
        if old is not None and not asked and \
                now - self.changed_at.get(name, -CHANGE_GAP) < CHANGE_GAP:
            if (name, reported) in self.refused:
                return old, None
            self.refused.add((name, reported))
            return old, KeyEvent('refused', old, reported, (
                'extender %s changed its key %.0f s ago; a change not '
                'asked for (vwctl extenders rotate-key) is taken at most '
                'once per %.0f s' % (name, now - self.changed_at[name],
                                     CHANGE_GAP)))
        self.accepted[name] = reported
        self.changed_at[name] = now
        self.waiting.pop((name, reported), None)
        self.refused.discard((name, reported))
        return reported, KeyEvent('changed', old, reported,
                                  'asked by the operator' if asked else
                                  'first key' if old is None else
                                  'not asked for')

    def prune(self, now, keep=600.0):
        """Forget keys last seen unconfirmed long ago (bounded memory)."""
        for k in [k for k, t in self.waiting.items() if now - t > keep]:
            del self.waiting[k]
            self.refused.discard(k)
