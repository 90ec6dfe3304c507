"""The integration tests' fixtures (vwtest.fixtures: the 3-host lab; the
two clouds are clouds/'s) and the one retry rule for a broken TCG guest
(vwtest.retry)."""
from vwtest.fixtures import api, lab, pair, wired_guest  # noqa: F401
from vwtest.retry import guest_retry, pytest_terminal_summary  # noqa: F401
