"""One retry rule for the lab's TCG guests, and a record of every retry.

QEMU 7.2 under TCG at times breaks a migrated guest (vwlab.guest_crash:
its console shows the oops, or it reboots). What its streams lose after
that says nothing about the network, so a test whose guest broke runs
again with a new guest. So does one whose probe proves it measured
nothing: its sender, starved by a busy machine, sent nothing at the
instant the test judges (SenderStarved). Never silently: each retry is
kept in the test report (the test's user properties, which JUnit XML
carries too) and listed in the terminal summary, and a test that broke
every time fails. Nothing else is retried.
"""
import pytest

from vwlab.guest_crash import GuestCrashed

ATTEMPTS = 3
PROPERTY = 'guest retry'


class SenderStarved(Exception):
    """The probe's sender was silent at the instant the test judges: the
    run measured nothing there (it is not the network's failure)."""


class GuestRetry:
    """run(body) calls body(workdir) until it returns, at most `attempts`
    times, each in its own directory; a GuestCrashed or SenderStarved
    ends one attempt."""

    def __init__(self, node, directory):
        self.node, self.directory = node, directory

    def run(self, body, attempts=ATTEMPTS):
        broke = []
        for k in range(1, attempts + 1):
            workdir = self.directory / ('run%d' % k)
            workdir.mkdir(parents=True, exist_ok=True)
            try:
                return body(workdir)
            except (GuestCrashed, SenderStarved) as e:
                broke.append(str(e))
                self.node.user_properties.append(
                    (PROPERTY, 'run %d of %d: %s' % (k, attempts, e)))
        pytest.fail('the lab guest broke, or its probe measured nothing, in '
                    'all %d runs: %s' % (attempts, '; '.join(broke)))


@pytest.fixture
def guest_retry(request, tmp_path):
    return GuestRetry(request.node, tmp_path)


def retries_in(reports):
    """[(test id, what broke)] of every retry the reports record."""
    return [(r.nodeid, text) for r in reports
            for key, text in getattr(r, 'user_properties', ())
            if key == PROPERTY]


def pytest_terminal_summary(terminalreporter):
    reports = [r for rs in terminalreporter.stats.values() for r in rs
               if getattr(r, 'when', None) == 'call']
    rows = retries_in(reports)
    if rows:
        terminalreporter.section('tests run again: their TCG guest broke '
                                 'or their probe measured nothing')
        for nodeid, text in rows:
            terminalreporter.write_line('%s  %s' % (nodeid, text))
