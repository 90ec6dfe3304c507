"""bench/cpu_stages.py: a thread's CPU read from its stat line whatever
its command, grouped by namespace and command, and a stage's projected
rate with a core of its own."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'bench'))
import cpu_stages  # noqa: E402


def test_ticks_are_read_after_a_command_with_spaces_and_parens():
    line = ('4711 (boring tun) cli) S 1 4711 4711 0 -1 4194560 10 0 0 0 '
            '250 75 0 0 20 0 3 0 100 0 0')
    assert cpu_stages._ticks(line) == 325


def test_a_busy_thread_is_seen_in_its_stage():
    with cpu_stages.CpuWindow() as w:
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
    rep = w.report()
    mine = [v for k, v in rep['stages'].items() if k.endswith(
        ' ' + open('/proc/self/comm').read().strip())]
    # 0.3 s of CPU, however long the window took on a busy machine.
    assert mine and max(v['busiest_thread_cores'] for v in mine) * \
        rep['seconds'] > 0.2, rep
    assert 0.99 < sum(rep['machine'].values()) < 1.01, rep


def test_capacity_is_the_rate_over_the_busiest_threads_share():
    rep = {'stages': {'xa boringtun-cli': {'busiest_thread_cores': 0.5},
                      'h1 ovs-vswitchd': {'busiest_thread_cores': 0.25}}}
    assert cpu_stages.capacity(rep, 200.0, ['xa boringtun-cli',
                                            'h1 ovs-vswitchd', 'gone']) == {
        'xa boringtun-cli': 400.0, 'h1 ovs-vswitchd': 800.0}
