"""The two-cloud lab the cross-cloud migration benchmarks share: cloud-a
(h1, h3, extender xa behind a NAT), cloud-b (h2, extender xb behind a
NAT), libvirt on every hypervisor, the extenders linked and migration
streams routed through their encrypted link."""
import contextlib
import time

from common import Api

from vwlab import Lab, extenders, sites


def wait(fn, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if fn():
            return True
        time.sleep(0.1)
    return False


@contextlib.contextmanager
def two_clouds():
    """(lab, api), torn down on exit."""
    with Lab(3, sites=['cloud-a', 'cloud-b', 'cloud-a'],
             extenders='xa:cloud-a:nat,xb:cloud-b:nat', libvirt=True) as lab:
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(5)
        extenders.connect(lab, [('xa', 'xb')])
        if not wait(lambda: extenders.link_view(lab, 'xa', 'xb')['state'] ==
                    'up', 60):
            raise SystemExit('the extender link did not come up')
        sites.route_sites(lab)
        yield lab, api
