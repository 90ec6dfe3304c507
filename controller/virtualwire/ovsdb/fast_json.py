"""A JSON-RPC stream parser for the `ovs` package on the standard
library's C JSON decoder.

Why: the `ovs` package's parser is pure Python and reads one character
at a time (its C extension is not built by pip). Our IDL replica of the
intent database read 10,000 new Wire rows in 1.6 s with it, on the
control path of every batch; this parser finds where each message ends
with one regular-expression pass over its quotes, escapes and brackets,
then hands the whole message to `json.loads` (measured in
`store.wire_writes`' docstring and docs/benchmarks.rst).

Same interface as `ovs.json.Parser` (feed returns how much of its input
it took, is_done, finish returns the value or an error string), so
`ovs.jsonrpc` uses it unchanged once `install()` has run.
"""
import json
import re

import ovs.json

# A token that matters for where a value ends: an escape (two characters,
# so an escaped quote is skipped), a quote, or a bracket.
_TOKENS = re.compile(r'\\.|["{}\[\]]', re.S)


class FastParser:
    def __init__(self, check_trailer=False):
        self.parts = []
        self.depth = 0
        self.in_string = False
        self.done = False
        self.started = False
        # The last input ended inside an escape (a backslash whose
        # character comes with the next input): skip that character.
        self.escaped = False

    def feed(self, s):
        if self.done:
            return 0
        if not self.started:
            stripped = s.lstrip()
            if not stripped:
                self.parts.append(s)
                return len(s)
            self.started = True
        start = 1 if self.escaped else 0
        self.escaped = False
        last = start
        for m in _TOKENS.finditer(s, start):
            last = m.end()
            tok = m.group()
            if tok[0] == '\\':
                continue
            if tok == '"':
                self.in_string = not self.in_string
            elif not self.in_string:
                self.depth += 1 if tok in '{[' else -1
                if self.depth == 0:
                    self.parts.append(s[:m.end()])
                    self.done = True
                    return m.end()
        # A backslash no token took ends this input: its character is the
        # next input's first.
        self.escaped = last < len(s) and s.endswith('\\')
        self.parts.append(s)
        return len(s)

    def is_done(self):
        return self.done

    def finish(self):
        text = ''.join(self.parts)
        try:
            return json.loads(text)
        except ValueError as e:
            if not text.strip():
                return 'empty input stream'
            return 'syntax error: %s' % e


def install():
    """Make every `ovs` JSON-RPC connection of this process use it."""
    if ovs.json.PARSER != ovs.json.PARSER_C:
        ovs.json.Parser = FastParser
