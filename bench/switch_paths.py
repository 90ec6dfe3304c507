"""The paths bench_switches.py measures, built in one lab: VM pairs joined
by a plain wire, by a provider switch (central, collapsed, split), by a
Linux bridge in a VM (the VM kind's switch), and by an OVN logical
switch on the same hosts. Every pair exists at once, each on its own
/24, so a round measures every path back to back on the same machine.

A "VM" here is the lab's stand-in (a namespace plugged as libvirt plugs
a tap): the VM switch's cost is its two extra crossings of the host's
datapath (into the VM and out), the copies section 4.2 of the paper
avoids by running the switch in the host; not a hypervisor's (this
machine has no KVM, and a TCG guest's forwarding would measure QEMU's
CPU emulator).
"""
import subprocess
import time
from dataclasses import dataclass, field
from typing import Dict, List

TENANT = 'bench'


@dataclass
class Pair:
    """Who sends (on h1) and who answers (on h2), by path."""
    case: str
    a: object
    b: object
    b_ip: str


@dataclass
class Paths:
    latency: Dict[str, Pair] = field(default_factory=dict)
    # case -> the two pairs a 2-flow run drives at once
    throughput: Dict[str, List[Pair]] = field(default_factory=dict)


class Builder:
    """Makes the VMs, wires, switches and OVN ports of every case."""

    def __init__(self, lab, api, ovn):
        self.lab, self.api, self.ovn = lab, api, ovn
        self.h1, self.h2, self.h3 = lab.hosts
        self.net = 60
        self.vnics = 0

    # -- parts ---------------------------------------------------------------
    def _pair(self, case, tag, bridge='br-int', tenant=None):
        """Two one-NIC VMs, tag+'a' on h1 and tag+'b' on h2, on a fresh
        /24 (a is .1, b is .2)."""
        self.net += 1
        a = self.h1.add_vm(tag + 'a', [(tag + 'a', '10.%d.0.1/24' % self.net)],
                           bridge=bridge)
        b = self.h2.add_vm(tag + 'b', [(tag + 'b', '10.%d.0.2/24' % self.net)],
                           bridge=bridge)
        self.vnics += 2 if bridge == 'br-int' else 0
        for vm in (a, b):
            # No IPv6 chatter in what is measured.
            vm.sh(['sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1'])
        if tenant:
            self._seen()
            for nic in (tag + 'a', tag + 'b'):
                self.api.call('PUT', '/v1/vnics/%s/tenant' % nic,
                              {'tenant': tenant})
        return Pair(case, a, b, '10.%d.0.2' % self.net)

    def _seen(self):
        end = time.time() + 30
        while len(self.api.call('GET', '/v1/vnics')['vnics']) < self.vnics:
            if time.time() > end:
                raise RuntimeError('the controller did not see %d vNICs'
                                   % self.vnics)
            time.sleep(0.1)

    def _wire(self, a, b):
        self._seen()
        self.api.call('POST', '/v1/wires', {'a': a, 'b': b})

    def _switch(self, name, host, pairs):
        """A provider switch on `host` with a port per VM of `pairs`."""
        self.api.call('POST', '/v1/switches', {
            'name': name, 'ports': 2 * len(pairs), 'tenant': TENANT,
            'host': host.name})
        k = 0
        for p in pairs:
            for vm in (p.a, p.b):
                k += 1
                self._wire(vm.name, 'sw:%s/p%d' % (name, k))

    def _bridge_vm(self, name, host, pair):
        """A VM on `host` whose two NICs a Linux bridge joins; `pair`'s
        ends wired to them."""
        vm = host.add_vm(name, [(name + '-0', None), (name + '-1', None)])
        self.vnics += 2
        vm.sh(['sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1'])
        vm.sh(['ip', 'link', 'add', 'br0', 'type', 'bridge'])
        for dev in ('eth0', 'eth1'):
            vm.sh(['ip', 'link', 'set', dev, 'master', 'br0'])
        vm.sh(['ip', 'link', 'set', 'br0', 'up'])
        self._wire(pair.a.name, name + '-0')
        self._wire(pair.b.name, name + '-1')

    def _ovn(self, name, pairs):
        for p in pairs:
            for vm in (p.a, p.b):
                nic = next(iter(vm.nics.values()))
                self.ovn.add_port(name, vm.name, nic['mac'],
                                  nic['cidr'].split('/')[0])
        for p in pairs:
            for vm in (p.a, p.b):
                self.ovn.wait_up(vm.name)

    # -- the cases -----------------------------------------------------------
    def build(self):
        h1, h3 = self.h1, self.h3
        paths = Paths()
        lat = paths.latency
        lat['wire'] = self._pair('wire', 'lw')
        self._wire('lwa', 'lwb')
        for case, tag, host in (('host switch', 'lh', h3),
                                ('host switch, collapsed', 'lc', h1)):
            lat[case] = self._pair(case, tag, tenant=TENANT)
            self._switch(tag + 'sw', host, [lat[case]])
        for case, tag, host in (('VM switch', 'lv', h3),
                                ('VM switch, collapsed', 'lx', h1)):
            lat[case] = self._pair(case, tag)
            self._bridge_vm(tag + 'br', host, lat[case])
        lat['OVN switch'] = self._pair('OVN switch', 'lo', bridge='br-ovn')
        self._ovn('ls-lat', [lat['OVN switch']])

        tp = paths.throughput
        tp['wires'] = [self._pair('wires', 'tw%d' % i) for i in (1, 2)]
        for p in tp['wires']:
            self._wire(p.a.name, p.b.name)
        tp['central switch'] = [self._pair('central switch', 'tc%d' % i,
                                           tenant=TENANT) for i in (1, 2)]
        self._switch('tcsw', h3, tp['central switch'])
        tp['split switch'] = [self._pair('split switch', 'ts%d' % i,
                                         tenant=TENANT) for i in (1, 2)]
        # Made on h1, so the parts are h1 and h2 (one made on h3 would
        # keep an empty part there that floods still reach).
        self._switch('tssw', h1, tp['split switch'])
        self.api.call('PUT', '/v1/switches/tssw/parts', {'auto': True})
        tp['OVN switch'] = [self._pair('OVN switch', 'to%d' % i,
                                       bridge='br-ovn') for i in (1, 2)]
        self._ovn('ls-tp', tp['OVN switch'])
        for p in list(lat.values()) + [p for ps in tp.values() for p in ps]:
            wait_reaches(p)
        return paths

    def describe(self):
        """Where each switch ended up (the proof a case is what it says)."""
        out = {}
        for sw in self.api.call('GET', '/v1/switches')['switches']:
            out[sw['name']] = {'host': sw['host'], 'split': sw.get('split'),
                               'parts': sw.get('parts')}
        return out


def wait_reaches(p, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        r = subprocess.run(['ip', 'netns', 'exec', p.a.ns, 'ping', '-n',
                            '-c', '1', '-W', '1', p.b_ip],
                           capture_output=True)
        if r.returncode == 0:
            return
    raise RuntimeError('%s: %s never reached %s' % (p.case, p.a.name,
                                                    p.b_ip))
