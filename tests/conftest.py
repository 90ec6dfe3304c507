"""Suite-wide guard: a test that leaves a non-daemon thread running would
keep pytest alive after its summary (CI then waits until it times out), so
fail that test instead, naming the thread."""
import threading
import time

import pytest


def _live_non_daemon():
    return {t for t in threading.enumerate()
            if not t.daemon and t is not threading.main_thread()}


@pytest.fixture(autouse=True)
def no_leaked_threads():
    before = _live_non_daemon()
    yield
    end = time.time() + 3.0
    leaked = _live_non_daemon() - before
    while leaked and time.time() < end:
        time.sleep(0.05)
        leaked = {t for t in leaked if t.is_alive()}
    assert not leaked, 'test left threads running: %s' % sorted(
        t.name for t in leaked)
