"""A shared setting changed for one test and put back after it, each
change waited for until the controller says it applied it."""
import contextlib

from vwtest import wait_until


def current(api, name):
    return {s['name']: s['value'] for s in api.ok(
        'GET', '/v1/settings')['settings']}[name]


def put(api, name, value):
    r = api.req('PUT', '/v1/settings/%s' % name, json={'value': value})
    assert r.status_code == 200, r.text
    wait_until(lambda: current(api, name) == value, 10,
               what='%s %s applied' % (name, value))


@contextlib.contextmanager
def setting(api, name, value):
    before = current(api, name)
    put(api, name, value)
    try:
        yield
    finally:
        put(api, name, before)
