"""The integration tests' fixtures (vwtest.fixtures: the 3-host lab; the
two clouds are clouds/'s), the one retry rule for a broken TCG guest
(vwtest.retry), and the packaging tests' build begun early
(vwtest.packaging)."""
from vwtest.fixtures import (api, first_frame_activation,  # noqa: F401
                             lab, pair, streams, wired_guest)
from vwtest.retry import guest_retry, pytest_terminal_summary  # noqa: F401
from vwtest import packaging


def pytest_collection_finish(session):
    packaging.start_early(session.items)


def pytest_sessionfinish(session):
    packaging.stop_early()
