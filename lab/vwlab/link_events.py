"""Link events on a lab host as libvirt makes them when it plugs a
migrating guest's tap: what OVS 3.1's userspace tunnel race needs to fire
(bench_tunnel_race, tests/integration/test_tunnel_routes.py)."""
import time

from vwlab.shell import sh


def cycle_taps(host, n, tag, plug_first=False, dwell=0.25):
    """n taps made, brought up and plugged into br-int (plugged first,
    then up, if plug_first), each removed again `dwell` s later, `dwell`
    s apart."""
    for i in range(n):
        t = 'rt%s%d' % (tag, i)
        sh(['ip', 'tuntap', 'add', t, 'mode', 'tap'], ns=host.ns)
        if plug_first:
            host.vsctl('add-port', 'br-int', t)
            sh(['ip', 'link', 'set', t, 'up'], ns=host.ns)
        else:
            sh(['ip', 'link', 'set', t, 'up'], ns=host.ns)
            host.vsctl('add-port', 'br-int', t)
        time.sleep(dwell)
        host.vsctl('del-port', 'br-int', t)
        sh(['ip', 'link', 'del', t], ns=host.ns)
        time.sleep(dwell)
