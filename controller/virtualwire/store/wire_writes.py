"""Writing wires: one raw OVSDB transaction per batch (`store.rawrpc`:
the standard library's JSON), then waiting until our own replica has
the change, so a caller that asks the control loop next sees its write.

Why not an IDL transaction: building 30,000 rows through the `ovs`
package's Python IDL took 2.0 s and committing 1.1 s for a batch of
10,000 wires, before the pure-Python parser read the same rows back
(7.1 s in all, measured). The Binding table (a unique index on vNIC: "a
vNIC holds one wire", enforced by the database whoever writes) is written
here and never monitored: nothing reads it but the conflict path.
"""
import datetime
import logging
import time

from virtualwire.core import ids
from virtualwire.core.model import Wire
from virtualwire.ovsdb import rawrpc
from virtualwire.store.errors import StoreError, VnicTaken

LOG = logging.getLogger(__name__)
DB_NAME = 'VirtualWire'
SEEN_TIMEOUT = 60.0
BULK = 1000         # changes from which their cost is logged (batches)
# Deletions from which rows are found once and deleted by _uuid: ovsdb-server
# 3.1 looks up only "_uuid ==" without a scan; "connector_id ==" scanned
# the Wire and Binding tables for each wire (1,000 deletions at 100,000
# wires took 59 s). Below it, the two scans per wire cost less than one
# read of both tables.
BULK_DELETE = 64


def now():
    return datetime.datetime.now(datetime.timezone.utc) \
        .isoformat(timespec='seconds')


def ops_for(pairs, chosen, cids, created, rows=None):
    """The transaction. `rows`: {table: {connector id: [row uuids]}} to
    delete by uuid (`rows_of`); without it, by connector id."""
    ops: list = []
    for cid in cids:
        for table in ('Wire', 'Binding'):
            if rows is None:
                ops.append({'op': 'delete', 'table': table,
                            'where': [['connector_id', '==', cid]]})
            else:
                ops += [{'op': 'delete', 'table': table,
                         'where': [['_uuid', '==', ['uuid', u]]]}
                        for u in rows[table].get(cid, ())]
    for cid, (a, b) in zip(chosen, pairs):
        ops.append({'op': 'insert', 'table': 'Wire', 'row': {
            'connector_id': cid, 'end_a': a, 'end_b': b,
            'created_at': created}})
        for v in (a, b):
            ops.append({'op': 'insert', 'table': 'Binding',
                        'row': {'vnic': v, 'connector_id': cid}})
    return ops


# rows_of reads the id space in this many slices, each only if a wire to
# delete is in it: read whole, 300,000 rows' JSON held 150 MB at once.
SLICES = 32


def rows_of(remote, cids):
    """{table: {connector id: [row uuids]}} of the Wire and Binding rows of
    `cids`: per slice of the connector id space holding one of them, one
    transaction selecting that slice of both tables (a scan of each in
    ovsdb-server; what comes back is that slice only)."""
    want = set(cids)
    out: dict = {'Wire': {}, 'Binding': {}}
    step = (1 << 32) // SLICES
    for lo in sorted({c // step * step for c in want}):
        # Bounds within the column's range (1 to 2**32 - 1) or it refuses.
        where = [['connector_id', '>=', max(lo, 1)],
                 ['connector_id', '<=', lo + step - 1]]
        res = rawrpc.transact(remote, DB_NAME, [
            {'op': 'select', 'table': t, 'where': where,
             'columns': ['_uuid', 'connector_id']}
            for t in ('Wire', 'Binding')])
        for table, r in zip(('Wire', 'Binding'), res):
            for row in r['rows']:
                if row['connector_id'] in want:
                    out[table].setdefault(row['connector_id'], []).append(
                        row['_uuid'][1])
    return out


def taken_by(remote, vnics):
    """{vNIC: connector} of those of `vnics` the database has wired."""
    want = set(vnics)
    [res] = rawrpc.transact(remote, DB_NAME, [{
        'op': 'select', 'table': 'Binding', 'where': [],
        'columns': ['vnic', 'connector_id']}])
    return {r['vnic']: r['connector_id'] for r in res['rows']
            if r['vnic'] in want}


def refusal(taken):
    return VnicTaken('; '.join('vNIC %s is already wired (connector %s)'
                               % (v, ids.fmt_connector(c))
                               for v, c in sorted(taken.items())))


def write(store, pairs, cids, connector_ids=None):
    """Insert a wire per (a, b) and delete the wires `cids` in one
    transaction: all or nothing. Returns the Wires made, once our replica
    has them. Raises VnicTaken (the vNICs wired already), StoreError."""
    created = now()
    remote = store.client.remote
    t0 = time.perf_counter()
    # Read once: a retry (another writer drew the same id) deletes the
    # same rows.
    rows = rows_of(remote, cids) if len(cids) >= BULK_DELETE else None
    for _ in range(16):
        # Drawn against the replica's rows themselves: a copy of their ids
        # cost every single connect O(wires) (100,000 keys at scale).
        with store.replica.lock:
            chosen = list(connector_ids) if connector_ids else \
                store.draw_ids(len(pairs), store.replica.table.rows)
        try:
            rawrpc.transact(remote, DB_NAME,
                            ops_for(pairs, chosen, cids, created, rows),
                            timeout=SEEN_TIMEOUT)
        except StoreError:
            # Which constraint failed is read from the rows, not the text.
            taken = taken_by(remote, [v for p in pairs for v in p])
            taken = {v: c for v, c in taken.items() if c not in cids}
            if taken:
                raise refusal(taken) from None
            with store.replica.lock:
                collided = set(chosen) & set(store.replica.table.rows)
            if connector_ids or not collided:
                raise
            continue                 # another writer drew the same id
        t1 = time.perf_counter()
        await_replica(store, chosen, cids)
        store.flush()
        if len(pairs) + len(cids) >= BULK:
            LOG.info('intent: %d wires made, %d deleted: written in %.0f '
                     'ms, seen back %.0f ms later', len(pairs), len(cids),
                     (t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3)
        return [Wire(cid, a, b, created) for cid, (a, b) in zip(chosen,
                                                                pairs)]
    raise StoreError('could not allocate connector ids')


def await_replica(store, made, gone):
    """Until our replica has the wires made and not the ones gone (the
    database sends them to it after answering us)."""
    end = time.monotonic() + SEEN_TIMEOUT
    replica = store.replica
    ran = replica.ran                # set each time its pump has read
    while True:
        with replica.lock:
            ran.clear()
            rows = replica.table.rows
            if all(c in rows for c in made) and \
                    not any(c in rows for c in gone):
                return
        if time.monotonic() > end:
            raise StoreError('the intent database took the change but did '
                             'not show it back within %gs' % SEEN_TIMEOUT)
        ran.wait(0.05)
