"""The intent database's Global row: the settings every controller
instance shares (`core.shared_settings`), as OVN's `NB_Global:options`."""
from virtualwire.core import errors
from virtualwire.store import txn as store_txn


class SettingsStore:
    def __init__(self, client):
        self.client = client

    def available(self):
        """False against a database older than schema 1.12.0 (a controller
        upgraded first): the instance then runs on its flags alone."""
        return 'Global' in self.client.idl.tables

    def options(self):
        """{name: text} the row holds ({} without a row)."""
        if not self.available():
            return {}
        with self.client.lock:
            rows = list(self.client.idl.tables['Global'].rows.values())
            return dict(rows[0].options) if rows else {}

    def update(self, changes):
        """Set {name: text} in the row (made if missing), verified against
        a concurrent writer (the IDL retries on a conflict)."""
        if not self.available():
            raise errors.Unavailable(
                'the intent database predates shared settings (schema '
                '1.12.0): upgrade it with `virtualwire-intent-db upgrade`')

        def build(txn, idl):
            rows = list(idl.tables['Global'].rows.values())
            if rows:
                row = rows[0]
                row.verify('options')
                opts = dict(row.options)
            else:
                row, opts = txn.insert(idl.tables['Global']), {}
            opts.update(changes)
            row.options = opts

        store_txn.commit(self.client, build, 'storing shared settings')
