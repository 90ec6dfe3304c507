"""A host's last observed state as a row per host and a row per vNIC
(store.host_rows): the texts hold the host exactly (vNICs in id order),
a snapshot from before the rows still reads, and a plug is one row."""
from virtualwire.core.model import Encap, Host, VnicPort, host_to_json
from virtualwire.store import host_rows


def host(*vnics, mtu=1600):
    return Host('h1', 7, (Encap('gre', '198.19.0.1', 4),), site='a',
                underlay_mtu=mtu,
                vnics=tuple(VnicPort(v, 'vnet%d' % i, i + 1, vm_id='g')
                            for i, v in enumerate(vnics)))


def test_the_rows_hold_the_host():
    h = host('a', 'b', 'c')
    assert host_rows.join(*host_rows.split(h)) == h
    assert host_rows.join(*host_rows.split(host())) == host()


def test_a_snapshot_from_before_the_rows_reads_as_it_was():
    h = host('a', 'b')
    assert host_rows.join(host_to_json(h), {}) == h


def test_a_plug_is_one_row_and_a_host_change_is_the_host_row():
    rows = host_rows.split(host('a', 'b'))
    before = host_rows.written(rows)
    head, ins, upd, dele = host_rows.changes(before, host_rows.split(
        host('a', 'b', 'c')))
    assert (head, [v for v, _ in ins], upd, dele) == (False, ['c'], [], [])
    head, ins, upd, dele = host_rows.changes(before, host_rows.split(
        host('a')))
    assert (head, ins, upd, dele) == (False, [], [], ['b'])
    head, ins, upd, dele = host_rows.changes(before, host_rows.split(
        host('a', 'b', mtu=9000)))
    assert (head, ins, upd, dele) == (True, [], [], [])
    assert host_rows.changes(before, rows) == (False, [], [], [])


def test_vnic_rows_are_typed_and_older_text_rows_still_read():
    """A vNIC row holds VnicPort's fields as columns (schema 1.9.0); a row
    written before them (its vNIC as JSON in `port`) reads the same, and
    the next save rewrites it typed."""
    import json
    from dataclasses import asdict
    h = host('a', 'b')
    text, rows = host_rows.split(h)
    assert rows['a'] == {'port_name': 'vnet0', 'ofport': 1, 'mac': '',
                         'vm_id': 'g', 'status': ''}
    older = {v.vnic_id: {'port': json.dumps(asdict(v))} for v in h.vnics}
    assert host_rows.join(text, older) == h
    head, ins, upd, dele = host_rows.changes(
        host_rows.written((text, older)), (text, rows))
    assert (head, ins, dele) == (False, [], [])
    assert [v for v, _ in upd] == ['a', 'b']
