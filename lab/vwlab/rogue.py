"""An impostor for attack tests: a namespace on the lab's management network
with its own ovsdb-server and ovs-vswitchd, made to claim whatever the
test says (another host's name and datapath id, a victim's vNIC), with
whatever certificate it holds (none, another CA's, another host's)."""
import os

from vwlab.guests import Vm
from vwlab.host import LabHost
from vwlab.shell import CONTROLLER_IP, sh


def impostor(lab, name='rogue', index=80):
    """A LabHost on the management network only (no underlay, not
    bootstrapped), OVS running; mgmt address 198.18.0.(10+index)."""
    h = LabHost(lab, index, name, '%s-%s' % (lab.prefix, name),
                os.path.join(lab.dir, name))
    sh(['ip', 'netns', 'add', h.ns])
    sh(['ip', 'link', 'set', 'lo', 'up'], ns=h.ns)
    sh(['ip', 'link', 'add', 'mgmt0', 'netns', h.ns, 'type', 'veth', 'peer',
        'name', name, 'netns', lab.mgmt_ns])
    sh(['ip', 'link', 'set', name, 'master', 'mgmt0', 'up'], ns=lab.mgmt_ns)
    sh(['ip', 'addr', 'add', h.mgmt_ip + '/24', 'dev', 'mgmt0'], ns=h.ns)
    sh(['ip', 'link', 'set', 'mgmt0', 'up'], ns=h.ns)
    h.start_ovs()
    return h


def claim(rogue, victim, vnic, mac, controller, ssl=None):
    """Make `rogue`'s bridge claim to be `victim` (its name, datapath id,
    tunnel address and site) with `vnic` plugged (an internal port with
    the vNIC's MAC), and connect to `controller` (e.g. 'ssl:IP:PORT' or
    'tcp:...'), presenting `ssl` = (key, cert, ca) if given. Returns a Vm
    whose 'rg0' sends as the vNIC."""
    dpid = victim.vsctl('get', 'bridge', 'br-int',
                        'other_config:datapath-id').strip().strip('"')
    rogue.vsctl('--may-exist', 'add-br', 'br-int', '--', 'set', 'bridge',
                'br-int', 'datapath_type=netdev', 'fail_mode=secure',
                'protocols=OpenFlow13,OpenFlow14',
                'other_config:datapath-id=%s' % dpid,
                'other_config:disable-in-band=true',
                'external_ids:vw-host-name=%s' % victim.name,
                'external_ids:vw-tunnel-ip=%s' % victim.tunnel_ip,
                'external_ids:vw-site=%s' % victim.site)
    rogue.vsctl('--may-exist', 'add-port', 'br-int', 'vw-gre', '--', 'set',
                'interface', 'vw-gre', 'type=gre', 'options:key=flow',
                'options:remote_ip=flow', 'ofport_request=65000')
    rogue.vsctl('--may-exist', 'add-port', 'br-int', 'rg0', '--', 'set',
                'interface', 'rg0', 'type=internal',
                'external_ids:iface-id=%s' % vnic,
                'external_ids:attached-mac=%s' % mac,
                'external_ids:iface-status=active')
    sh(['ip', 'link', 'set', 'rg0', 'address', mac, 'up'], ns=rogue.ns)
    if ssl:
        rogue.vsctl('set-ssl', *ssl)
    else:
        rogue.vsctl('del-ssl')
    rogue.vsctl('set-manager', '%s:6640:%s' % (
        'pssl' if ssl else 'ptcp', rogue.mgmt_ip))
    rogue.vsctl('set-controller', 'br-int', controller, '--', 'set',
                'controller', 'br-int', 'max_backoff=1000')
    return Vm(rogue.name, rogue, rogue.ns)


def controller_target(lab, scheme='ssl'):
    return '%s:%s:%d' % (scheme, CONTROLLER_IP, lab.of_port)


def connected(rogue):
    """Does the rogue's bridge say its controller connection is up?"""
    return rogue.vsctl('get', 'controller', 'br-int',
                       'is_connected').strip() == 'true'
