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
    first = one.credentials.issue('extender', 'xa')[0]

    def holder(store, token, want):
        end = time.time() + 5
        while time.time() < end:
            if store.credentials.holder(token) == want:
                return True
            time.sleep(0.05)
        return False
    assert holder(two, first, ('extender', 'xa'))
    assert [c['name'] for c in two.credentials.list()] == ['xa']
    second = two.credentials.issue('extender', 'xa')[0]
    assert holder(one, first, None)
    assert holder(one, second, ('extender', 'xa'))
    assert one.credentials.revoke('extender', 'xa')
    assert holder(two, second, None)
    assert not two.credentials.revoke('extender', 'xa')
    with open(tmp_path / 'intent.db', 'rb') as f:
        text = f.read()
    assert first.encode() not in text and second.encode() not in text


def test_counters_are_saved_as_rows_and_only_changed_ones_are_written(
        db, stores):
    """The collector's counter base: a row per wire and per host, each
    save writing only what changed (not one row of everything); a base
    saved in the old single row is read, and replaced by rows."""
    import json
    from virtualwire.ovsdb import rawrpc
    from virtualwire.store.runtime import RuntimeStore
    rt = RuntimeStore(stores(db).client)

    def names():
        [res] = rawrpc.transact(db, 'VirtualWire', [
            {'op': 'select', 'table': 'Counters', 'where': [],
             'columns': ['name']}])
        return sorted(r['name'] for r in res['rows'])
    wires = {str(c): ['a%d|b%d' % (c, c), {'1': [c, 10 * c]}]
             for c in range(1, 201)}
    snap = {'seen': {'h1': [[[0, 100, [['in_port', 3]]], 7, 5, 50]]},
            'wires': wires, 'hosts': {'h1': {'4': [1, 2]}}}
    # An old controller's single row first.
    rawrpc.transact(db, 'VirtualWire', [
        {'op': 'insert', 'table': 'Counters',
         'row': {'name': 'flows', 'snapshot': json.dumps(snap)}}])
    assert rt.counters() == snap
    first = rt._save_counters(snap)
    assert names() == sorted(['host:h1'] + ['wire:%d' % c
                                            for c in range(1, 201)])
    assert rt.counters() == snap
    # One wire moved on: one row, a few dozen bytes, is written.
    wires['7'] = ['a7|b7', {'1': [8, 80]}]
    again = rt._save_counters(snap)
    assert 0 < again < first / 100, (again, first)
    assert rt.counters()['wires']['7'] == ['a7|b7', {'1': [8, 80]}]
    # A wire gone: its row goes; nothing changed: nothing is written.
    del wires['9']
    rt._save_counters(snap)
    assert 'wire:9' not in names() and len(names()) == 200
    assert rt._save_counters(snap) == 0


def test_a_hosts_state_is_a_row_per_vnic_and_a_plug_writes_one(db, stores):
    """save_host writes the host's row and one row per vNIC; plugging or
    unplugging one vNIC of 300 writes one row; a restart reads the same
    host back; a snapshot from before the rows (vNICs inside) still
    reads, and is then split."""
    from virtualwire.core.model import Encap, Host, VnicPort, host_to_json
    from virtualwire.ovsdb import rawrpc
    from virtualwire.store.runtime import RuntimeStore

    def make(n, name='h1'):
        return Host(name, 1, (Encap('gre', '198.19.0.1', 4),), vnics=tuple(
            VnicPort('v%03d' % i, 'vnet%d' % i, i + 1) for i in range(n)))
    rt = RuntimeStore(stores(db).client)
    assert rt._save_host(make(300)) == 301
    assert rt._save_host(make(301)) == 1
    assert rt._save_host(make(300)) == 1
    assert rt._save_host(make(300)) == 0
    again = RuntimeStore(stores(db).client)
    assert again.hosts() == {'h1': make(300)}
    rawrpc.transact(db, 'VirtualWire', [
        {'op': 'insert', 'table': 'Host',
         'row': {'name': 'old', 'snapshot': host_to_json(make(3, 'old'))}}])
    assert again.hosts()['old'] == make(3, 'old')
    assert again._save_host(make(3, 'old')) == 4     # split into rows
    assert RuntimeStore(stores(db).client).hosts()['old'] == make(3, 'old')
    # Each vNIC's row holds its fields as typed columns.
    [res] = rawrpc.transact(db, 'VirtualWire', [
        {'op': 'select', 'table': 'HostVnic',
         'where': [['host', '==', 'h1'], ['vnic', '==', 'v007']],
         'columns': ['port', 'port_name', 'ofport', 'mac', 'vm_id']}])
    assert res['rows'] == [{'port': '', 'port_name': 'vnet7', 'ofport': 8,
                            'mac': '', 'vm_id': ''}]
    # A vNIC row written before those columns (its vNIC as JSON text)
    # reads the same, and the next save rewrites it typed.
    import json
    from dataclasses import asdict
    two = make(2, 'older')
    rawrpc.transact(db, 'VirtualWire', [
        {'op': 'insert', 'table': 'Host', 'row': {
            'name': 'older', 'snapshot': host_to_json(make(0, 'older'))}}] + [
        {'op': 'insert', 'table': 'HostVnic', 'row': {
            'host': 'older', 'vnic': v.vnic_id,
            'port': json.dumps(asdict(v))}} for v in two.vnics])
    third = RuntimeStore(stores(db).client)
    assert third.hosts()['older'] == two
    assert third._save_host(two) == 2
    [res] = rawrpc.transact(db, 'VirtualWire', [
        {'op': 'select', 'table': 'HostVnic',
         'where': [['host', '==', 'older']],
         'columns': ['vnic', 'port', 'port_name', 'ofport']}])
    assert sorted((r['vnic'], r['port'], r['port_name'], r['ofport'])
                  for r in res['rows']) == [('v000', '', 'vnet0', 1),
                                            ('v001', '', 'vnet1', 2)]
    assert RuntimeStore(stores(db).client).hosts()['older'] == two


def test_a_bulk_deletion_removes_exactly_its_wires_rows(db, stores):
    """From BULK_DELETE deletions on, rows are found once and deleted by
    uuid (ovsdb-server scans for any other condition): the wires deleted
    lose their Wire and Binding rows (their vNICs can be wired again),
    every other wire keeps both."""
    from virtualwire.store import wire_writes
    from virtualwire.ovsdb import rawrpc
    s = stores(db)
    n = wire_writes.BULK_DELETE + 36
    made = s.apply_batch([('a%d' % i, 'b%d' % i) for i in range(n)], [])
    gone, kept = made[:n - 10], made[n - 10:]
    s.apply_batch([], [w.connector_id for w in gone])
    assert set(s.wires()) == {w.connector_id for w in kept}
    [wires, bindings] = rawrpc.transact(db, 'VirtualWire', [
        {'op': 'select', 'table': t, 'where': [],
         # _uuid too: a select of other columns only answers distinct rows
         'columns': ['_uuid', 'connector_id']} for t in ('Wire', 'Binding')])
    assert sorted(r['connector_id'] for r in wires['rows']) == \
        sorted(w.connector_id for w in kept)
    assert sorted(r['connector_id'] for r in bindings['rows']) == \
        sorted(w.connector_id for w in kept for _ in (0, 1))
    # The deleted wires' vNICs are free; the kept ones' are not.
    again = s.apply_batch([(w.end_a, w.end_b) for w in gone[:3]], [])
    assert len(again) == 3
    with pytest.raises(VnicTaken, match=kept[0].end_a):
        s.apply_batch([(kept[0].end_a, 'z1')], [])


def test_a_database_of_schema_1_8_is_converted_and_its_hosts_read(
        tmp_path, stores):
    """An intent database of schema 1.8.0 holding a host with its vNIC
    row as JSON text is converted when its server starts (1.9.0 adds the
    typed columns); the host reads as it was."""
    import json
    import subprocess
    from dataclasses import asdict

    from virtualwire.core.model import Encap, Host, VnicPort, host_to_json
    from virtualwire.ovsdb import rawrpc
    from virtualwire.store.host_rows import COLUMNS
    from virtualwire.store.intent import SCHEMA_PATH
    from virtualwire.store.runtime import RuntimeStore
    with open(SCHEMA_PATH) as f:
        old = json.load(f)
    old['version'] = '1.8.0'
    for c in COLUMNS:
        del old['tables']['HostVnic']['columns'][c]
    old_path = tmp_path / 'old.ovsschema'
    old_path.write_text(json.dumps(old))
    state = tmp_path / 'state'
    state.mkdir()
    subprocess.run(['ovsdb-tool', 'create', str(state / 'intent.db'),
                    str(old_path)], check=True)
    h = Host('h9', 9, (Encap('gre', '198.19.0.9', 4),), vnics=(
        VnicPort('v1', 'vnet1', 3, mac='52:54:00:00:00:01', vm_id='g'),))
    subprocess.run(['ovsdb-tool', 'transact', str(state / 'intent.db'),
                    json.dumps(['VirtualWire', {
                        'op': 'insert', 'table': 'Host', 'row': {
                            'name': 'h9', 'snapshot': host_to_json(
                                Host('h9', 9, h.encaps))}}, {
                        'op': 'insert', 'table': 'HostVnic', 'row': {
                            'host': 'h9', 'vnic': 'v1',
                            'port': json.dumps(asdict(h.vnics[0]))}}])],
                   check=True, capture_output=True)
    remote = local_ovsdb.ensure(str(state))       # converts the file
    try:
        [res] = rawrpc.transact(remote, 'VirtualWire', [
            {'op': 'select', 'table': 'HostVnic', 'where': [],
             'columns': ['port_name', 'ofport']}])
        assert res['rows'] == [{'port_name': '', 'ofport': 0}]  # converted
        assert RuntimeStore(stores(remote).client).hosts() == {'h9': h}
    finally:
        local_ovsdb.stop(str(state))


def test_a_host_view_lost_while_the_database_was_away_is_written_after(
        tmp_path, stores):
    """The writer drops a failed write (the control loop never waits on
    the database). A host's view lost so, with the host changing nothing
    after, would leave the next controller start without it; it is
    written with the next write that succeeds (the collector's counters,
    every few seconds)."""
    from virtualwire.core.model import Encap, Host, VnicPort
    from virtualwire.store.errors import StoreError
    from virtualwire.store.runtime import RuntimeStore
    remote = local_ovsdb.ensure(str(tmp_path))
    try:
        rt = RuntimeStore(stores(remote).client)
        rt.hosts()
        h1 = Host('h1', 1, (Encap('gre', '198.19.0.1', 4),),
                  vnics=(VnicPort('a', 'tap-a', 1),))
        local_ovsdb.stop(str(tmp_path))
        lost = rt.save_host(h1)
        # Refused, or reset if the write raced the server's exit: both
        # say the database is away.
        with pytest.raises(StoreError,
                           match='cannot connect|closed the connection'):
            lost.result(0)
        local_ovsdb.ensure(str(tmp_path))
        assert RuntimeStore(stores(remote).client).hosts() == {}
        rt.save_counters({'wires': {}, 'hosts': {'h1': {'rx': 1}}})
        assert RuntimeStore(stores(remote).client).hosts() == {'h1': h1}
    finally:
        local_ovsdb.stop(str(tmp_path))
