"""The soak tier: lab forensics that explain a migration's every lost or
doubled datagram, run on demand and in the benchmarks, never in CI:

    .venv/bin/python -m pytest -p no:randomly bench/soak [--soak-rounds N]

Its unit tests check the forensic tools (bench/forensics) themselves.
Same labs and retry rule as the integration tests (vwtest)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))

from vwtest.fixtures import api, clouds, lab, wired_guest  # noqa: E402,F401
from vwtest.retry import guest_retry, pytest_terminal_summary  # noqa: E402,F401


def pytest_addoption(parser):
    parser.addoption('--soak-rounds', type=int, default=3,
                     help='times each soak scenario runs (default 3)')


def pytest_generate_tests(metafunc):
    if 'soak_round' in metafunc.fixturenames:
        n = metafunc.config.getoption('--soak-rounds')
        metafunc.parametrize('soak_round', range(1, n + 1))
