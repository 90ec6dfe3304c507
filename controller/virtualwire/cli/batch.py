"""`vwctl batch FILE`: many wires connected and disconnected in one call
(`POST /v1/wires/batch`: one transaction, all or nothing), then waited for
until every connected switch holds them. FILE ('-': stdin) has one change
per line: `A B` connects A and B, `-ID` disconnects connector ID; `#`
starts a comment. Up to 10,000 changes per call: a longer file is sent in
chunks, each all or nothing, with progress."""
import sys
import time

from virtualwire.cli.client import CliError
from virtualwire import config_file

CHUNK = 10000


def read_changes(lines):
    """[(kind, value, line number)] from the file's lines; CliError names
    a bad line."""
    out = []
    for n, raw in enumerate(lines, 1):
        line = raw.split('#', 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) == 1 and parts[0].startswith('-'):
            out.append(('delete', parts[0][1:], n))
        elif len(parts) == 2:
            out.append(('create', {'a': parts[0], 'b': parts[1]}, n))
        else:
            raise CliError('line %d: expected "A B" or "-ID", got %r'
                           % (n, line))
    if not out:
        raise CliError('no changes in the file')
    return out


def _body(chunk):
    body: dict = {}
    for kind, v, _n in chunk:
        body.setdefault(kind, []).append(
            int(v, 0) if kind == 'delete' and v[:2] in ('0x', '0X') or
            kind == 'delete' and v.isdigit() else v)
    return body


def _line(chunk, item):
    """The file line of a refused item (its index among its kind)."""
    of_kind = [n for kind, _v, n in chunk if kind == item.get('op')]
    i = item.get('index', -1)
    return of_kind[i] if 0 <= i < len(of_kind) else 0


def cmd_batch(c, a):
    if a.file == '-':
        changes = read_changes(sys.stdin)
    else:
        try:
            with open(a.file) as f:
                changes = read_changes(f)
        except OSError as e:
            raise CliError('cannot read %s: %s' % (a.file, e.strerror))
    done: dict = {'created': [], 'deleted': [], 'chunks': 0}
    t0 = time.monotonic()
    for i in range(0, len(changes), CHUNK):
        chunk = changes[i:i + CHUNK]
        try:
            doc = c.call('POST', '/v1/wires/batch?wait=programmed&'
                         'timeout=%g' % a.timeout, _body(chunk),
                         timeout=a.timeout + 30)
        except CliError as e:
            raise CliError('changes %d-%d: %s%s%s' % (
                i + 1, i + len(chunk), e, '' if i == 0 else
                ' (the %d before were made)' % i,
                ''.join('\n  line %d: %s' % (_line(chunk, it), it['message'])
                        for it in e.items))) from None
        done['created'] += doc['created']
        done['deleted'] += doc['deleted']
        done['chunks'] += 1
        done['programmed'] = doc['programmed']
        if len(changes) > CHUNK:
            print('%d/%d changes programmed (%.1f s)' % (
                i + len(chunk), len(changes), time.monotonic() - t0),
                file=sys.stderr, flush=True)
    p = done['programmed']
    text = ('connected %d, disconnected %d wire(s); on every connected '
            'switch (%d) after %.2f s' % (
                len(done['created']), len(done['deleted']),
                p['switches_confirmed'], time.monotonic() - t0))
    if p['not_connected']:
        text += '; not connected, so not yet there: %s' % ', '.join(
            p['not_connected'])
    return done, text



def add_parser(sub):
    s = sub.add_parser('batch', help='connect and disconnect many wires in '
                       'one call (lines "A B" and "-ID"), all or nothing')
    s.add_argument('file', help="the changes, one per line ('-': stdin)")
    s.add_argument('--timeout', type=config_file.seconds(0, 300, above=True),
                   default=60.0,
                   metavar='SECONDS',
                   help='seconds to wait for the switches (default 60)')
    s.set_defaults(fn=cmd_batch)
