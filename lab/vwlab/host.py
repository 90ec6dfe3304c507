"""One lab hypervisor: a namespace with its own ovsdb-server and
ovs-vswitchd, bootstrapped by vw-host-setup."""
import os
import secrets
import uuid as uuid_mod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, Optional

from vwlab.shell import (CONTROLLER_IP, HOST_SETUP, MGMT_NET,
                         UNDERLAY_MTU, LabError, kill_pidfile, niced, sh)
from vwlab.pki import OVSDB_SERVER_SSL
from vwlab.sites import LINK_NET
from vwlab.guests import Guest, LibvirtGuest, Vm, wait_booted
from vwlab.frame_hold import keep_frames

if TYPE_CHECKING:
    from vwlab import Lab


@dataclass
class LabHost:
    lab: 'Lab'
    index: int
    name: str
    ns: str
    dir: str
    vms: Dict[str, Vm] = field(default_factory=dict)
    _nic_seq: int = 0
    libvirt: Optional[object] = None      # LibvirtHost when the lab has it
    keeps_frames: bool = True            # vw-hold (vw-host-setup's default)
    ring: Optional[object] = None         # its vw-frame-hold (FrameHold)

    @property
    def mgmt_ip(self):
        return '%s.%d' % (MGMT_NET, 10 + self.index)

    @property
    def tunnel_ip(self):
        return '%s.%d' % (self.lab.ul_net_of(self.index), 10 + self.index)

    @property
    def site(self):
        return self.lab.site_of(self.index)

    @property
    def spec(self):
        """The ExtenderSpec of an extender, else None."""
        k = self.index - self.lab.n_hosts - 1
        return self.lab.extender_specs[k] \
            if 0 <= k < len(self.lab.extender_specs) else None

    @property
    def link_ip(self):
        """An extender's address on the link network."""
        return '%s.%d' % (LINK_NET, self.index - self.lab.n_hosts)

    @property
    def scheme(self):
        """ssl (the lab's default) or tcp (a plaintext lab)."""
        return 'ssl' if self.lab.pki else 'tcp'

    @property
    def db(self):
        return 'unix:%s/db.sock' % self.dir

    def env(self):
        return dict(os.environ, OVS_RUNDIR=self.dir)

    def vsctl(self, *args):
        return sh(['ovs-vsctl', '--db=' + self.db, '--timeout=10'] + list(args))

    def controller_targets(self):
        """The bridge's controller targets (every instance and the
        collector)."""
        return self.vsctl('get-controller', 'br-int').split()

    def set_controllers(self, targets):
        """Connect br-int to `targets` again, each reconnecting within a
        second and probed within 5 s, 512 messages queued for each, as
        vw-host-setup leaves them."""
        self.vsctl('set-controller', 'br-int', *targets)
        for uuid in self.vsctl('--bare', '--columns=_uuid', 'list',
                               'controller').split():
            self.vsctl('set', 'controller', uuid, 'max_backoff=1000',
                       'inactivity_probe=5000', 'controller_queue_size=512')

    def ofctl(self, *args, bridge='br-int'):
        return sh(['ovs-ofctl', '-O', 'OpenFlow14'] + list(args[:1]) +
                  ['unix:%s/%s.mgmt' % (self.dir, bridge)] + list(args[1:]))

    def appctl(self, *args):
        return sh(['ovs-appctl', '-t', '%s/vswitchd.ctl' % self.dir]
                  + list(args))

    def log_datapath_flow_changes(self, on=True):
        """Have vswitchd log every datapath flow it adds, changes or deletes
        (dpif_netdev at debug level) to its log file. Every one: OVS rate
        limits those lines (600 a minute, dpif-netdev.c's upcall_rl), and
        a bench with six moving guests went past it, so flow changes at a
        hole were missing from the log."""
        self.appctl('vlog/set', 'dpif_netdev:file:%s' % ('dbg' if on
                                                          else 'info'))
        self.appctl('vlog/%s-rate-limit' % ('disable' if on else 'enable'),
                    'dpif_netdev')

    def vswitchd_log(self):
        with open(os.path.join(self.dir, 'vswitchd.log'),
                  errors='replace') as f:
            return f.read()

    def dump_flows(self):
        """[(cookie, table, priority, match, actions, n_packets)]"""
        return self.ofctl('dump-flows', '--no-names')

    # ---- OVS lifecycle -------------------------------------------------
    def start_ovs(self):
        os.makedirs(self.dir, exist_ok=True)
        db = os.path.join(self.dir, 'conf.db')
        if not os.path.exists(db):
            sh(['ovsdb-tool', 'create', db,
                '/usr/share/openvswitch/vswitch.ovsschema'])
        sh(niced(self.lab.ovs_nice, [
            'ovsdb-server', db, '--remote=punix:%s/db.sock' % self.dir,
            '--remote=db:Open_vSwitch,Open_vSwitch,manager_options'] + (
                OVSDB_SERVER_SSL if self.lab.pki else []) + [
            '--pidfile=%s/ovsdb-server.pid' % self.dir,
            '--unixctl=%s/ovsdb-server.ctl' % self.dir,
            '--log-file=%s/ovsdb-server.log' % self.dir,
            '--detach', '--no-chdir']), ns=self.ns, env=self.env())
        self.vsctl('--no-wait', 'init')
        self.start_vswitchd()

    def stop_vswitchd(self):
        kill_pidfile(os.path.join(self.dir, 'vswitchd.pid'))

    def start_vswitchd(self):
        raise_packet_socket_buffers(self.lab.packet_socket_buffer)
        sh(niced(self.lab.ovs_nice, [
            'ovs-vswitchd', self.db, '--pidfile=%s/vswitchd.pid' % self.dir,
            '--unixctl=%s/vswitchd.ctl' % self.dir,
            '--log-file=%s/vswitchd.log' % self.dir,
            '--detach', '--no-chdir', '--disable-system'] + (
                [] if self.lab.system_routes else ['--disable-system-route'])),
           ns=self.ns, env=self.env())
        if not self.lab.system_routes:
            # What the package's drop-in for ovs-vswitchd.service does
            # after every start: its own routes went with the process.
            sh([HOST_SETUP, 'routes', '--db', self.db, '--bridge', 'br-int',
                '--vswitchd-ctl', self.vswitchd_ctl], ns=self.ns,
               env=self.env())

    @property
    def vswitchd_ctl(self):
        return '%s/vswitchd.ctl' % self.dir

    def bootstrap(self, extra=()):
        """vw-host-setup as the lab runs it (`extra` added); its output."""
        return sh([HOST_SETUP, '--db', self.db, '--name', self.name,
            '--tunnel-ip', self.tunnel_ip,
            '--controller', self.lab.of_targets(self.scheme),
            '--manager', 'p%s:6640:%s' % (self.scheme, self.mgmt_ip),
            # Only the controllers' address reaches it (not, e.g., a
            # machine holding the collector's certificate).
            '--manager-from', CONTROLLER_IP,
            '--guard-file', os.path.join(self.dir, 'ovsdb-guard.nft'),
            '--site', self.site,
            '--carrier', self.lab.carrier,
            '--datapath-type', 'netdev', '--bridge', 'br-int',
            '--underlay-bridge', 'br-phy', '--underlay-iface', 'ul0',
            '--underlay-cidr', '%s/24' % self.tunnel_ip,
            '--underlay-mtu', str(UNDERLAY_MTU),
            '--vswitchd-ctl', self.vswitchd_ctl] +
           (['--role', 'extender', '--link-cidr', '%s/24' % self.link_ip]
            if self.spec else []) + (
                self.lab.pki.host_setup_args(self.name) if self.lab.pki
                else ['--insecure-plaintext-lab']) +
           ([] if self.keeps_frames else ['--no-hold-frames']) + list(extra),
           ns=self.ns, env=self.env())

    def underlay_mac(self):
        return sh(['cat', '/sys/class/net/br-phy/address'], ns=self.ns).strip()

    def keep_frames(self, on=True, ring=True):
        """vw-hold and vw-frame-hold on this hypervisor, or not
        (vwlab.frame_hold.keep_frames)."""
        keep_frames(self, on, ring)

    # ---- stand-in VMs --------------------------------------------------
    def place(self, vnic_id, bridge='br-int'):
        """The cloud's word that `vnic_id` runs here (only our bridge's
        vNICs are VirtualWire's)."""
        if bridge == 'br-int':
            self.lab.placements.place(vnic_id, self.name)

    def add_vm(self, name, nics, bridge='br-int', place=True):
        """nics: [(vnic_id, ip_cidr or None)]. The VM is a namespace; each
        NIC a veth whose host side is plugged into `bridge` as libvirt
        plugs a tap (each placed here first, as the cloud would, unless
        place=False: a host plugging what is not its own)."""
        vm_ns = '%s-%s' % (self.lab.prefix, name)
        sh(['ip', 'netns', 'add', vm_ns])
        vm_uuid = str(uuid_mod.uuid4())
        vm = Vm(name, self, vm_ns, uuid=vm_uuid)
        self.vms[name] = vm
        for i, (vnic_id, cidr) in enumerate(nics):
            self.plug(vm, vnic_id, 'eth%d' % i, cidr, vm_uuid, bridge=bridge,
                      place=place)
        return vm

    def add_paused_vm(self, name, nics, vm_uuid='', place=True):
        """A VM that sends nothing until told to, like a migrating guest
        on its destination before RESUME: a namespace with IPv6 off (no
        router solicitation or MLD report when a NIC comes up) holding
        `nics` [(vnic_id, mac)] as eth0, eth1, ..., all of one guest
        (`vm_uuid`, libvirt's vm-id)."""
        vm_ns = '%s-%s' % (self.lab.prefix, name)
        sh(['ip', 'netns', 'add', vm_ns])
        sh(['sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1',
            'net.ipv6.conf.default.disable_ipv6=1'], ns=vm_ns)
        vm = Vm(name, self, vm_ns)
        self.vms[name] = vm
        vm_uuid = vm_uuid or secrets.token_hex(16)
        for i, (vnic_id, mac) in enumerate(nics):
            self.plug(vm, vnic_id, 'eth%d' % i, mac=mac, vm_uuid=vm_uuid,
                      place=place)
        return vm

    def remove_vm(self, vm):
        """Unplug all of a namespace VM's vNICs and delete it."""
        for v in list(vm.nics):
            self.unplug(vm, v)
        self.vms.pop(vm.name, None)
        sh(['ip', 'netns', 'del', vm.ns], check=False)

    def plug(self, vm, vnic_id, ifname, cidr=None, vm_uuid='', mtu=1500,
             mac=None, bridge='br-int', place=True):
        if place:
            self.place(vnic_id, bridge)
        self._nic_seq += 1
        # Not libvirt's vnetN: a libvirt guest on this host takes those.
        port = 'vwveth%d' % self._nic_seq
        tmp = 'vwtmp%d' % self._nic_seq
        mac = mac or '52:54:00:%02x:%02x:%02x' % (
            self.index, self._nic_seq >> 8 & 255, self._nic_seq & 255)
        sh(['ip', 'link', 'add', port, 'type', 'veth', 'peer', 'name', tmp],
           ns=self.ns)
        sh(['ip', 'link', 'set', tmp, 'netns', vm.ns], ns=self.ns)
        sh(['ip', 'link', 'set', tmp, 'name', ifname], ns=vm.ns)
        sh(['ip', 'link', 'set', ifname, 'address', mac, 'mtu', str(mtu)],
           ns=vm.ns)
        for ns, dev in ((self.ns, port), (vm.ns, ifname)):
            # veth TX checksum offload + OVS netdev = UDP with bad checksums.
            sh(['ethtool', '-K', dev, 'tx', 'off'], ns=ns, check=False)
            sh(['ip', 'link', 'set', dev, 'up'], ns=ns)
        sh(['ip', 'link', 'set', 'lo', 'up'], ns=vm.ns)
        if cidr:
            sh(['ip', 'addr', 'add', cidr, 'dev', ifname], ns=vm.ns)
        self.vsctl('add-port', bridge, port, '--', 'set', 'interface', port,
                   'external_ids:iface-id=%s' % vnic_id,
                   'external_ids:attached-mac=%s' % mac,
                   'external_ids:vm-id=%s' % (vm_uuid or secrets.token_hex(16)),
                   'external_ids:iface-status=active')
        vm.nics[vnic_id] = {'port': port, 'ifname': ifname, 'mac': mac,
                            'cidr': cidr}
        return vm.nics[vnic_id]

    def add_guest(self, name, nics, memory_mb=128, boot_timeout=60,
                  place=True):
        """Boot the lab guest under QEMU (TCG, single-threaded: see the lab
        notes) with one virtio-net NIC per (vnic_id, ip_cidr); waits until
        its /init says it is ready."""
        from vwlab import guest_image
        img = guest_image.build()
        os.makedirs(self.dir, exist_ok=True)
        g = Guest(name, self, os.path.join(self.dir, name + '.qemu.pid'),
                  os.path.join(self.dir, name + '.console'))
        vm_uuid = secrets.token_hex(16)
        net_args, nets = [], []
        for i, (vnic_id, cidr) in enumerate(nics):
            self._nic_seq += 1
            tap = 'vwtap%d' % self._nic_seq
            mac = '52:54:00:%02x:%02x:%02x' % (
                self.index, 0x80 | self._nic_seq >> 8 & 127,
                self._nic_seq & 255)
            # csum=off: the guest writes full checksums (notes, section 5).
            net_args += ['-netdev', 'tap,id=n%d,ifname=%s,script=no,'
                         'downscript=no' % (i, tap), '-device',
                         'virtio-net-pci,netdev=n%d,mac=%s,csum=off' % (i,
                                                                       mac)]
            nets.append('eth%d=%s' % (i, cidr))
            g.nics[vnic_id] = {'port': tap, 'ifname': 'eth%d' % i,
                               'mac': mac, 'cidr': cidr}
        sh(['qemu-system-x86_64', '-name', 'guest=%s,debug-threads=on' % name,
            '-accel', 'tcg,thread=single', '-m', str(memory_mb), '-smp', '1',
            '-no-reboot', '-kernel', img['kernel'],
            '-initrd', img['initrd'], '-append',
            'console=ttyS0 quiet panic=-1 vw.net=' + ','.join(nets),
            '-serial', 'file:' + g.console, '-monitor', 'none',
            '-display', 'none', '-pidfile', g.pidfile, '-daemonize']
           + net_args, ns=self.ns)
        for vnic_id, info in g.nics.items():
            if place:
                self.place(vnic_id)
            sh(['ip', 'link', 'set', info['port'], 'up'], ns=self.ns)
            self.vsctl('add-port', 'br-int', info['port'], '--', 'set',
                       'interface', info['port'],
                       'external_ids:iface-id=%s' % vnic_id,
                       'external_ids:attached-mac=%s' % info['mac'],
                       'external_ids:vm-id=%s' % vm_uuid,
                       'external_ids:iface-status=active')
        wait_booted(g, boot_timeout)
        self.vms[name] = g
        return g

    def define_guest(self, name, nics, boot_timeout=60, beacon=None,
                     bridge='br-int', memory_mb=128, cmdline=(), place=True):
        """Start the lab guest through this host's libvirtd, NICs as
        <interface type='bridge'><virtualport type='openvswitch'> with an
        interfaceid each, on `bridge`. nics: [(interfaceid (a UUID),
        ip_cidr)]. beacon:
        'IP:PORT:MICROSECONDS' the guest sends sequenced datagrams to.
        cmdline: more of the guest's kernel command line, what its /init
        reads: e.g. 'vw.dirty=MIB:PAGES_PER_SECOND:sparse|dense' (a working
        set it keeps writing), vw.router/vw.ospf/vw.bgp (it routes: BIRD,
        vwlab.routers)."""
        from vwlab import guest_image
        from vwlab.libvirt_host import domain_xml
        if self.libvirt is None:
            raise LabError('lab was made without libvirt (Lab(libvirt=True))')
        img = guest_image.build()
        d = os.path.join(self.lab.dir, 'guests')
        os.makedirs(d, exist_ok=True)
        g = LibvirtGuest(name, os.path.join(d, name + '.console'),
                         os.path.join(d, name + '.xml'),
                         str(uuid_mod.uuid4()))
        # A new guest's console starts empty: QEMU appends (the console
        # must outlive a migration), and an earlier guest of this name's
        # crash read as this one's (a loop over a test on one lab saw it).
        if os.path.exists(g.console):
            os.unlink(g.console)
        spec = []
        for vnic_id, cidr in nics:
            if place:
                self.place(vnic_id, bridge)
            self._nic_seq += 1
            mac = '52:54:00:%02x:%02x:%02x' % (
                self.index, 0x40 | self._nic_seq >> 8 & 63,
                self._nic_seq & 255)
            spec.append((vnic_id, mac, cidr))
            g.nics[vnic_id] = {'mac': mac, 'cidr': cidr}
        with open(g.xml, 'w') as f:
            f.write(domain_xml(name, spec, img['kernel'], img['initrd'],
                               g.console, dom_uuid=g.uuid, beacon=beacon,
                               bridge=bridge, memory_mb=memory_mb,
                               cmdline=cmdline))
        self.libvirt.virsh('create', g.xml)
        wait_booted(g, boot_timeout)
        return g

    def unplug(self, vm, vnic_id):
        """Unplug a vNIC (its info dict is returned, to plug it again)."""
        info = vm.nics.pop(vnic_id)
        port = info['port']
        self.vsctl('--if-exists', 'del-port', 'br-int', port)
        sh(['ip', 'link', 'del', port], ns=self.ns, check=False)
        return info


# ovs-vswitchd on the netdev datapath reads every port through an AF_PACKET
# socket it never sizes, so the kernel's default receive buffer (208 KiB,
# about 90 small frames) is all that absorbs the moments a starved switch
# is not scheduled: on two shared cores, during a migration between clouds,
# the kernel counted 1,449 frames dropped on those sockets (vwlab.overruns)
# with the default and none with 4 MiB. net.core.rmem_default is not per
# network namespace, so this is the machine's setting (raised, never
# lowered); ovs-config/99-virtualwire-netdev.conf is the same for a host.
PACKET_SOCKET_BUFFER = 4 << 20


def raise_packet_socket_buffers(exactly=None):
    """Raise the machine's socket buffer defaults to PACKET_SOCKET_BUFFER;
    `exactly`: set them to that size, up or down (a benchmark measuring
    the kernel's default: bench_streams)."""
    want = exactly or PACKET_SOCKET_BUFFER
    for name in ('rmem_max', 'rmem_default', 'wmem_max', 'wmem_default'):
        path = '/proc/sys/net/core/' + name
        with open(path) as f:
            have = int(f.read())
        if have == want or (exactly is None and have >= want):
            continue
        with open(path, 'w') as f:
            f.write(str(want))
