"""Two clouds behind NATs joined by extenders (vwtest.fixtures.clouds):
one lab for every test of this package, built once (about 25 s)."""
from vwtest.fixtures import clouds, cross  # noqa: F401
