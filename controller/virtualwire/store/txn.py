"""Committing through the intent store's IDL client, with one error path."""
import ovs.db.idl

from virtualwire.store.errors import StoreError

_OK = (ovs.db.idl.Transaction.SUCCESS, ovs.db.idl.Transaction.UNCHANGED)


def commit(client, build, what):
    """Run build(txn, idl) and commit; StoreError('<what> failed: ...')."""
    status, txn = client.transact(build)
    if status not in _OK:
        raise StoreError('%s failed: %s (%s)' % (what, status,
                                                 txn.get_error()))


def delete_rows(client, table, match, what):
    """Delete the rows of `table` for which match(row); True if any."""
    found: list = []

    def build(txn, idl):
        found.clear()                # a retry (TRY_AGAIN) starts afresh
        for r in list(idl.tables[table].rows.values()):
            if match(r):
                found.append(r)
                r.delete()

    commit(client, build, what)
    return bool(found)
