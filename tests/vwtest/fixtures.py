"""The labs the integration tests and the soak tier run on, as pytest
fixtures: 3 namespace hosts with their own ovsdb-server/ovs-vswitchd
(netdev datapath), the controller as a real process, VMs as namespaces
plugged the way libvirt plugs them; and two clouds behind NATs joined by
extenders. A conftest imports the ones it offers."""
import contextlib
import uuid

import pytest

from vwlab import Lab, extenders, sites
from vwtest import LINKS, Api, links_up, seq, wait_until
from vwtest.migration import vwctl
from vwtest.wire_traffic import Stream

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
        n = next(seq)
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


@pytest.fixture
def streams(lab):
    """start(va, vb, dst, port) -> a running wire_traffic.Stream that
    the test stops when it is done with it; one a failed test left
    running is killed, not left to load the tests after it."""
    made = []

    def start(va, vb, dst, port, seconds=300, rate=1000, size=64):
        made.append(Stream(lab, va, vb, dst, port, seconds, rate, size))
        return made[-1]
    yield start
    for s in made:
        s.kill()


@pytest.fixture
def wired_guest(lab, api):
    """make(subnet) -> (guest on h1, far-end VM on h3, wire id), traffic
    flowing; both removed afterwards."""
    made = []

    def make(subnet):
        h1, _h2, h3 = lab.hosts
        n = next(seq)
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


@pytest.fixture(scope='package')
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


@contextlib.contextmanager
def shared_settings(lab, api, values):
    """The controller's shared settings {name: text} set live (`vwctl
    config set`, as an operator would), and back as they were after."""
    def now():
        return {s['name']: s['value']
                for s in api.ok('GET', '/v1/settings')['settings']}

    def put(vals):
        for n, v in vals.items():
            p = vwctl(lab, 'config', 'set', n, v)
            assert p.returncode == 0, p.stderr
        wait_until(lambda: all(now()[n] == v for n, v in vals.items()), 15,
                   what='the controller applied %s' % vals)
    before = now()
    put(values)
    try:
        yield
    finally:
        put({n: before[n] for n in values})


@pytest.fixture
def first_frame_activation(lab, api):
    """The behaviour before held frames and activation at the source's
    STOP became the defaults, still selectable: a moving vNIC's
    destination drops what it gets until the guest's first frame there
    switches it over."""
    with shared_settings(lab, api, {'hold': 'off',
                                    'activate-at-stop': 'off'}):
        yield


@contextlib.contextmanager
def frames_held_by_the_controller(lab, api):
    """The lab's hypervisors set up without keeping frames (vw-host-setup
    --no-hold-frames: no vw-hold, no vw-frame-hold), the path before that
    was the default: where a move holds, the controller does, a packet-in
    per frame. Back to the default after."""
    hosts = lab.hosts[:lab.n_hosts]

    def seen(on):
        return all(hold_port_seen(api, h) is on for h in hosts)
    for h in hosts:
        h.keep_frames(False)
    wait_until(lambda: seen(False), 30,
               what='the controller sees no host keeping frames')
    try:
        yield
    finally:
        for h in hosts:
            h.keep_frames(True)
        wait_until(lambda: seen(True), 30,
                   what='the controller sees every host keep frames again')


def hold_port_seen(api, host) -> bool:
    """Does the controller see the host's vw-hold (GET /v1/hosts/NAME)?"""
    return bool(api.ok('GET', '/v1/hosts/%s' % host.name)['hold_port'])
