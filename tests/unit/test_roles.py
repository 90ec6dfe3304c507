"""Active and standby (control.roles) against the fake fabric, which keeps
each switch's OpenFlow role as OVS does: a standby asks to be SLAVE and
sends no flow change; taking over it asks for MASTER with its term, dumps
each table again and sends a healthy switch nothing; a role request older
than the switch's newest is refused and changes nothing else; a takeover
in the middle of a migration rebuilds the move from the database and the
guest's first frame completes it."""
import uuid

from virtualwire.store.leadership import Leader, State
from virtualwire.testing.harness import Harness


def tables(h):
    return {n: sw.flows() for n, sw in h.fabric.switches.items()}


def lead(h, active, term):
    leader = Leader(term, 'ctl-a' if active else 'ctl-b',
                    'https://ctl:8780', 'now', 'https://198.18.0.1:8781')
    h.call(h.ctl.on_leadership, State(active, term, leader))


def two_hosts(active=True):
    h = Harness(active=active)
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 1))
    return h


def test_a_standby_asks_for_slave_and_writes_nothing():
    h = two_hosts(active=False)
    w = h.connect('a', 'b')
    assert all(not f for f in tables(h).values())
    assert {sw.role for sw in h.fabric.switches.values()} == {'slave'}
    assert all(sw.refused_as_slave == 0 for sw in h.fabric.switches.values())
    assert h.call(h.ctl.views.status)['role']['active'] is False
    # It still knows the wire (reads are served by every instance).
    assert h.call(h.ctl.views.wire_view, w['id'])['state'] == 'tunnelled'


def test_taking_over_asks_for_master_with_the_term_and_programs():
    h = two_hosts(active=False)
    h.connect('a', 'b')
    lead(h, True, 7)
    assert {(sw.role, sw.generation) for sw in h.fabric.switches.values()} \
        == {('master', 7)}
    assert h.send('h1', 1) == [('h2', 1)] and h.send('h2', 1) == [('h1', 1)]
    role = h.call(h.ctl.views.status)['role']
    assert role['active'] and role['term'] == 7 and role['takeovers'] == 1


def test_a_takeover_sends_a_healthy_switch_nothing_and_dumps_it_again():
    h = two_hosts()
    h.connect('a', 'b')
    before = tables(h)
    lead(h, False, 7)
    stats = dict(h.ctl.shared.stats)
    dumps = {n: _dumps(sw) for n, sw in h.fabric.switches.items()}
    lead(h, True, 8)
    assert h.ctl.shared.stats['flow_mods'] == stats['flow_mods']
    assert h.ctl.shared.stats['bundles'] == stats['bundles']
    assert tables(h) == before
    assert {n: _dumps(sw) for n, sw in h.fabric.switches.items()} == \
        {n: d + 1 for n, d in dumps.items()}
    assert {(sw.role, sw.generation) for sw in h.fabric.switches.values()} \
        == {('master', 8)}


def test_a_table_changed_by_the_last_leader_is_diffed_not_rewritten():
    """What the standby dumped at connect is stale by takeover time: the
    fresh dump is what the diff starts from."""
    h = two_hosts()
    w = h.connect('a', 'b')
    lead(h, False, 7)
    sw = h.fabric.switches['h1']
    # The (other) leader removed the wire from h1 after our last dump.
    gone = {k for k, e in sw.table.items() if e.cookie & 0xFFFFFFFF}
    for k in gone:
        del sw.table[k]
    assert h.send('h1', 1) == []
    lead(h, True, 8)
    assert h.send('h1', 1) == [('h2', 1)]
    assert h.call(h.ctl.views.wire_view, w['id'])['state'] == 'tunnelled'


def test_an_older_term_is_refused_and_changes_nothing_else():
    h = two_hosts()
    h.connect('a', 'b')
    before = tables(h)
    sw = h.fabric.switches['h1']
    sw.generation = 9               # a newer leader already spoke
    errors = h.ctl.shared.stats['switch_errors']
    dumps = _dumps(sw)
    lead(h, False, 8)               # our SLAVE(8) is stale there
    assert sw.role == 'master' and sw.generation == 9
    assert h.ctl.shared.stats['switch_errors'] == errors     # not a table error
    assert _dumps(sw) == dumps                        # so no new dump
    assert tables(h) == before


def test_a_takeover_mid_migration_rebuilds_the_move_and_completes_it():
    """Leader A announced g's move h1 -> h2 (saved to the database) and
    died; B, a standby on the same database, takes over: the far end
    sends to both, the guest's first frame on h2 activates it, the record
    completes."""
    a = Harness()
    a.host('h1', ('g', 1))
    a.host('h2')
    a.host('h3', ('f', 5))
    w = a.connect('g', 'f')
    b = Harness(intent=a.intent, runtime=a.runtime, active=False)
    b.host('h1', ('g', 1))
    b.host('h2')
    b.host('h3', ('f', 5))
    vm = str(uuid.uuid4())
    a.call(a.ctl.moves.announce_migration, {'vm': 'guest', 'vm_uuid': vm,
                                            'vnics': ['g'], 'destination': 'h2'})
    b.host('h2', ('g', 2))                 # QEMU is up on the destination
    assert all(not f for f in tables(b).values())     # B wrote nothing
    lead(b, True, 2)
    [m] = b.call(b.ctl.views.migration_views)
    assert m['state'] == 'prepared' and m['vm_uuid'] == vm
    assert sorted(b.send('h3', 5)) == [('h1', 1)]     # paused copy gets none
    assert b.send('h2', 2, eth_type=0x8035, payload=b'\0' * 28) == \
        [('h3', 5)]
    assert b.send('h3', 5) == [('h2', 2)]
    b.host('h1')                                      # the source port goes
    b.call(b.ctl.moves.migration_released, vm, 'h1')
    [m] = b.call(b.ctl.views.migration_views)
    assert m['state'] == 'completed' and m['activated_by'] == {'g': 'rarp'}
    assert b.call(b.ctl.views.wire_view, w['id'])['moving'] == {}


def _dumps(sw):
    from os_ken.ofproto import ofproto_v1_4 as ofp
    return sum(1 for m in sw.sent if getattr(m, 'msg_type', None) ==
               ofp.OFPT_MULTIPART_REQUEST)


def test_a_takeover_before_anything_was_seen_builds_nothing_twice():
    """A lone instance takes the lock as it starts: its state is what
    start() just read, so it is not built again; once the database holds
    something start() did not read, it is."""
    h = Harness(active=False)
    built = h.ctl.tables
    lead(h, True, 1)
    assert h.ctl.tables is built and h.ctl.active
    h2 = Harness(active=False)
    built = h2.ctl.tables
    h2.runtime.save_migration({'id': 'm1', 'vm_uuid': str(uuid.uuid4()),
                               'state': 'completed', 'vm': 'g',
                               'vnics': ['x'], 'sources': {},
                               'destination': 'h1'})
    lead(h2, True, 1)
    assert h2.ctl.tables is not built


def test_a_takeover_keeps_strict_placement_and_the_clouds_word():
    """Found while the controller became parts: a takeover's rebuild made
    new tables with trusting placement, and the cloud's word went on
    writing to the old ones. A standby that takes over must refuse a
    host that plugs a vNIC placed elsewhere, and follow words said
    after it took over."""
    h = Harness(active=False, strict=True)
    for v, host in (('a', 'h1'), ('b', 'h2')):
        h.intent.placements.place(v, host, 'orchestrator nova', 0.0)
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 1))
    h.connect('a', 'b')
    lead(h, True, 7)
    assert h.send('h1', 1) == [('h2', 1)]
    h.host('h3', ('b', 4))              # plugs b, placed on h2: refused
    assert h.call(h.ctl.views.vnic_view, 'b')['host'] == 'h2'
    assert h.call(h.ctl.views.vnic_view, 'b')['refused_on'] == ['h3']
    assert h.send('h1', 1) == [('h2', 1)]
    h.host('h4', ('c', 2))              # no word yet: strict, nobody's
    assert h.call(h.ctl.views.vnic_view, 'c')['host'] is None
    h.intent.placements.place('c', 'h4', 'orchestrator nova', 1.0)
    h.settle()
    assert h.call(h.ctl.views.vnic_view, 'c')['host'] == 'h4'
