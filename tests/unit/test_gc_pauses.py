"""Garbage collections timed: every one observed, a slow one logged."""
import gc
import logging

import pytest

from virtualwire.metrics.gc_pauses import GcPauses
from virtualwire.metrics.instruments import Instruments


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


INFO = {'generation': 2, 'collected': 7, 'uncollectable': 0}


def test_each_collection_is_observed_with_its_generation_and_length():
    clock, seen = Clock(), []
    watch = GcPauses(lambda g, s: seen.append((g, s)), clock=clock)
    watch('start', INFO)
    clock.now = 0.004
    watch('stop', INFO)
    assert seen == [(2, 0.004)]


@pytest.mark.parametrize('took, logged', [(0.120, True), (0.010, False)])
def test_only_a_slow_collection_is_logged_with_what_it_found(
        caplog, took, logged):
    clock = Clock()
    watch = GcPauses(lambda g, s: None, clock=clock)
    watch('start', INFO)
    clock.now = took
    with caplog.at_level(logging.WARNING):
        watch('stop', INFO)
    said = [r.getMessage() for r in caplog.records]
    if not logged:
        assert said == []
        return
    [msg] = said
    assert 'generation 2 took 120 ms' in msg and '7 collected' in msg


def test_a_stop_without_its_start_is_ignored():
    seen = []
    GcPauses(lambda g, s: seen.append(s))('stop', INFO)
    assert seen == []


def test_installed_it_times_real_collections_into_the_histogram():
    inst = Instruments()
    watch = GcPauses(inst.gc_paused).install()
    try:
        gc.collect()
    finally:
        watch.remove()
    assert watch not in gc.callbacks
    count = inst.registry.get_sample_value(
        'virtualwire_gc_pause_seconds_count', {'generation': '2'})
    assert count and count >= 1
