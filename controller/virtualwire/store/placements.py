"""The cloud's word on where each vNIC runs (`core.placement.Word`), in
the intent database's VnicPlacement table (schema 1.13.0), written by
the operator or an orchestrator credential and read by every
controller instance from the IDL's replica (`control.placement_watch`)."""
from virtualwire.core import errors
from virtualwire.core.enrolment import check_name
from virtualwire.core.ids import check_vnic_id
from virtualwire.core.placement import Word, next_word
from virtualwire.store import txn as store_txn

TABLE = 'VnicPlacement'


class PlacementStore:
    def __init__(self, client):
        self.client = client

    def available(self):
        return TABLE in self.client.idl.tables

    def _need(self):
        if not self.available():
            raise errors.Unavailable(
                'the intent database predates vNIC placement (schema '
                '1.13.0): upgrade it with `virtualwire-intent-db upgrade`')

    def words(self):
        """{vnic: Word} as the replica holds it now."""
        if not self.available():
            return {}
        with self.client.lock:
            return {r.vnic: _word(r)
                    for r in self.client.idl.tables[TABLE].rows.values()}

    def place(self, vnic, host, by, now):
        """`vnic` runs on `host` from now on. Moved from another host, that
        host stays allowed until the guest has left it (a live
        migration). Returns the Word written."""
        self._need()
        check(vnic, host)
        out = {}

        def build(txn, idl):
            rows = [r for r in idl.tables[TABLE].rows.values()
                    if r.vnic == vnic]
            row = rows[0] if rows else txn.insert(idl.tables[TABLE])
            word = next_word(_word(row) if rows else None, host)
            row.vnic, row.host = vnic, host
            row.previous = [word.previous] if word.previous else []
            row.placed_at, row.by = now, by
            out['word'] = word

        store_txn.commit(self.client, build, 'placing a vNIC')
        return out['word']

    def forget(self, vnic):
        """The cloud no longer says where `vnic` runs. True if it did."""
        self._need()
        return store_txn.delete_rows(self.client, TABLE,
                                     lambda r: r.vnic == vnic,
                                     'forgetting a vNIC placement')


def _word(row):
    return Word(row.host, row.previous[0] if row.previous else None)


def check(vnic, host):
    """Invalid, saying which, unless both are names we take."""
    check_vnic_id(vnic)
    check_name(host)
