"""What the integration tests, the soak tier and the benchmarks share
about driving the lab: its API, waiting, flows, traffic and migrations.
Imported as a package (pytest.ini puts tests/ on the path), never through
a conftest."""
from vwtest.api import Api, seq, wait_until
from vwtest.clouds import LINKS, links_up
from vwtest.flows import flows_of

__all__ = ['Api', 'LINKS', 'flows_of', 'links_up', 'seq', 'wait_until']
