"""The collector's durable counter base as many small rows, not one.

One row per wire (its identity and counts) and one per host (its flows'
last readings and its own counts), in the `Counters` table keyed by
`name`. A save writes only the rows whose text changed since the last
one, so a flow removed on one host rewrites that host's row and its
wires', not every counter of the fleet (what one global row cost: tens of
MB per write at 400k flows, replicated by RAFT in production).

Pure: `rows(snapshot)` and `snapshot(rows)` convert between the collector's
snapshot (`metrics.counters.Counters.snapshot`) and {name: text}; `changes`
says what to write.
"""
import json
from typing import Dict, List, Tuple

OLD = 'flows'           # before schema 1.8.0: the whole snapshot in one row
WIRE, HOST = 'wire:', 'host:'


def rows(snap) -> Dict[str, str]:
    out = {}
    for cid, value in snap.get('wires', {}).items():
        out[WIRE + str(cid)] = _text(value)
    hosts = set(snap.get('seen', {})) | set(snap.get('hosts', {}))
    for h in hosts:
        out[HOST + h] = _text({'seen': snap.get('seen', {}).get(h, []),
                               'counts': snap.get('hosts', {}).get(h, {})})
    return out


def snapshot(texts: Dict[str, str]):
    """The snapshot the rows hold (an old single row is read as it was),
    or None if there are none. Unreadable rows are skipped (a wire's
    counts then start again from its flows' own counters)."""
    if not texts:
        return None
    if OLD in texts and len(texts) == 1:
        return json.loads(texts[OLD])
    snap: dict = {'seen': {}, 'wires': {}, 'hosts': {}}
    for name, text in texts.items():
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if name.startswith(WIRE):
            snap['wires'][name[len(WIRE):]] = value
        elif name.startswith(HOST):
            h = name[len(HOST):]
            snap['seen'][h] = value.get('seen', [])
            snap['hosts'][h] = value.get('counts', {})
    return snap


def changes(written: Dict[str, str], now: Dict[str, str]
            ) -> Tuple[List[Tuple[str, str]], List[Tuple[str, str]],
                       List[str]]:
    """(rows to insert, rows to update, names to delete), each [(name,
    text)] or [name], to go from `written` to `now`."""
    insert = [(n, t) for n, t in sorted(now.items()) if n not in written]
    update = [(n, t) for n, t in sorted(now.items())
              if n in written and written[n] != t]
    delete = sorted(n for n in written if n not in now)
    return insert, update, delete


def _text(value):
    return json.dumps(value, separators=(',', ':'), sort_keys=True)
