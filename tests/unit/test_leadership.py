"""Leadership by the intent database's lock (store.leadership), against a
stand-in for the IDL: who asks for the lock and when, the term raised on
taking it, a leader that rides out a reconnection (a database member
failing) keeps its term, one that finds the lock held elsewhere or stays
out of touch steps down."""
import types

import ovs.db.idl

from virtualwire.store import leadership
from virtualwire.store.leadership import GRACE, LOCK, STEP_DOWN, Leadership


class FakeIdl:
    def __init__(self):
        self.lock_name = None
        self.has_lock = self.is_lock_contended = False
        self.connected = True
        self._session = types.SimpleNamespace(
            is_connected=lambda: self.connected)
        self.tables = {'Leadership': types.SimpleNamespace(rows={})}

    def set_lock(self, name):
        self.lock_name = name
        if name is None:
            self.has_lock = False


class FakeClient:
    def __init__(self):
        self.idl = FakeIdl()
        self.lock = _Lock()
        self.commits = 0

    def transact(self, build):
        txn = types.SimpleNamespace(
            insert=lambda table: self._insert(table),
            get_error=lambda: '')
        if not self.idl.has_lock:
            return ovs.db.idl.Transaction.NOT_LOCKED, txn
        build(txn, self.idl)
        self.commits += 1
        return ovs.db.idl.Transaction.SUCCESS, txn

    def _insert(self, table):
        row = types.SimpleNamespace()
        table.rows['r'] = row
        return row


class _Lock:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def make(holder='ctl1', row=None):
    c = FakeClient()
    if row is not None:
        c.idl.tables['Leadership'].rows['r'] = types.SimpleNamespace(**row)
    states = []
    ld = Leadership(c, holder, 'https://%s:8780' % holder,
                    'https://%s:8781' % holder, on_change=states.append)
    now = [100.0]
    ld.clock = lambda: now[0]
    ld.spawn = lambda fn: fn()
    return c, ld, states, now


def other_leader(term=4):
    return dict(term=term, holder='ctl2', rest_url='https://ctl2:8780',
                since='then', southbound_url='https://ctl2:8781')


def test_a_new_database_or_our_own_record_asks_for_the_lock_at_once():
    c, ld, _s, _n = make()
    ld.poll()
    assert c.idl.lock_name == LOCK
    c, ld, _s, _n = make(row=dict(other_leader(), holder='ctl1'))
    ld.poll()
    assert c.idl.lock_name == LOCK


def test_a_standby_asks_only_after_being_connected_for_the_grace():
    c, ld, states, now = make(row=other_leader())
    ld.poll()
    assert c.idl.lock_name is None
    assert states[-1].leader.holder == 'ctl2' and states[-1].term == 4
    now[0] += GRACE - 0.1
    ld.poll()
    assert c.idl.lock_name is None
    now[0] += 0.2
    ld.poll()
    assert c.idl.lock_name == LOCK
    # Disconnected: it forgets its request, and waits again once back.
    c.idl.connected = False
    ld.poll()
    assert c.idl.lock_name is None
    c.idl.connected = True
    now[0] += 1.0
    ld.poll()
    assert c.idl.lock_name is None


def test_the_lock_raises_the_term_and_makes_it_active():
    c, ld, states, _n = make(row=other_leader(4))
    c.idl.has_lock = True
    ld.poll()
    assert states[-1].active and states[-1].term == 5
    row = c.idl.tables['Leadership'].rows['r']
    assert (row.term, row.holder, row.rest_url, row.southbound_url) == \
        (5, 'ctl1', 'https://ctl1:8780', 'https://ctl1:8781')
    # A lock lost before the write: no term, still standby.
    c2, ld2, states2, _n = make(row=other_leader(4))
    c2.idl.has_lock = True
    c2.transact = lambda build: (ovs.db.idl.Transaction.NOT_LOCKED,
                                 types.SimpleNamespace(get_error=lambda: ''))
    ld2.poll()
    assert not any(s.active for s in states2)


def _active():
    c, ld, states, now = make()
    c.idl.has_lock = True
    ld.poll()
    assert states[-1].active and states[-1].term == 1
    return c, ld, states, now


def test_a_leader_rides_out_a_reconnection_in_its_term():
    c, ld, states, now = _active()
    n = len(states)
    c.idl.connected, c.idl.has_lock = False, False
    for _ in range(4):
        now[0] += 1.0
        ld.poll()
    c.idl.connected = True          # back, lock asked again: not yet held
    ld.poll()
    c.idl.has_lock = True
    ld.poll()
    assert len(states) == n and c.commits == 1 and ld.state.active


def test_a_leader_that_finds_the_lock_elsewhere_steps_down():
    c, ld, states, now = _active()
    c.idl.has_lock, c.idl.is_lock_contended = False, True
    ld.poll()
    assert not states[-1].active and states[-1].term == 1


def test_a_leader_out_of_touch_too_long_steps_down():
    c, ld, states, now = _active()
    c.idl.connected = False
    ld.poll()
    now[0] += STEP_DOWN + 0.1
    ld.poll()
    assert not states[-1].active


def test_a_leader_whose_term_was_taken_meanwhile_raises_it_again():
    c, ld, states, now = _active()
    row = c.idl.tables['Leadership'].rows['r']
    row.term, row.holder = 2, 'ctl2'   # another led while we were away
    ld.poll()
    assert states[-1].active and states[-1].term == 3 and row.holder == 'ctl1'


def test_the_lock_name_is_an_ovsdb_id():
    import re
    assert re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', leadership.LOCK)
