"""The lab controller's REST API as the tests use it, and waiting for a
condition with a message that says what was awaited."""
import itertools
import time

import requests

# Numbers that keep names of VMs, guests and wires unique in a session.
seq = itertools.count(1)


def wait_until(fn, timeout=15.0, interval=0.05, what='condition'):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError('timed out after %.1fs waiting for %s (last: %r)'
                         % (timeout, what, last))


class Api:
    def __init__(self, lab, url=None):
        """url: one instance of an HA lab (default: the lab's)."""
        self.lab = lab
        self.url = url

    @property
    def token(self):
        with open(self.lab.token_file) as f:
            return f.read().strip()

    def req(self, method, path, auth=True, **kw):
        headers = kw.pop('headers', {})
        if auth:
            headers['Authorization'] = 'Bearer ' + self.token
        return requests.request(method, (self.url or self.lab.url) + path,
                                headers=headers,
                                timeout=15, verify=self.lab.verify, **kw)

    def ok(self, method, path, **kw):
        r = self.req(method, path, **kw)
        assert r.status_code < 300, (r.status_code, r.text)
        return r.json() if r.content else None

    def connect(self, a, b):
        return self.ok('POST', '/v1/wires', json={'a': a, 'b': b})

    def wire(self, wid):
        return self.ok('GET', '/v1/wires/%s' % wid)

    def wait_state(self, wid, state, timeout=15):
        return wait_until(lambda: self.wire(wid)['state'] == state and
                          self.synced(), timeout, what='wire %s %s'
                          % (wid, state))

    def synced(self):
        """Controller answering, every lab host connected and synced."""
        try:
            hosts = self.ok('GET', '/v1/hosts')['hosts']
        except requests.RequestException:
            return False
        return len(hosts) == len(self.lab.hosts) and \
            all(h['connected'] and h['synced'] for h in hosts)


def set_shared(api, name, value):
    """A shared setting set through the API, and awaited until the
    controller applies it."""
    r = api.req('PUT', '/v1/settings/%s' % name, json={'value': value})
    assert r.status_code == 200, r.text
    wait_until(lambda: {s['name']: s['value'] for s in api.ok(
        'GET', '/v1/settings')['settings']}[name] == value, 10,
        what='%s %s applied' % (name, value))
