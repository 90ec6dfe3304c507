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
def two_clouds(link_rate=None, wan_rate=None):
    """(lab, api), torn down on exit. link_rate: the extender agents'
    --link-rate (None: the lab's); wan_rate: each site's NAT sends at most
    this (tc tbf on its public side: a WAN link of that rate)."""
    with Lab(3, sites=['cloud-a', 'cloud-b', 'cloud-a'],
             extenders='xa:cloud-a:nat,xb:cloud-b:nat', libvirt=True) as lab:
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(5)
        if wan_rate:
            for site in lab.clouds.order:
                lab.clouds.shape_wan(site, wan_rate)
        extenders.connect(lab, [('xa', 'xb')], link_rate=link_rate)
        if not wait(lambda: extenders.link_view(lab, 'xa', 'xb')['state'] ==
                    'up', 60):
            raise SystemExit('the extender link did not come up')
        sites.route_sites(lab)
        yield lab, api
