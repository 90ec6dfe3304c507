"""The intent database on a real ovsdb-server: durable, and "a vNIC holds
one wire" enforced by the database even between two writers."""
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
