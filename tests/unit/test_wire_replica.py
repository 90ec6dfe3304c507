"""The Wire table as our replica keeps it: rows by connector id and the
events a change makes, in the shapes ovsdb-server sends (RFC 7047
monitor: initial reply, update notifications, a reply after a
reconnection)."""
from virtualwire.core.model import Wire
from virtualwire.store.wire_replica import WireTable


def row(cid, a, b, t='2026-11-26T00:00:00+00:00'):
    return {'connector_id': cid, 'end_a': a, 'end_b': b, 'created_at': t}


def test_initial_rows_then_inserts_and_deletes_in_commit_order():
    t = WireTable()
    t.replace({'Wire': {'u1': {'new': row(1, 'a', 'b')},
                        'u2': {'new': row(2, 'c', 'd')}}})
    assert sorted(t.take_events()) == [
        ('upsert', 1, Wire(1, 'a', 'b', '2026-11-26T00:00:00+00:00')),
        ('upsert', 2, Wire(2, 'c', 'd', '2026-11-26T00:00:00+00:00'))]
    t.update({'Wire': {'u3': {'new': row(3, 'e', 'f')}}})
    t.update({'Wire': {'u1': {'old': row(1, 'a', 'b')}}})
    assert [(e[0], e[1]) for e in t.take_events()] == [('upsert', 3),
                                                       ('delete', 1)]
    assert sorted(t.rows) == [2, 3]
    assert t.take_events() == []


def test_a_reconnection_reports_only_the_difference():
    t = WireTable()
    t.replace({'Wire': {'u1': {'new': row(1, 'a', 'b')},
                        'u2': {'new': row(2, 'c', 'd')}}})
    t.take_events()
    # While we were away: wire 1 deleted, wire 5 made, wire 2 remade under
    # the same id with other ends (another row).
    t.replace({'Wire': {'u9': {'new': row(2, 'c', 'x')},
                        'u5': {'new': row(5, 'g', 'h')}}})
    events = sorted((e[0], e[1], e[2] and e[2].end_b)
                    for e in t.take_events())
    assert events == [('delete', 1, None), ('upsert', 2, 'x'),
                      ('upsert', 5, 'h')]
    # An unchanged table after a reconnection says nothing.
    t.replace({'Wire': {'u9': {'new': row(2, 'c', 'x')},
                        'u5': {'new': row(5, 'g', 'h')}}})
    assert t.take_events() == []
    # A delete of a row we never saw, and other tables, are ignored.
    t.update({'Wire': {'nope': {'old': row(7, 'y', 'z')}},
              'Binding': {'b1': {'new': {'vnic': 'a'}}}})
    assert t.take_events() == [] and sorted(t.rows) == [2, 5]
