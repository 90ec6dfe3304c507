"""Topologies in a real ovsdb-server: an apply is one transaction that
holds only if nobody applied the same topology meanwhile; a vNIC wired
by another caller meanwhile fails the whole apply; destroy takes exactly
the topology's wires; guests reported are read back."""
import pytest

from virtualwire.core import errors
from virtualwire.core.topology_plan import Guest, GuestNic, Plan
from virtualwire.store import local as local_ovsdb
from virtualwire.store.intent import IntentStore, VnicTaken


@pytest.fixture
def store(tmp_path):
    remote = local_ovsdb.ensure(str(tmp_path))
    made = []

    def make():
        made.append(IntentStore(remote).start())
        return made[-1]
    yield make
    for s in made:
        s.stop()
    local_ovsdb.stop(str(tmp_path))


def plan(create=(), delete=(), keep=()):
    return Plan(tuple(create), tuple(delete), tuple(keep))


def test_apply_is_one_transaction_checked_against_the_plans_generation(
        store):
    one, two = store(), store()
    t = one.topologies
    links = t.apply('acme', 'net', 'src1', plan([('a:0|b:0', 'a', 'b'),
                                                 ('c:0|d:0', 'c', 'd')]),
                    {'a:0': 'a'}, None, 'now')
    rec = two.topologies.record('acme', 'net')
    assert rec.wires == links and rec.generation == 1 and \
        rec.source == 'src1' and rec.resolved == {'a:0': 'a'}
    assert set(one.wires()) == set(links.values())
    # Two applies planned against generation 1: the second one changes
    # nothing, wires included.
    cd = links['c:0|d:0']
    t.apply('acme', 'net', 'src2', plan([('e:0|f:0', 'e', 'f')],
                                        [('c:0|d:0', cd, 'c', 'd')],
                                        [('a:0|b:0', links['a:0|b:0'])]),
            {}, rec, 'now')
    wires_then = set(one.wires())
    with pytest.raises(errors.Conflict, match='apply again'):
        two.topologies.apply('acme', 'net', 'src3',
                             plan([('g:0|h:0', 'g', 'h')]), {}, rec, 'now')
    assert set(one.wires()) == wires_then
    assert t.record('acme', 'net').source == 'src2'
    # Tenants apart: the same name is another tenant's other topology.
    assert t.record('globex', 'net') is None
    assert [r.name for r in t.records('acme')] == ['net']


def test_a_vnic_wired_meanwhile_fails_the_whole_apply(store):
    one = store()
    other = one.create_wire('b', 'z')
    with pytest.raises(VnicTaken, match='vNIC b is already wired'):
        one.topologies.apply('acme', 'net', 's', plan([
            ('a:0|b:0', 'a', 'b'), ('c:0|d:0', 'c', 'd')]), {}, None, 'now')
    assert set(one.wires()) == {other.connector_id}
    assert one.topologies.record('acme', 'net') is None


def test_destroy_takes_exactly_its_wires(store):
    one = store()
    other = one.create_wire('x', 'y')
    t = one.topologies
    t.apply('acme', 'net', 's', plan([('a:0|b:0', 'a', 'b')]), {}, None,
            'now')
    gone = t.destroy(t.record('acme', 'net'))
    assert len(gone) == 1 and set(one.wires()) == {other.connector_id}
    assert t.records() == []


def test_guests_reported_are_read_back_and_replaced(store):
    t = store().topologies
    g = Guest('0b7c0d5e-2f77-4a57-9e63-0f6a8e0f3b11', 'web1', 'h1',
              (GuestNic(0, 'v1', '52:54:00:00:00:01', 'ua-front'),))
    t.report_guest(g, 'now')
    assert t.guests() == [g]
    moved = Guest(g.uuid, 'web1', 'h2', g.nics)
    t.report_guest(moved, 'later')
    assert t.guests() == [moved]
