"""A gateway host's physical network in the lab.

A gateway is a lab host bootstrapped with `vw-host-setup --role gateway`
and two physical ports: `p1`, a trunk to a VLAN switch, and `p2`, a whole
port to a machine with a plain NIC. Each is a namespace standing for the
physical network ('<gateway>-trunk', '<gateway>-plain'); its `eth0` is the
other end of the gateway's port.

This kernel has no 802.1Q module (no VLAN devices, no VLAN-filtering
bridge), so the trunk's far end is what a data-center access switch with
VLAN interfaces is: an Open vSwitch of its own in that namespace, the
trunk on `eth0`, and an internal port per VLAN (tag 100, tag 200) holding
the machine's address on that VLAN.

    gateway p1 ==trunk== eth0 [switch: vl100 10.70.0.2, vl200 10.71.0.2]
    gateway p2 --------- eth0 10.72.0.2
"""
import os

from vwlab.guests import Vm
from vwlab.shell import sh

TRUNK_VLANS = {100: '10.70.0.2/24', 200: '10.71.0.2/24'}
PLAIN_IP = '10.72.0.2/24'


def attach(g):
    """Make the gateway's physical ports and the machines behind them, then
    re-run vw-host-setup (idempotent) as a gateway with those ports."""
    g.machines = {}
    for port, kind in (('p1', 'trunk'), ('p2', 'plain')):
        name = '%s-%s' % (g.name, kind)
        ns = '%s-%s' % (g.lab.prefix, name)
        sh(['ip', 'netns', 'add', ns])
        sh(['ip', 'link', 'set', 'lo', 'up'], ns=ns)
        sh(['ip', 'link', 'add', port, 'netns', g.ns, 'type', 'veth',
            'peer', 'name', 'eth0', 'netns', ns])
        for dev, where in ((port, g.ns), ('eth0', ns)):
            # veth TX checksum offload + OVS netdev = bad checksums.
            sh(['ethtool', '-K', dev, 'tx', 'off', 'rxvlan', 'off',
                'txvlan', 'off'], ns=where, check=False)
            sh(['ip', 'link', 'set', dev, 'up'], ns=where)
        if kind == 'trunk':
            _vlan_switch(g, name, ns)
        else:
            sh(['ip', 'addr', 'add', PLAIN_IP, 'dev', 'eth0'], ns=ns)
        g.machines[kind] = Vm(name, g, ns)
    g.bootstrap(['--role', 'gateway', '--gateway-port', 'p1',
                 '--gateway-port', 'p2'])


def _vlan_switch(g, name, ns):
    from vwlab.host import LabHost
    sw = LabHost(g.lab, 0, name, ns, os.path.join(g.lab.dir, name))
    sw.start_ovs()
    sw.vsctl('add-br', 'brm', '--', 'set', 'bridge', 'brm',
             'datapath_type=netdev')
    sw.vsctl('add-port', 'brm', 'eth0')
    for vid, cidr in TRUNK_VLANS.items():
        port = 'vl%d' % vid
        sw.vsctl('add-port', 'brm', port, 'tag=%d' % vid, '--', 'set',
                 'interface', port, 'type=internal')
        sh(['ip', 'addr', 'add', cidr, 'dev', port], ns=ns)
        sh(['ip', 'link', 'set', port, 'up'], ns=ns)
    g.vlan_switch = sw

