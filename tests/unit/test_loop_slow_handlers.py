"""The loop times its handlers: the longest is kept, a slow one logged
by name (the late answers of a migration are set against that log)."""
import logging

from virtualwire.control.loop import Loop


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def make():
    clock = Clock()
    return Loop('test', clock=clock), clock


def test_a_slow_handler_is_logged_with_its_name_and_kept(caplog):
    loop, clock = make()

    def write_bundles():
        clock.now += 0.180

    loop.post(write_bundles)
    with caplog.at_level(logging.WARNING):
        loop.run_pending()
    [rec] = [r for r in caplog.records if 'held it' in r.getMessage()]
    assert 'write_bundles' in rec.getMessage()
    assert '180 ms' in rec.getMessage()
    took, name = loop.slowest
    assert abs(took - 0.180) < 1e-9 and name.endswith('write_bundles')


def test_fast_handlers_are_not_logged_but_the_longest_is_kept(caplog):
    loop, clock = make()

    def quick():
        clock.now += 0.002

    def quicker():
        clock.now += 0.001

    loop.post(quick)
    loop.post(quicker)
    with caplog.at_level(logging.WARNING):
        loop.run_pending()
    assert not [r for r in caplog.records if 'held it' in r.getMessage()]
    assert loop.slowest[1].endswith('quick')


def test_a_slow_sync_is_logged_too(caplog):
    loop, clock = make()

    def sync():
        clock.now += 0.070

    loop.idle = sync
    with caplog.at_level(logging.WARNING):
        loop.run_pending()
    assert any('sync held it 70 ms' in r.getMessage()
               for r in caplog.records)


def test_a_handler_that_fails_is_timed_as_well(caplog):
    loop, clock = make()

    def broken():
        clock.now += 0.060
        raise RuntimeError('no')

    loop.post(broken)
    with caplog.at_level(logging.WARNING):
        loop.run_pending()
    assert any('broken held it 60 ms' in r.getMessage()
               for r in caplog.records)


def test_the_status_figures_name_the_longest_handler():
    loop, clock = make()

    def sync_flows():
        clock.now += 0.0125

    loop.post(sync_flows)
    loop.run_pending()
    fig = loop.figures()
    assert fig['events'] == 1
    assert fig['loop_slowest_ms'] == 12.5
    assert fig['loop_slowest'].endswith('sync_flows')
