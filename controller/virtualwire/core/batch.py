"""Many wire changes in one call (pure): `POST /v1/wires/batch`
{"create": [{"a", "b"}, ...], "delete": [connector id, ...]}.

All or nothing: every item is checked before anything is written, and
the whole batch is one intent transaction. A refusal names every item
that is wrong (its list, index and why) and changes nothing. At most
MAX_ITEMS items per call (413 beyond: split it).
"""
from typing import List, Optional, Tuple

from virtualwire.core import errors, ids

MAX_ITEMS = 10000


class ItemsRefused(errors.VwError):
    """Some items of a batch are wrong: `items` says which and why; the
    batch's status is its first item's (`kind`, a domain error class)."""

    def __init__(self, items, total):
        self.items = items
        self.kind = items[0]['kind']
        super().__init__('%d of %d items refused; nothing was changed'
                         % (len(items), total))

    def view(self):
        return [{k: v for k, v in i.items() if k != 'kind'}
                for i in self.items]


def item_error(op, index, exc):
    return {'op': op, 'index': index, 'kind': type(exc),
            'message': exc.message}


def parse(doc) -> Tuple[List[Tuple[str, str]], List[int]]:
    """(pairs to connect, connector ids to remove), checked item by item
    for what can be known without the state: shapes, ids, an end twice in
    one batch, an id twice."""
    unknown = sorted(set(doc) - {'create', 'delete'})
    if unknown:
        raise errors.Malformed('unknown field(s): %s (expected "create" '
                               'and/or "delete")' % ', '.join(unknown))
    creates, deletes = doc.get('create', []), doc.get('delete', [])
    if not isinstance(creates, list) or not isinstance(deletes, list):
        raise errors.Malformed('"create" must be a list of {"a", "b"} and '
                               '"delete" a list of connector ids')
    total = len(creates) + len(deletes)
    if total == 0:
        raise errors.Malformed('an empty batch: give "create" and/or '
                               '"delete" items')
    if total > MAX_ITEMS:
        raise errors.TooLarge('a batch of %d items: at most %d per call'
                              % (total, MAX_ITEMS))
    bad: list = []
    pairs: List[Optional[Tuple[str, str]]] = []
    seen: dict = {}
    for i, item in enumerate(creates):
        try:
            pairs.append(_pair(item))
        except errors.VwError as e:
            bad.append(item_error('create', i, e))
            pairs.append(None)
            continue
        for end in item['a'], item['b']:
            if end in seen:
                bad.append(item_error('create', i, errors.Conflict(
                    '%s is also an end of create item %d' % (end,
                                                             seen[end]))))
            seen.setdefault(end, i)
    cids: List[int] = []
    first: dict = {}
    for i, raw in enumerate(deletes):
        try:
            cid = ids.parse_connector_id(raw)
        except errors.VwError as e:
            bad.append(item_error('delete', i, e))
            continue
        if cid in first:
            bad.append(item_error('delete', i, errors.Invalid(
                'connector %s is also delete item %d'
                % (ids.fmt_connector(cid), first[cid]))))
            continue
        first[cid] = i
        cids.append(cid)
    if bad:
        raise ItemsRefused(bad, total)
    return [p for p in pairs if p is not None], cids


def _pair(item) -> Tuple[str, str]:
    if not isinstance(item, dict) or set(item) != {'a', 'b'}:
        raise errors.Malformed('an item to create is {"a": end, "b": end}')
    ids.check_wire_ends(item['a'], item['b'])
    return item['a'], item['b']


def refuse(found, total: int) -> Optional[ItemsRefused]:
    """The refusal for items found wrong against the state (None if
    none were)."""
    return ItemsRefused(found, total) if found else None
