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
import shutil
import subprocess
import time
from typing import List

from vwlab.shell import (CONTROLLER_IP, HOST_SETUP, LAB_ROOT, MGMT_NET,
                         OVS_NICE, REPO, UL_NET, UNDERLAY_MTU, LabError,
                         kill_pidfiles, sh)
from vwlab.guests import Guest, LibvirtGuest, Vm
from vwlab.controllers import ControllerMixin
from vwlab.frame_hold import FrameHold
from vwlab.host import LabHost
from vwlab import antispoof, gateways
from vwlab.pki import LabPki
from vwlab.placements import LabPlacements
from vwlab.simhosts import SimHosts
from vwlab.sites import CONTROLLER_PUBLIC_IP, Sites, parse_extenders

__all__ = ['CONTROLLER_IP', 'HOST_SETUP', 'LAB_ROOT', 'MGMT_NET', 'REPO',
           'UL_NET', 'UNDERLAY_MTU', 'Guest', 'Lab', 'LabError', 'LabHost',
           'LibvirtGuest', 'SimHosts', 'Vm', 'list_labs', 'sh', 'teardown']


class Lab(ControllerMixin):
    """A lab of `n_hosts` hypervisors. Use as a context manager or call
    up()/down(). `sites` labels hosts (e.g. ['cloud-a','cloud-a','cloud-b']).
    With `extenders` ([sites.ExtenderSpec], or 'xa:cloud-a:nat,...') the
    sites are clouds apart (vwlab.sites): each its own underlay, joined
    only through the extenders' public legs; extenders are hosts too
    (lab.extenders), after the hypervisors in lab.hosts. `gateways`
    ('gw1:SITE,...') adds gateway hosts after them, each with a trunk port
    and a whole port onto a physical network (vwlab.gateways). Every
    hypervisor keeps frames towards guests migrating in, as the product
    does by default (vwlab.frame_hold); `hold_frames=False` leaves that to
    the controller."""

    def __init__(self, n_hosts=3, prefix=None, sites=None, of_port=6653,
                 libvirt=False, extenders=None, gateways=None,
                 ovs_nice=OVS_NICE, tls=True, controllers=1, collector=True,
                 carrier='gre', packet_socket_buffer=None,
                 placement='strict', hold_frames=True, system_routes=None):
        # Niceness of each host's ovsdb-server and ovs-vswitchd: -10 as
        # ovs-ctl (Debian's services) starts them; 0 reproduces a switch
        # that competes with QEMU as an equal (bench_migration --ovs-nice).
        self.ovs_nice = ovs_nice
        # The in-site tunnel carrier every host offers (vw-host-setup
        # --carrier): gre, geneve or gre,geneve.
        self.carrier = carrier
        # None: the machine's socket buffers raised to 4 MiB (vwlab.host);
        # a size: set to exactly that (benchmarks of the kernel default).
        self.packet_socket_buffer = packet_socket_buffer
        self.prefix = prefix or 'vw' + secrets.token_hex(3)
        # The controller's --placement: 'strict' (the product's default)
        # needs every vNIC placed by the cloud: lab hosts place what they
        # plug (vwlab.placements); 'insecure-trust-hosts' for baselines.
        self.placement = placement
        # Hypervisors keep frames towards guests migrating in (vw-hold and
        # vw-frame-hold, the product's default); False: the controller
        # holds them (vw-host-setup --no-hold-frames).
        self.hold_frames = hold_frames
        # False: ovs-vswitchd --disable-system-route, the tunnels routed by
        # vw-host-setup (OVS's own routes), as docs/install.rst recommends
        # on the userspace datapath. None: so, but for a lab of clouds,
        # whose hosts reach other sites through the namespaces' own routes.
        self.system_routes = system_routes
        self.placements = LabPlacements(self)
        self.libvirt = libvirt
        self.n_hosts = n_hosts
        self.sites = sites
        self.of_port = of_port
        # controllers > 1: that many instances on a RAFT intent cluster.
        # collector=False: counters read on the controller's own loop.
        self.init_controllers(controllers, of_port, collector)
        self.dir = os.path.join(LAB_ROOT, self.prefix)
        # The deployment CA (vwlab.pki); tls=False: the plaintext lab flag.
        self.pki = LabPki(os.path.join(self.dir, 'pki')) if tls else None
        self.mgmt_ns = self.prefix + '-mgmt'
        self.ul_ns = self.prefix + '-ul'
        self.hosts: List[LabHost] = []
        if isinstance(extenders, str):
            extenders = parse_extenders(extenders)
        self.extender_specs = list(extenders or [])
        self.gateway_specs = [tuple(g.split(':')) for g in (
            gateways.split(',') if isinstance(gateways, str)
            else gateways or [])]
        self.clouds = Sites(self, [self.site_of(i) for i in range(
            1, n_hosts + len(self.extender_specs) + 1)]) \
            if self.extender_specs else None
        if self.system_routes is None:
            self.system_routes = self.clouds is not None

    @property
    def extenders(self) -> List[LabHost]:
        return self.hosts[self.n_hosts:self.n_hosts +
                          len(self.extender_specs)]

    @property
    def gateways(self) -> List[LabHost]:
        return self.hosts[self.n_hosts + len(self.extender_specs):]

    def site_of(self, i):
        k = i - self.n_hosts - 1
        if 0 <= k < len(self.extender_specs):
            return self.extender_specs[k].site
        if k >= len(self.extender_specs):
            return self.gateway_specs[k - len(self.extender_specs)][1]
        return self.sites[i - 1] if self.sites else 'default'

    def ul_ns_of(self, i):
        return self.clouds.ul_ns(self.site_of(i)) if self.clouds \
            else self.ul_ns

    def ul_net_of(self, i):
        return self.clouds.ul_net(self.site_of(i)) if self.clouds \
            else UL_NET

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
        if self.pki is not None:
            self.pki.init()
            self.pki.issue('controller', role='controller', ips=[CONTROLLER_IP, '127.0.0.1'] +
                           ([CONTROLLER_PUBLIC_IP] if self.clouds else []))
        if self.n_controllers > 1:
            if self.pki is None:
                raise LabError('controllers=N needs TLS (the intent '
                               'cluster is TLS only)')
            progress('intent database: 3 RAFT members over TLS')
            self.start_intent_cluster()
        for ns in (self.mgmt_ns,) + (() if self.clouds else (self.ul_ns,)):
            sh(['ip', 'netns', 'add', ns])
            sh(['ip', 'link', 'set', 'lo', 'up'], ns=ns)
        # A fixed MAC: a Linux bridge otherwise takes its lowest port's,
        # which changes as hosts join, and hosts that cached the old one
        # lose the controller until their ARP entry goes stale (~40 s).
        sh(['ip', 'link', 'add', 'mgmt0', 'address', '02:76:77:00:00:01',
            'type', 'bridge'], ns=self.mgmt_ns)
        sh(['ip', 'addr', 'add', CONTROLLER_IP + '/24', 'dev', 'mgmt0'],
           ns=self.mgmt_ns)
        sh(['ip', 'link', 'set', 'mgmt0', 'up'], ns=self.mgmt_ns)
        if self.clouds:
            self.clouds.up(UNDERLAY_MTU)
        else:
            sh(['ip', 'link', 'add', 'ul0', 'type', 'bridge'], ns=self.ul_ns)
            sh(['ip', 'link', 'set', 'ul0', 'mtu', str(UNDERLAY_MTU), 'up'],
               ns=self.ul_ns)
        for i in range(1, self.n_hosts + 1):
            progress('host %d/%d: namespace, OVS, bootstrap' % (i, self.n_hosts))
            self.hosts.append(self._make_host(i))
        for j, spec in enumerate(self.extender_specs):
            progress('extender %s (%s, %s)' % (spec.name, spec.site,
                                               spec.nat))
            x = self._make_host(self.n_hosts + j + 1, spec.name)
            self.clouds.connect_wan(x, spec)
            self.hosts.append(x)
        for j, (name, _site) in enumerate(self.gateway_specs):
            progress('gateway %s and its physical network' % name)
            g = self._make_host(self.n_hosts + len(self.extender_specs) +
                                j + 1, name)
            gateways.attach(g)
            self.hosts.append(g)
        self.warm_tunnel_neighbours()
        if self.hold_frames:
            for h in self.hosts[:self.n_hosts]:
                h.ring = FrameHold(h).start()
        if self.libvirt:
            from vwlab.libvirt_host import LibvirtHost
            for h in self.hosts[:self.n_hosts]:     # hypervisors run VMs
                progress('host %s: libvirtd' % h.name)
                h.libvirt = LibvirtHost(h).start()

    def _make_host(self, i, name=None):
        name = name or 'h%d' % i
        h = LabHost(self, i, name, '%s-%s' % (self.prefix, name),
                    os.path.join(self.dir, name),
                    keeps_frames=self.hold_frames)
        sh(['ip', 'netns', 'add', h.ns])
        sh(['ip', 'link', 'set', 'lo', 'up'], ns=h.ns)
        for dev, peer_ns, br in (('mgmt0', self.mgmt_ns, 'mgmt0'),
                                 ('ul0', self.ul_ns_of(i), 'ul0')):
            sh(['ip', 'link', 'add', dev, 'netns', h.ns, 'type', 'veth',
                'peer', 'name', name, 'netns', peer_ns])
            sh(['ip', 'link', 'set', name, 'master', br, 'up'], ns=peer_ns)
            sh(['ethtool', '-K', dev, 'tx', 'off'], ns=h.ns, check=False)
        sh(['ip', 'link', 'set', name, 'mtu', str(UNDERLAY_MTU)],
           ns=self.ul_ns_of(i))
        # Only this host's underlay address may come from its port (and,
        # from an extender's, what it routes in from other sites).
        antispoof.guard(self.ul_ns_of(i), name, [h.tunnel_ip] + (
            [self.clouds.ul_net(s) + '.0/24' for s in self.clouds.order
             if s != h.site] if h.spec else []))
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
                if peer is not h and peer.site == h.site:
                    h.appctl('tnl/neigh/set', 'br-phy', peer.tunnel_ip,
                             macs[peer.name])

    def destroy_guest(self, guest):
        """Stop a libvirt guest wherever it runs (libvirt unplugs it)."""
        for h in self.hosts:
            if h.libvirt is not None:
                h.libvirt.virsh('destroy', guest.name, check=False)

    def migrate(self, guest, src, dst, timeout=120, downtime_ms=None,
                options=(), profile=None):
        """`virsh migrate --live` of a libvirt guest from host src to dst;
        returns the seconds it took (raises LabError with virsh's message
        if the migration fails). downtime_ms: QEMU's downtime limit for
        it (libvirt keeps it for the domain's next migration); options:
        more virsh migrate options (e.g. --auto-converge); profile: a
        migration profile's (vwlab.migration_options), prepared first."""
        if profile is not None:
            from vwlab.migration_options import virsh_options
            options = list(options) + virsh_options(src, guest, profile)
        if downtime_ms is not None:
            src.libvirt.virsh('migrate-setmaxdowntime', guest.name,
                              str(int(downtime_ms)))
        t = time.time()
        p = subprocess.run(['virsh', '-c', src.libvirt.uri, 'migrate',
                            '--live'] + list(options) + [
                                guest.name, dst.libvirt.uri],
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise LabError('migrating %s %s -> %s failed: %s' % (
                guest.name, src.name, dst.name, p.stderr.strip()))
        return time.time() - t

    # ---- teardown ------------------------------------------------------
    def down(self):
        self.stop_controllers(kill=True)
        self.stop_collector(kill=True)
        teardown(self.prefix)


def teardown(prefix):
    """Remove everything a lab made: processes, namespaces, its folder."""
    d = os.path.join(LAB_ROOT, prefix)
    if os.path.isdir(d):
        kill_pidfiles([os.path.join(root, fn)
                       for root, _dirs, files in os.walk(d)
                       for fn in files if fn.endswith('.pid')])
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
    if os.environ.get('VW_LAB_KEEP') and os.path.isdir(d):
        # Forensics: the logs kept beside it (VW_LAB_KEEP=1).
        shutil.copytree(d, d + '.kept', dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns('*.sock', '*.qcow2',
                                                      '*.img', '*.iso'),
                        ignore_dangling_symlinks=True)
    shutil.rmtree(d, ignore_errors=True)


def list_labs():
    if not os.path.isdir(LAB_ROOT):
        return []
    return sorted(p for p in os.listdir(LAB_ROOT)
                  if os.path.exists(os.path.join(LAB_ROOT, p, 'lab.json')))
