"""The intent database on a real ovsdb-server: durable, and "a vNIC holds
one wire" enforced by the database even between two writers."""
import time

import pytest

from virtualwire.store import local as local_ovsdb
from virtualwire.store.intent import IntentStore, VnicTaken


@pytest.fixture
def db(tmp_path):
    remote = local_ovsdb.ensure(str(tmp_path))
    yield remote
    local_ovsdb.stop(str(tmp_path))


@pytest.fixture
def stores():
    """IntentStore factory; every store made is stopped afterwards."""
    made = []

    def make(remote):
        made.append(IntentStore(remote).start())
        return made[-1]
    yield make
    for s in made:
        s.stop()


def test_second_writer_cannot_wire_a_taken_vnic(db, stores):
    one, two = stores(db), stores(db)
    w = one.create_wire('a', 'b')
    with pytest.raises(VnicTaken):
        two.create_wire('b', 'c')          # two has not even seen w yet
    assert set(one.wires()) == {w.connector_id}
    one.delete_wire(w.connector_id)
    w2 = two.create_wire('b', 'c')         # freed by the disconnect
    assert w2.end_a == 'b'


def test_wires_outlive_the_client_and_the_server(db, tmp_path, stores):
    s = stores(db)
    w = s.create_wire('x', 'y', connector_id=0xFFFFFFFF)
    local_ovsdb.stop(str(tmp_path))
    import time
    time.sleep(0.3)
    again = stores(local_ovsdb.ensure(str(tmp_path)))
    assert again.wires()[0xFFFFFFFF].ends() == ('x', 'y')
    assert w.connector_id == 0xFFFFFFFF


def test_a_credential_issued_by_one_controller_holds_on_another(
        db, tmp_path, stores):
    """Two controllers of one database: a credential one issues is honoured
    by the other, re-issuing replaces it, revoking ends it for both; the
    database file never holds a token, only its SHA-256."""
    one, two = stores(db), stores(db)
    first, _ = one.credentials.issue('extender', 'xa')

    def holder(store, token, want):
        end = time.time() + 5
        while time.time() < end:
            if store.credentials.holder(token) == want:
                return True
            time.sleep(0.05)
        return False
    assert holder(two, first, ('extender', 'xa'))
    assert [c['name'] for c in two.credentials.list()] == ['xa']
    second, _ = two.credentials.issue('extender', 'xa')
    assert holder(one, first, None)
    assert holder(one, second, ('extender', 'xa'))
    assert one.credentials.revoke('extender', 'xa')
    assert holder(two, second, None)
    assert not two.credentials.revoke('extender', 'xa')
    with open(tmp_path / 'intent.db', 'rb') as f:
        text = f.read()
    assert first.encode() not in text and second.encode() not in text
