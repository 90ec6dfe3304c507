"""The one retry rule of the lab tests (vwtest.retry): a test whose TCG
guest broke, or whose probe's sender was starved at the instant judged,
runs again in a new directory, every retry is in the report, and nothing
else is retried."""
import os
import subprocess
import sys
import textwrap

import pytest

from vwlab.guest_crash import GuestCrashed
from vwtest.retry import GuestRetry, SenderStarved

HERE = os.path.dirname(os.path.abspath(__file__))


class Node:
    def __init__(self):
        self.user_properties = []


def test_a_broken_guest_earns_a_run_in_a_new_directory(tmp_path):
    node, runs = Node(), []

    def body(d):
        runs.append(d.name)
        if len(runs) == 1:
            raise GuestCrashed('guest g1 crashed: [invalid opcode]')
        return 'judged'

    assert GuestRetry(node, tmp_path).run(body) == 'judged'
    assert runs == ['run1', 'run2']
    assert node.user_properties == [
        ('guest retry', 'run 1 of 3: guest g1 crashed: [invalid opcode]')]


def test_a_starved_sender_earns_a_run_and_is_recorded(tmp_path):
    node, runs = Node(), []

    def body(d):
        runs.append(d.name)
        if len(runs) == 1:
            raise SenderStarved('sender silent 3.7 ms across the first frame')
        return 'judged'

    assert GuestRetry(node, tmp_path).run(body) == 'judged'
    assert runs == ['run1', 'run2']
    assert node.user_properties == [
        ('guest retry', 'run 1 of 3: sender silent 3.7 ms across the first '
         'frame')]


def test_broken_every_time_fails_and_a_lost_datagram_is_never_retried(
        tmp_path):
    def crashes(_d):
        raise GuestCrashed('guest g1 crashed')

    with pytest.raises(pytest.fail.Exception,
                       match='broke, or its probe measured nothing, in all 2 runs.*g1 crashed'):
        GuestRetry(Node(), tmp_path / 'a').run(crashes, attempts=2)
    runs = []

    def loses(d):
        runs.append(d)
        raise AssertionError('the network lost 5 around the move')

    with pytest.raises(AssertionError, match='lost 5'):
        GuestRetry(Node(), tmp_path / 'b').run(loses)
    assert len(runs) == 1


def test_each_retry_is_listed_in_the_terminal_summary(tmp_path):
    (tmp_path / 'conftest.py').write_text(
        'from vwtest.retry import guest_retry, pytest_terminal_summary'
        '  # noqa: F401\n')
    (tmp_path / 'test_flaky_guest.py').write_text(textwrap.dedent('''
        from vwlab.guest_crash import GuestCrashed
        seen = []

        def test_moves(guest_retry):
            def body(d):
                seen.append(d)
                if len(seen) < 3:
                    raise GuestCrashed('guest mig7 crashed: [Oops]')
            guest_retry.run(body)
        '''))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(HERE, '..')] + sys.path))
    p = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p',
                        'no:cacheprovider', '-c', os.devnull,
                        str(tmp_path)], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert 'tests run again: their TCG guest broke' in p.stdout, p.stdout
    lines = [l for l in p.stdout.splitlines() if 'test_moves' in l and
             'crashed' in l]
    assert len(lines) == 2 and 'run 2 of 3: guest mig7 crashed' in \
        lines[1], p.stdout
