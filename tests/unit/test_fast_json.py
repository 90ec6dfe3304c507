"""The JSON-RPC stream parser (southbound.fast_json) against the standard
library: messages cut at every possible place, including inside escapes
and strings holding brackets, come out as json.loads reads them."""
import json
import random

from virtualwire.ovsdb.fast_json import FastParser

MESSAGES = [
    {'id': 1, 'result': {'Interface': {'u1': {'new': {
        'name': 'a\\"b', 'external_ids': ['map', [
            ['k', 'v\\\\'], ['x', '{[}]"'], ['u', '\u00e9\\u0041']]]}}}}},
    {'method': 'echo', 'params': [], 'id': 'echo'},
    {'id': None, 'method': 'update', 'params': [None, {'T': {}}]},
]


def messages(chunks):
    out, p, buf = [], FastParser(), ''
    for c in chunks:
        buf += c
        while buf:
            buf = buf[p.feed(buf):]
            if not p.is_done():
                break
            out.append(p.finish())
            p = FastParser()
    return out


def test_every_cut_of_the_stream_gives_the_same_messages():
    text = '\n'.join(json.dumps(m) for m in MESSAGES)
    for cut in range(1, len(text)):
        assert messages([text[:cut], text[cut:]]) == MESSAGES, cut
    rng = random.Random(7)
    for _ in range(500):
        cuts = sorted(rng.sample(range(1, len(text)), 8))
        chunks = [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)])]
        assert messages(chunks) == MESSAGES, chunks


def test_values_and_a_truncated_message_say_what_they_are():
    for text in ('{"a": [1, 2.5, true, null, "x"]}', '"just a string"', '7'):
        p = FastParser()
        p.feed(text)
        assert p.finish() == json.loads(text), text
    p = FastParser()
    p.feed('{"a": ')
    assert 'syntax error' in p.finish()
