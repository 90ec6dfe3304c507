"""The lab: hypervisors as network namespaces, each with its own
ovsdb-server and ovs-vswitchd, joined by an underlay and a management
network (each a Linux bridge in a namespace of its own), and stand-in VMs
(a namespace per VM, a veth into the host bridge, external_ids exactly as
libvirt sets them). Nothing leaves the namespaces the lab makes.

Addresses: management 198.18.0.0/24 (controller .1, host i .10+i),
underlay 198.19.0.0/24 (host i .10+i). RFC 2544 benchmark ranges, and
private to the lab's namespaces, so two labs never collide.
"""
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
import uuid as uuid_mod
from dataclasses import dataclass, field
from typing import Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
HOST_SETUP = os.path.join(REPO, 'ovs-config', 'vw-host-setup')
LAB_ROOT = os.environ.get('VW_LAB_ROOT', '/tmp/virtualwire-labs')
MGMT_NET, UL_NET = '198.18.0', '198.19.0'
CONTROLLER_IP = MGMT_NET + '.1'
UNDERLAY_MTU = 1600


class LabError(Exception):
    pass


def sh(cmd, ns=None, check=True, env=None, timeout=60):
    """Run a command (a list, or a string for sh -c), optionally in a netns."""
    if isinstance(cmd, str):
        cmd = ['sh', '-c', cmd]
    if ns:
        cmd = ['ip', 'netns', 'exec', ns] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=timeout)
    if check and p.returncode != 0:
        text = ' '.join(shlex.quote(c) for c in cmd)
        if len(text) > 300:
            text = text[:300] + '...'
        raise LabError('%s failed (%d): %s' % (
            text, p.returncode,
            (p.stderr or p.stdout).strip()))
    return p.stdout


@dataclass
class Vm:
    name: str
    host: 'LabHost'
    ns: str
    nics: Dict[str, dict] = field(default_factory=dict)   # vnic_id -> info

    def sh(self, cmd, check=True, timeout=60):
        return sh(cmd, ns=self.ns, check=check, timeout=timeout)

    def tool_cmd(self, *args):
        return ['ip', 'netns', 'exec', self.ns, sys.executable, '-m',
                'vwlab.traffic'] + [str(a) for a in args]

    def tool(self, *args, timeout=60):
        """Run a traffic tool in this VM; returns its last JSON line."""
        p = subprocess.run(self.tool_cmd(*args), capture_output=True,
                           text=True, timeout=timeout)
        if p.returncode != 0:
            raise LabError('traffic %s in %s failed: %s'
                           % (args[0], self.name, p.stderr.strip()))
        lines = [l for l in p.stdout.splitlines() if l.strip()]
        return json.loads(lines[-1]) if lines else None

    def tool_bg(self, *args):
        return subprocess.Popen(self.tool_cmd(*args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def ping(self, dst, count=3, interval=0.2, size=56, df=False, wait=2):
        cmd = ['ping', '-n', '-q', '-c', str(count), '-i', str(interval),
               '-s', str(size), '-W', str(wait), dst]
        if df:
            cmd[1:1] = ['-M', 'do']
        p = subprocess.run(['ip', 'netns', 'exec', self.ns] + cmd,
                           capture_output=True, text=True,
                           timeout=count * (interval + wait) + 10)
        import re
        m = re.search(r'(\d+) packets transmitted, (\d+) received', p.stdout)
        return (int(m.group(1)), int(m.group(2))) if m else (count, 0)


def _wait_booted(guest, timeout):
    """Until the guest's /init has said it is ready on the console."""
    end = time.time() + timeout
    while 'vw-guest: ready' not in guest.console_text():
        if time.time() > end:
            raise LabError('guest %s did not boot in %ds; console:\n%s'
                           % (guest.name, timeout,
                              guest.console_text()[-2000:]))
        time.sleep(0.1)


def _read_text(path):
    try:
        with open(path, errors='replace') as f:
            return f.read()
    except OSError:
        return ''


@dataclass
class Guest:
    """A real QEMU guest (the lab guest image, TCG) whose NICs are taps
    plugged into the host bridge as libvirt plugs them. Inside it,
    vw-responder echoes UDP on port 7000."""
    name: str
    host: 'LabHost'
    pidfile: str
    console: str
    nics: Dict[str, dict] = field(default_factory=dict)   # vnic_id -> info

    def console_text(self):
        return _read_text(self.console)

    def stop(self):
        """Stop QEMU and unplug its taps, as libvirt does when a guest
        stops. A stale port left in OVSDB would be re-added under the same
        name by the next tap's `del-port; add-port`, and the userspace
        datapath keeps the dead device open: frames to it vanish."""
        _kill_pidfile(self.pidfile)
        for info in self.nics.values():
            self.host.vsctl('--if-exists', 'del-port', 'br-int', info['port'])


@dataclass
class LibvirtGuest:
    """A lab guest run by libvirt (it may move between hosts)."""
    name: str
    console: str
    xml: str
    uuid: str = ''
    nics: Dict[str, dict] = field(default_factory=dict)   # vnic_id -> info

    def console_text(self):
        return _read_text(self.console)


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

    @property
    def mgmt_ip(self):
        return '%s.%d' % (MGMT_NET, 10 + self.index)

    @property
    def tunnel_ip(self):
        return '%s.%d' % (UL_NET, 10 + self.index)

    @property
    def db(self):
        return 'unix:%s/db.sock' % self.dir

    def env(self):
        return dict(os.environ, OVS_RUNDIR=self.dir)

    def vsctl(self, *args):
        return sh(['ovs-vsctl', '--db=' + self.db, '--timeout=10'] + list(args))

    def ofctl(self, *args, bridge='br-int'):
        return sh(['ovs-ofctl', '-O', 'OpenFlow14'] + list(args[:1]) +
                  ['unix:%s/%s.mgmt' % (self.dir, bridge)] + list(args[1:]))

    def appctl(self, *args):
        return sh(['ovs-appctl', '-t', '%s/vswitchd.ctl' % self.dir]
                  + list(args))

    def log_datapath_flow_changes(self, on=True):
        """Have vswitchd log every datapath flow it adds, changes or deletes
        (dpif_netdev at debug level) to its log file."""
        self.appctl('vlog/set', 'dpif_netdev:file:%s' % ('dbg' if on
                                                          else 'info'))

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
        sh(['ovsdb-server', db, '--remote=punix:%s/db.sock' % self.dir,
            '--remote=db:Open_vSwitch,Open_vSwitch,manager_options',
            '--pidfile=%s/ovsdb-server.pid' % self.dir,
            '--unixctl=%s/ovsdb-server.ctl' % self.dir,
            '--log-file=%s/ovsdb-server.log' % self.dir,
            '--detach', '--no-chdir'], ns=self.ns, env=self.env())
        self.vsctl('--no-wait', 'init')
        sh(['ovs-vswitchd', self.db, '--pidfile=%s/vswitchd.pid' % self.dir,
            '--unixctl=%s/vswitchd.ctl' % self.dir,
            '--log-file=%s/vswitchd.log' % self.dir,
            '--detach', '--no-chdir', '--disable-system'],
           ns=self.ns, env=self.env())

    def stop_vswitchd(self):
        _kill_pidfile(os.path.join(self.dir, 'vswitchd.pid'))

    def start_vswitchd(self):
        sh(['ovs-vswitchd', self.db, '--pidfile=%s/vswitchd.pid' % self.dir,
            '--unixctl=%s/vswitchd.ctl' % self.dir,
            '--log-file=%s/vswitchd.log' % self.dir,
            '--detach', '--no-chdir', '--disable-system'],
           ns=self.ns, env=self.env())

    def bootstrap(self):
        sh([HOST_SETUP, '--db', self.db, '--name', self.name,
            '--tunnel-ip', self.tunnel_ip,
            '--controller', 'tcp:%s:%d' % (CONTROLLER_IP, self.lab.of_port),
            '--manager', 'ptcp:6640:%s' % self.mgmt_ip,
            '--site', self.lab.site_of(self.index),
            '--datapath-type', 'netdev',
            '--underlay-bridge', 'br-phy', '--underlay-iface', 'ul0',
            '--underlay-cidr', '%s/24' % self.tunnel_ip,
            '--underlay-mtu', str(UNDERLAY_MTU)], ns=self.ns, env=self.env())

    def underlay_mac(self):
        return sh(['cat', '/sys/class/net/br-phy/address'], ns=self.ns).strip()

    # ---- stand-in VMs --------------------------------------------------
    def add_vm(self, name, nics):
        """nics: [(vnic_id, ip_cidr or None)]. The VM is a namespace; each
        NIC a veth whose host side is plugged as libvirt plugs a tap."""
        vm_ns = '%s-%s' % (self.lab.prefix, name)
        sh(['ip', 'netns', 'add', vm_ns])
        vm = Vm(name, self, vm_ns)
        self.vms[name] = vm
        vm_uuid = secrets.token_hex(16)
        for i, (vnic_id, cidr) in enumerate(nics):
            self.plug(vm, vnic_id, 'eth%d' % i, cidr, vm_uuid)
        return vm

    def plug(self, vm, vnic_id, ifname, cidr=None, vm_uuid='', mtu=1500,
             mac=None):
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
        self.vsctl('add-port', 'br-int', port, '--', 'set', 'interface', port,
                   'external_ids:iface-id=%s' % vnic_id,
                   'external_ids:attached-mac=%s' % mac,
                   'external_ids:vm-id=%s' % (vm_uuid or secrets.token_hex(16)),
                   'external_ids:iface-status=active')
        vm.nics[vnic_id] = {'port': port, 'ifname': ifname, 'mac': mac,
                            'cidr': cidr}
        return vm.nics[vnic_id]

    def add_guest(self, name, nics, memory_mb=128, boot_timeout=60):
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
            sh(['ip', 'link', 'set', info['port'], 'up'], ns=self.ns)
            self.vsctl('add-port', 'br-int', info['port'], '--', 'set',
                       'interface', info['port'],
                       'external_ids:iface-id=%s' % vnic_id,
                       'external_ids:attached-mac=%s' % info['mac'],
                       'external_ids:vm-id=%s' % vm_uuid,
                       'external_ids:iface-status=active')
        _wait_booted(g, boot_timeout)
        self.vms[name] = g
        return g

    def define_guest(self, name, nics, boot_timeout=60):
        """Start the lab guest through this host's libvirtd, NICs as
        <interface type='bridge'><virtualport type='openvswitch'> with an
        interfaceid each. nics: [(interfaceid (a UUID), ip_cidr)]."""
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
        spec = []
        for vnic_id, cidr in nics:
            self._nic_seq += 1
            mac = '52:54:00:%02x:%02x:%02x' % (
                self.index, 0x40 | self._nic_seq >> 8 & 63,
                self._nic_seq & 255)
            spec.append((vnic_id, mac, cidr))
            g.nics[vnic_id] = {'mac': mac, 'cidr': cidr}
        with open(g.xml, 'w') as f:
            f.write(domain_xml(name, spec, img['kernel'], img['initrd'],
                               g.console, dom_uuid=g.uuid))
        self.libvirt.virsh('create', g.xml)
        _wait_booted(g, boot_timeout)
        return g

    def unplug(self, vm, vnic_id):
        """Unplug a vNIC (its info dict is returned, to plug it again)."""
        info = vm.nics.pop(vnic_id)
        port = info['port']
        self.vsctl('--if-exists', 'del-port', 'br-int', port)
        sh(['ip', 'link', 'del', port], ns=self.ns, check=False)
        return info


class Lab:
    """A lab of `n_hosts` hypervisors. Use as a context manager or call
    up()/down(). `sites` labels hosts (e.g. ['cloud-a','cloud-a','cloud-b'])."""

    def __init__(self, n_hosts=3, prefix=None, sites=None, of_port=6653,
                 libvirt=False):
        self.prefix = prefix or 'vw' + secrets.token_hex(3)
        self.libvirt = libvirt
        self.n_hosts = n_hosts
        self.sites = sites
        self.of_port = of_port
        self.dir = os.path.join(LAB_ROOT, self.prefix)
        self.mgmt_ns = self.prefix + '-mgmt'
        self.ul_ns = self.prefix + '-ul'
        self.hosts: List[LabHost] = []
        self.controller: Optional[subprocess.Popen] = None

    def site_of(self, i):
        return self.sites[i - 1] if self.sites else 'default'

    def host(self, name):
        return next(h for h in self.hosts if h.name == name)

    def __enter__(self):
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc):
        self.down()

    def up(self, progress=lambda msg: None):
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, 'lab.json'), 'w') as f:
            json.dump({'prefix': self.prefix, 'hosts': self.n_hosts,
                       'created': time.time()}, f)
        for ns in (self.mgmt_ns, self.ul_ns):
            sh(['ip', 'netns', 'add', ns])
            sh(['ip', 'link', 'set', 'lo', 'up'], ns=ns)
        sh(['ip', 'link', 'add', 'mgmt0', 'type', 'bridge'], ns=self.mgmt_ns)
        sh(['ip', 'addr', 'add', CONTROLLER_IP + '/24', 'dev', 'mgmt0'],
           ns=self.mgmt_ns)
        sh(['ip', 'link', 'set', 'mgmt0', 'up'], ns=self.mgmt_ns)
        sh(['ip', 'link', 'add', 'ul0', 'type', 'bridge'], ns=self.ul_ns)
        sh(['ip', 'link', 'set', 'ul0', 'mtu', str(UNDERLAY_MTU), 'up'],
           ns=self.ul_ns)
        for i in range(1, self.n_hosts + 1):
            progress('host %d/%d: namespace, OVS, bootstrap' % (i, self.n_hosts))
            self.hosts.append(self._make_host(i))
        self.warm_tunnel_neighbours()
        if self.libvirt:
            from vwlab.libvirt_host import LibvirtHost
            for h in self.hosts:
                progress('host %s: libvirtd' % h.name)
                h.libvirt = LibvirtHost(h).start()

    def _make_host(self, i):
        name = 'h%d' % i
        h = LabHost(self, i, name, '%s-%s' % (self.prefix, name),
                    os.path.join(self.dir, name))
        sh(['ip', 'netns', 'add', h.ns])
        sh(['ip', 'link', 'set', 'lo', 'up'], ns=h.ns)
        for dev, peer_ns, br in (('mgmt0', self.mgmt_ns, 'mgmt0'),
                                 ('ul0', self.ul_ns, 'ul0')):
            sh(['ip', 'link', 'add', dev, 'netns', h.ns, 'type', 'veth',
                'peer', 'name', name, 'netns', peer_ns])
            sh(['ip', 'link', 'set', name, 'master', br, 'up'], ns=peer_ns)
            sh(['ethtool', '-K', dev, 'tx', 'off'], ns=h.ns, check=False)
        sh(['ip', 'link', 'set', name, 'mtu', str(UNDERLAY_MTU)],
           ns=self.ul_ns)
        sh(['ip', 'addr', 'add', h.mgmt_ip + '/24', 'dev', 'mgmt0'], ns=h.ns)
        sh(['ip', 'link', 'set', 'mgmt0', 'up'], ns=h.ns)
        h.start_ovs()
        h.bootstrap()
        return h

    def warm_tunnel_neighbours(self):
        """Static tunnel neighbour entries: OVS's userspace tunnel cache
        otherwise resolves a new peer only after losing traffic to it."""
        macs = {h.name: h.underlay_mac() for h in self.hosts}
        for h in self.hosts:
            for peer in self.hosts:
                if peer is not h:
                    h.appctl('tnl/neigh/set', 'br-phy', peer.tunnel_ip,
                             macs[peer.name])

    def destroy_guest(self, guest):
        """Stop a libvirt guest wherever it runs (libvirt unplugs it)."""
        for h in self.hosts:
            if h.libvirt is not None:
                h.libvirt.virsh('destroy', guest.name, check=False)

    def migrate(self, guest, src, dst, timeout=120):
        """`virsh migrate --live` of a libvirt guest from host src to dst;
        returns the seconds it took (raises LabError with virsh's message
        if the migration fails)."""
        t = time.time()
        p = subprocess.run(['virsh', '-c', src.libvirt.uri, 'migrate',
                            '--live', guest.name, dst.libvirt.uri],
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise LabError('migrating %s %s -> %s failed: %s' % (
                guest.name, src.name, dst.name, p.stderr.strip()))
        return time.time() - t

    # ---- controller ----------------------------------------------------
    def start_controller(self, rest_port=None, extra=(), env=None):
        """Run virtualwire-controller as a real process, southbound in the
        management namespace, REST on 127.0.0.1 (`env`: extra environment,
        e.g. OSKEN_HUB_TYPE)."""
        self.rest_port = rest_port or getattr(self, 'rest_port', None) \
            or _free_port()
        state = os.path.join(self.dir, 'controller')
        os.makedirs(state, exist_ok=True)
        log = open(os.path.join(state, 'controller.log'), 'a')
        self.token_file = os.path.join(state, 'api-token')
        if not os.path.exists(self.token_file):
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT, 0o600)
            with os.fdopen(fd, 'w') as f:
                f.write(secrets.token_urlsafe(32) + '\n')
        cmd = [sys.executable, '-m', 'virtualwire.main', '--state-dir', state,
               '--of-listen', '%s:%d' % (CONTROLLER_IP, self.of_port),
               '--rest-listen', '127.0.0.1:%d' % self.rest_port,
               '--token-file', self.token_file,
               '--southbound-netns', self.mgmt_ns,
               # For the hosts' libvirt hooks (lab.libvirt_host.HOOK_PORT).
               '--southbound-rest-listen', '%s:8781' % CONTROLLER_IP] + \
            list(extra)
        self.controller = subprocess.Popen(cmd, stdout=log,
                                           stderr=subprocess.STDOUT,
                                           env=dict(os.environ, **(env or {})))
        self.url = 'http://127.0.0.1:%d' % self.rest_port
        self._write_vwctl_config()
        return self.controller

    def _write_vwctl_config(self):
        self.vwctl_config = os.path.join(self.dir, 'vwctl.conf')
        with open(self.vwctl_config, 'w') as f:
            f.write('[vwctl]\nurl = %s\ntoken_file = %s\n'
                    % (self.url, self.token_file))
            if self.libvirt:
                f.write('\n[libvirt]\n' + ''.join(
                    '%s = %s\n' % (h.name, h.libvirt.uri)
                    for h in self.hosts))

    def diagnostics(self):
        """Log tails of the controller and of each host's ovs-vswitchd:
        what a lab that failed to come up leaves for whoever reads the
        output (CI logs, the demo's stderr)."""
        out = ['--- controller (exit %r) ---' % (
            self.controller.poll() if self.controller else None),
            _tail(os.path.join(self.dir, 'controller', 'controller.log'), 40)]
        for h in self.hosts:
            out += ['--- %s ovs-vswitchd ---' % h.name,
                    _tail(os.path.join(h.dir, 'vswitchd.log'), 15)]
        return '\n'.join(out)

    def stop_controller(self, kill=False):
        if self.controller and self.controller.poll() is None:
            (self.controller.kill if kill else self.controller.terminate)()
            self.controller.wait(10)
        self.controller = None

    # ---- teardown ------------------------------------------------------
    def down(self):
        self.stop_controller(kill=True)
        teardown(self.prefix)


def _kill_pidfile(path, wait=5.0):
    try:
        with open(path) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, 15)
    except OSError:
        return
    end = time.time() + wait
    while time.time() < end:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.02)
    try:
        os.kill(pid, 9)
    except OSError:
        pass


def _tail(path, n):
    try:
        with open(path, errors='replace') as f:
            return ''.join(f.readlines()[-n:])
    except OSError as e:
        return '(%s)' % e


def _free_port():
    import socket
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def teardown(prefix):
    """Remove everything a lab made: processes, namespaces, its folder."""
    d = os.path.join(LAB_ROOT, prefix)
    if os.path.isdir(d):
        for root, _dirs, files in os.walk(d):
            for fn in files:
                if fn.endswith('.pid'):
                    _kill_pidfile(os.path.join(root, fn))
    for ns in sh(['ip', 'netns', 'list'], check=False).split('\n'):
        ns = ns.split(' ')[0]
        if ns.startswith(prefix + '-'):
            # Kill stragglers (traffic tools) before deleting the netns.
            pids = sh(['ip', 'netns', 'pids', ns], check=False).split()
            for pid in pids:
                try:
                    os.kill(int(pid), 9)
                except (OSError, ValueError):
                    pass
            sh(['ip', 'netns', 'del', ns], check=False)
    shutil.rmtree(d, ignore_errors=True)


def list_labs():
    if not os.path.isdir(LAB_ROOT):
        return []
    return sorted(p for p in os.listdir(LAB_ROOT)
                  if os.path.exists(os.path.join(LAB_ROOT, p, 'lab.json')))


class SimHosts:
    """Many simulated hypervisors for control-plane scale. Bridges are
    grouped `per_switch` to an ovs-vswitchd (dummy datapath: no kernel
    interfaces needed), each group in its own namespace on the management
    network: one vswitchd reconfigures in time linear in all its ports, so
    one process for 20,000 ports would take longer to build than to test.
    Each bridge is identified as a host the way vw-host-setup identifies a
    real one. `connect=False` leaves the bridges without a controller (a
    baseline to install flows by hand)."""

    def __init__(self, lab, n, vnics_per_host, name='sim', mgmt_index=200,
                 connect=True, per_switch=5):
        self.lab, self.n, self.per = lab, n, vnics_per_host
        self.name = name
        self.per_switch = per_switch
        self.groups = -(-n // per_switch)
        self.mgmt_index = mgmt_index
        self.connect = connect

    def group_dir(self, g):
        return os.path.join(self.lab.dir, '%s-g%d' % (self.name, g))

    def group_ns(self, g):
        return '%s-%s-g%d' % (self.lab.prefix, self.name, g)

    def bridge(self, k):
        return '%s%d' % (self.name, k)

    def tunnel_ip(self, k):
        return '10.%d.%d.%d' % (100 + (k >> 16), (k >> 8) & 255, k & 255)

    def vnic_id(self, k, i):
        return '%s%d-v%d' % (self.name, k, i)

    def up(self, progress=lambda m: None, parallel=4):
        """Build every group, `parallel` at a time."""
        from concurrent.futures import ThreadPoolExecutor
        done = [0]

        def one(g):
            self._up_group(g)
            done[0] += 1
            progress('switch groups %d of %d (%d bridges each)' % (
                done[0], self.groups, self.per_switch))
        with ThreadPoolExecutor(parallel) as ex:
            list(ex.map(one, range(self.groups)))

    def _up_group(self, g):
        d, ns = self.group_dir(g), self.group_ns(g)
        mgmt_ip = '%s.%d' % (MGMT_NET, self.mgmt_index + g)
        veth = '%s-g%d' % (self.name, g)
        os.makedirs(d, exist_ok=True)
        sh(['ip', 'netns', 'add', ns])
        sh(['ip', 'link', 'set', 'lo', 'up'], ns=ns)
        sh(['ip', 'link', 'add', 'mgmt0', 'netns', ns, 'type', 'veth',
            'peer', 'name', veth, 'netns', self.lab.mgmt_ns])
        sh(['ip', 'link', 'set', veth, 'master', 'mgmt0', 'up'],
           ns=self.lab.mgmt_ns)
        sh(['ip', 'addr', 'add', mgmt_ip + '/24', 'dev', 'mgmt0'], ns=ns)
        sh(['ip', 'link', 'set', 'mgmt0', 'up'], ns=ns)
        db = os.path.join(d, 'conf.db')
        sh(['ovsdb-tool', 'create', db,
            '/usr/share/openvswitch/vswitch.ovsschema'])
        env = dict(os.environ, OVS_RUNDIR=d)
        sh(['ovsdb-server', db, '--remote=punix:%s/db.sock' % d,
            '--remote=db:Open_vSwitch,Open_vSwitch,manager_options',
            '--pidfile=%s/ovsdb-server.pid' % d,
            '--unixctl=%s/ovsdb-server.ctl' % d,
            '--log-file=%s/ovsdb-server.log' % d,
            '--detach', '--no-chdir'], ns=ns, env=env)
        vsctl = ['ovs-vsctl', '--db=unix:%s/db.sock' % d, '--timeout=120']
        sh(vsctl + ['--no-wait', 'init'])
        sh(['ovs-vswitchd', 'unix:%s/db.sock' % d,
            '--enable-dummy=override', '--disable-system',
            '--pidfile=%s/vswitchd.pid' % d,
            '--unixctl=%s/vswitchd.ctl' % d,
            '--log-file=%s/vswitchd.log' % d, '--detach',
            '--no-chdir'], ns=ns, env=env)
        if self.connect:
            sh(vsctl + ['set-manager', 'ptcp:6640:%s' % mgmt_ip])
        cmd = list(vsctl)
        members = range(g * self.per_switch,
                        min(self.n, (g + 1) * self.per_switch))
        for k in members:
            br = self.bridge(k)
            cmd += [
                '--', 'add-br', br, '--', 'set', 'bridge', br,
                'datapath_type=dummy', 'fail_mode=secure',
                'protocols=OpenFlow13,OpenFlow14',
                'other_config:datapath-id=%016x' % (0x5100000000 + k),
                'external_ids:vw-host-name=%s' % br,
                'external_ids:vw-tunnel-ip=%s' % self.tunnel_ip(k),
                '--', 'add-port', br, br + '-gre', '--', 'set', 'interface',
                br + '-gre', 'type=gre', 'options:key=flow',
                'options:remote_ip=flow', 'ofport_request=65000']
            for i in range(self.per):
                p = '%sp%d' % (br, i)      # port names are per-OVSDB
                cmd += ['--', 'add-port', br, p, '--', 'set', 'interface', p,
                        'type=dummy', 'ofport_request=%d' % (i + 1),
                        'external_ids:iface-id=%s' % self.vnic_id(k, i)]
        sh(cmd, timeout=600)
        if self.connect:
            for k in members:
                br = self.bridge(k)
                sh(vsctl + ['set-controller', br, 'tcp:%s:%d' % (
                    CONTROLLER_IP, self.lab.of_port), '--', 'set',
                    'controller', br, 'max_backoff=1000'])

    def ofctl_target(self, k):
        return 'unix:%s/%s.mgmt' % (self.group_dir(k // self.per_switch),
                                    self.bridge(k))

    def flow_counts(self):
        """Flow count of every bridge, read in parallel."""
        procs = [subprocess.Popen(['ovs-ofctl', '-O', 'OpenFlow14',
                                   'dump-aggregate', self.ofctl_target(k)],
                                  stdout=subprocess.PIPE, text=True)
                 for k in range(self.n)]
        out = []
        for p in procs:
            text = p.communicate()[0]
            import re
            m = re.search(r'flow_count=(\d+)', text)
            out.append(int(m.group(1)) if m else -1)
        return out
