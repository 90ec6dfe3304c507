"""A real lab for the integration tests: 3 namespace hosts with their own
ovsdb-server/ovs-vswitchd (netdev datapath), the controller as a real
process, VMs as namespaces plugged the way libvirt plugs them."""
import itertools
import re
import time
import uuid

import pytest
import requests

from virtualwire.core import ids
from vwlab import Lab, extenders, sites

_seq = itertools.count(1)


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


@pytest.fixture(scope='session')
def lab():
    with Lab(3, libvirt=True) as lab:
        lab.start_controller()
        api = Api(lab)
        try:
            wait_until(api.synced, 60, what='controller and 3 hosts')
        except AssertionError as e:
            raise AssertionError('%s\n%s' % (e, lab.diagnostics()))
        yield lab


@pytest.fixture(scope='session')
def api(lab):
    return Api(lab)


@pytest.fixture
def pair(lab, api):
    """make(host_a, host_b) -> (vm_a, vm_b, wire): two fresh one-NIC VMs
    wired together, traffic flowing (ARP warmed by a ping)."""
    made = []

    def make(ha, hb, ip_a='192.0.2.1/24', ip_b='192.0.2.2/24'):
        n = next(_seq)
        a_id, b_id = 'p%da-nic' % n, 'p%db-nic' % n
        va = lab.host(ha).add_vm('p%da' % n, [(a_id, ip_a)])
        vb = lab.host(hb).add_vm('p%db' % n, [(b_id, ip_b)])
        w = api.connect(a_id, b_id)
        made.append(w['id'])
        api.wait_state(w['id'], 'collapsed' if ha == hb else 'tunnelled')
        wait_until(lambda: va.ping(ip_b.split('/')[0], count=1)[1] == 1, 10,
                   what='first ping over the wire')
        return va, vb, w

    yield make
    for wid in made:
        api.req('DELETE', '/v1/wires/%d' % wid)


def flows_of(host, cookie_hex=None):
    """The host's flow lines; with a wire's cookie, that wire's flows
    (whatever their role bits, core.ids ROLE_*)."""
    out = host.dump_flows()
    lines = [l.strip() for l in out.splitlines() if 'cookie=' in l]
    if cookie_hex:
        want = int(cookie_hex, 16) & ids.COOKIE_WIRE_MASK
        lines = [l for l in lines if int(re.search(
            r'cookie=(0x[0-9a-f]+|0)', l).group(1), 16) &
            ids.COOKIE_WIRE_MASK == want]
    return lines


@pytest.fixture
def wired_guest(lab, api):
    """make(subnet) -> (guest on h1, far-end VM on h3, wire id), traffic
    flowing; both removed afterwards."""
    made = []

    def make(subnet):
        h1, _h2, h3 = lab.hosts
        n = next(_seq)
        nic = str(uuid.uuid4())
        g = h1.define_guest('wg%d' % n, [(nic, '%s.1/24' % subnet)])
        far = h3.add_vm('wf%d' % n, [('wf%d-nic' % n, '%s.2/24' % subnet)])
        wid = api.connect(nic, 'wf%d-nic' % n)['id']
        made.append((g, wid))
        api.wait_state(wid, 'tunnelled')
        wait_until(lambda: far.ping(subnet + '.1', count=1)[1] == 1, 20,
                   what='guest answers')
        return g, far, wid
    yield make
    for g, wid in made:
        api.req('DELETE', '/v1/wires/%d' % wid)
        lab.destroy_guest(g)


# ---- two clouds behind NATs, with extenders (test_clouds*.py) ----------
LINKS = [('xa', 'xb'), ('xa', 'xr'), ('xb', 'xr')]


def links_up(lab, want):
    """{(extender, peer): up} as the controller sees them, == want."""
    got = {}
    for h in Api(lab).ok('GET', '/v1/hosts')['hosts']:
        for k in h.get('links', ()):
            got[(h['name'], k['peer'])] = k['up']
    return all(got.get(x) == up for x, up in want.items())


@pytest.fixture(scope='module')
def clouds():
    with Lab(3, sites=['cloud-a', 'cloud-b', 'cloud-a'],
             extenders='xa:cloud-a:nat,xb:cloud-b:nat,xr:relay:public',
             gateways='gw1:cloud-b', libvirt=True) as lab:
        lab.start_controller()
        api = Api(lab)
        try:
            wait_until(api.synced, 60, what='controller and 7 hosts')
            extenders.connect(lab, LINKS)
            wait_until(lambda: links_up(lab, {
                (a, b): True for x, y in LINKS for a, b in ((x, y), (y, x))}),
                30, what='every extender link up')
            # Migration streams between clouds: routed through the
            # extenders, over their encrypted link.
            sites.route_sites(lab)
        except AssertionError as e:
            raise AssertionError('%s\n%s' % (e, lab.diagnostics()))
        yield lab


@pytest.fixture
def cross(clouds):
    """make() -> (vm in cloud-a on h1, vm in cloud-b on h2, wire view),
    wired and answering; removed afterwards."""
    api, made = Api(clouds), []

    def make(n, ip_a='192.0.2.1/24', ip_b='192.0.2.2/24'):
        va = clouds.host('h1').add_vm('ca%d' % n, [('ca%d-nic' % n, ip_a)])
        vb = clouds.host('h2').add_vm('cb%d' % n, [('cb%d-nic' % n, ip_b)])
        w = api.connect('ca%d-nic' % n, 'cb%d-nic' % n)
        made.append(w['id'])
        api.wait_state(w['id'], 'extended', timeout=20)
        wait_until(lambda: va.ping(ip_b.split('/')[0], count=1)[1] == 1, 15,
                   what='first ping across clouds')
        return va, vb, api.wire(w['id'])
    yield make
    for wid in made:
        api.req('DELETE', '/v1/wires/%d' % wid)
