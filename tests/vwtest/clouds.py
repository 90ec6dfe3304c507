"""The two-cloud lab's extender links as the controller sees them."""
from vwtest.api import Api

# The extender links of the two-cloud lab (tests/integration/conftest.py).
LINKS = [('xa', 'xb'), ('xa', 'xr'), ('xb', 'xr')]


def links_up(lab, want):
    """{(extender, peer): up} as the controller sees them, == want."""
    got = {}
    for h in Api(lab).ok('GET', '/v1/hosts')['hosts']:
        for k in h.get('links', ()):
            got[(h['name'], k['peer'])] = k['up']
    return all(got.get(x) == up for x, up in want.items())
