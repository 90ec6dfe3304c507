"""The systems bench_migration.py migrates side by side (VirtualWire, the
same with held frames, OVN): each one's guest, far and near ends, how it
migrates, and whether its guest crashed."""
import glob
import os
import time
import uuid

from vwlab import guest_crash
from vwlab.shell import sh


def console_marks(guest):
    """Checked after each migration and again before the next one (a
    reboot takes seconds to show)."""
    return guest_crash.marks(guest.console_text())


class System:
    """One system's guest, far and near ends, and how it migrates."""

    def __init__(self, name, guest, ends, ports=None, ovn=None, api=None,
                 hold=None):
        self.crashes = 0
        # Ours: ask for held frames (the destination's hook says so), or
        # (None) follow the controller's --hold.
        self.hold = hold
        self.api = api          # ours: when the controller saw activation
        self.name, self.guest, self.ends = name, guest, ends
        self.ports, self.ovn = ports or [], ovn
        self.where, self.rows = None, {k: [] for k in ends}
        self.marks = None

    def make_guest(self, lab, host):
        """(Re)create the guest on `host` with its vNIC ids; OVN learns its
        new MACs. Used after a crash: the run says nothing about the
        network, and a crashed guest answers nothing afterwards."""
        if self.guest is not None:
            lab.destroy_guest(self.guest)
        bridge = 'br-ovn' if self.ovn else 'br-int'
        nics = [(nic, ip + '/24') for _vm, ip, nic in self.ends.values()]
        if not self.ovn:            # the cloud places it where it starts
            for _nic, _cidr in nics:
                place(self.api, _nic, host.name)
        self.guest = host.define_guest('bm-%s' % self.name, nics,
                                       bridge=bridge)
        if self.ovn:
            for p in self.ports:
                ip = [ip for _vm, ip, nic in self.ends.values()
                      if nic == p][0]
                self.ovn.nbctl('lsp-set-options', p, 'requested-chassis=%s'
                               % host.name)
                self.ovn.nbctl('lsp-set-addresses', p, '%s %s' % (
                    self.guest.nics[p]['mac'], ip))
                self.ovn.wait_up(p)
        self.where, self.marks = host, None
        self.wait_answers()

    def wait_answers(self):
        for vm, ip, _nic in self.ends.values():
            for _ in range(200):
                if vm.ping(ip, count=1, wait=1)[1]:
                    break
            else:
                raise SystemExit('%s: %s does not answer' % (self.name, ip))

    def valid(self):
        return sum(1 for r in self.rows['far'] if not r['guest_crashed'])

    def before(self, src, dst):
        if self.api is not None:        # ours: the hook says, or not
            dst.libvirt.install_hook(hold=self.hold)
        for p in self.ports:
            self.ovn.prepare_move(p, src.name, dst.name)

    def after(self, dst):
        for p in self.ports:
            self.ovn.finish_move(p, dst.name)


def place(api, vnic, host):
    """The cloud's word that `vnic` runs on `host` (strict placement
    needs it; trusting hosts, it changes nothing)."""
    api.call('PUT', '/v1/vnics/%s/placement' % vnic, {'host': host})


def setup(lab, api, ovn, held=True):
    h1, _h2, h3 = lab.hosts
    systems = []
    for name, bridge, net in (('virtualwire', 'br-int', 91),
                              ('ovn', 'br-ovn', 93)) + (
                                  (('held', 'br-int', 95),) if held else ()):
        nf, nn = str(uuid.uuid4()), str(uuid.uuid4())
        if bridge == 'br-int':      # as the cloud would, before they run
            for nic, host in ((nf, h1), (nn, h1), ('bf-%s' % name[:3], h3),
                              ('bn-%s' % name[:3], h1)):
                place(api, nic, host.name)
        g = h1.define_guest('bm-%s' % name, [
            (nf, '10.%d.0.1/24' % net), (nn, '10.%d.0.1/24' % (net + 1))],
            bridge=bridge)
        far = h3.add_vm('bf-%s' % name[:3], [
            ('bf-%s' % name[:3], '10.%d.0.2/24' % net)], bridge=bridge)
        near = h1.add_vm('bn-%s' % name[:3], [
            ('bn-%s' % name[:3], '10.%d.0.2/24' % (net + 1))], bridge=bridge)
        ends = {'far': (far, '10.%d.0.1' % net, nf),
                'near': (near, '10.%d.0.1' % (net + 1), nn)}
        if bridge == 'br-int':
            for vm, _ip, nic in ends.values():
                api.call('POST', '/v1/wires', {'a': nic, 'b': vm.name})
            systems.append(System(name, g, ends, api=api,
                                  hold=True if name == 'held' else None))
        else:
            for k, (vm, ip, nic) in ends.items():
                ls = 'ls-%s' % k
                ovn.add_port(ls, nic, g.nics[nic]['mac'], ip)
                ovn.add_port(ls, vm.name, vm.nics[vm.name]['mac'],
                             ip[:-1] + '2')
            for k, (vm, ip, nic) in ends.items():
                ovn.wait_up(nic)
                ovn.wait_up(vm.name)
            systems.append(System(name, g, ends, [nf, nn], ovn))
        systems[-1].wait_answers()
        systems[-1].where = h1
    return systems


def crashed_late(sysm, wait):
    """Did the guest (whose console said nothing yet) stop answering? A
    crash can take a moment to reach the console."""
    time.sleep(wait)
    vm, ip, _nic = sysm.ends['far']
    if vm.ping(ip, count=3, interval=0.2, wait=1)[1] > 0:
        return console_marks(sysm.guest) > sysm.marks
    return True


def realtime(lab):
    """All threads of the switches and both systems' controllers
    SCHED_RR 1."""
    pidfiles = [os.path.join(h.dir, 'vswitchd.pid') for h in lab.hosts] + \
        glob.glob(os.path.join(lab.dir, '**', 'ovn-controller.pid'),
                  recursive=True)
    pids = [open(p).read().strip() for p in pidfiles] + \
        [str(lab.controller.pid)]
    for pid in pids:
        sh(['chrt', '-a', '-r', '-p', '1', pid])
    print('SCHED_RR 1: %d processes' % len(pids), flush=True)
