"""Garbage collections kept off a migration (control.quiet_collections):
off from its announcement, and again from its source's STOP, on again
once no migration is in flight or the cap has passed; the start-up heap
frozen."""
import gc
import logging
import uuid

from virtualwire.control.quiet_collections import QuietCollections
from virtualwire.testing.harness import Harness


class FakeGc:
    def __init__(self):
        self.enabled = True
        self.calls = []

    def isenabled(self):
        return self.enabled

    def disable(self):
        self.enabled = False
        self.calls.append('disable')

    def enable(self):
        self.enabled = True
        self.calls.append('enable')


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _quiet(cap=30.0):
    fake, clock = FakeGc(), Clock()
    return QuietCollections(cap=cap, clock=clock, collector=fake), fake, clock


def test_collections_wait_while_a_migration_is_in_flight():
    q, fake, clock = _quiet()
    q.quiet()
    assert not fake.enabled
    clock.now = 2.0
    q.settle(busy=True)
    assert not fake.enabled
    clock.now = 3.5
    q.settle(busy=False)
    assert fake.enabled and fake.calls == ['disable', 'enable']
    assert q.figures() == {'gc_quiet_windows': 1, 'gc_quiet_longest_s': 3.5}


def test_a_stop_rearms_the_cap_and_a_window_past_it_ends_logged(caplog):
    q, fake, clock = _quiet(cap=30.0)
    q.quiet()                   # the announcement
    clock.now = 25.0
    q.quiet()                   # the source's STOP, in the same window
    clock.now = 50.0
    q.settle(busy=True)
    assert not fake.enabled     # 25 s after the STOP: still within it
    clock.now = 56.0
    with caplog.at_level(logging.WARNING):
        q.settle(busy=True)
    assert fake.enabled and fake.calls == ['disable', 'enable']
    [msg] = [r.getMessage() for r in caplog.records]
    assert 'resumed after 56 s' in msg and 'still in flight' in msg


def test_collections_someone_else_turned_off_are_left_to_them():
    q, fake, _ = _quiet()
    fake.enabled = False
    q.quiet()
    q.settle(busy=False)
    assert not fake.enabled and fake.calls == []
    assert q.figures()['gc_quiet_windows'] == 0


def test_start_up_heap_is_frozen_out_of_later_collections():
    q = QuietCollections()
    try:
        frozen = q.settle_start_up()
        assert frozen > 1000 and gc.get_freeze_count() == frozen
        # Those objects are in no generation a collection scans.
        assert sum(gc.get_count()) < frozen
    finally:
        gc.unfreeze()


def test_the_controller_keeps_collections_off_from_announce_to_release():
    h = Harness(activate_at_stop=True)
    fake = FakeGc()
    h.ctl.quiet = QuietCollections(collector=fake, clock=lambda: h.now)
    h.host('h1', ('g', 1))
    h.host('h2')
    h.host('h3', ('f', 5))
    h.connect('g', 'f')
    vm = str(uuid.uuid4())
    h.call(h.ctl.announce_migration, {
        'vm': 'guest', 'vm_uuid': vm, 'vnics': ['g'], 'destination': 'h2'})
    h.host('h2', ('g', 2))
    h.settle()
    assert not fake.enabled
    h.call(h.ctl.source_stopped, vm, 'h1')
    h.settle()
    assert not fake.enabled
    assert h.send('h3', 5) == [('h2', 2)]       # the move went on
    h.call(h.ctl.moves.migration_released, vm, 'h1')
    h.host('h1')                                # the source's port left
    h.settle()
    assert fake.enabled and fake.calls == ['disable', 'enable']
    status = h.call(h.ctl.views.status)
    assert status['counters']['gc_quiet_windows'] == 1
