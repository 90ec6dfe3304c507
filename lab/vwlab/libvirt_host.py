"""A real libvirtd per lab host (lab notes, section 8).

Each lab host gets a private mount namespace, held by an anchor process in
its network namespace, with per-host folders bound over the paths libvirt
and OVS have built in (/run, /etc/libvirt, /var/lib/libvirt, ...). libvirtd
runs there under a child subreaper; it plugs guests into the host's own OVS
(the default db socket path inside the namespace leads to that host's
ovsdb-server), and talks to the other hosts' libvirtd over the management
network for live migration.

From outside the namespaces a host's libvirtd is at `uri`
(qemu+unix:///system?socket=<host dir>/libvirt/run/libvirt/libvirt-sock).
"""
import os
import shutil
import subprocess
import sys
import time
import uuid
from xml.sax.saxutils import escape, quoteattr

from vwlab.shell import niced

HERE = os.path.dirname(os.path.abspath(__file__))
HOOK = os.path.join(os.path.dirname(os.path.dirname(HERE)),
                    'migration_hooks', 'qemu')
HOOK_PORT = 8781           # the controller's southbound REST, in the lab
EMULATOR = os.path.join(HERE, 'guest', 'qemu-tcg-single')

# Host path -> folder (under the host's libvirt root) bound over it.
BINDS = (('/run', 'run'), ('/etc/libvirt', 'etc-libvirt'),
         ('/var/lib/libvirt', 'var-lib-libvirt'),
         ('/var/log/libvirt', 'var-log-libvirt'),
         ('/var/cache/libvirt', 'var-cache-libvirt'),
         ('/etc/openvswitch', 'etc-openvswitch'),
         ('/var/lib/openvswitch', 'var-lib-openvswitch'),
         ('/var/log/openvswitch', 'var-log-openvswitch'))


class LibvirtError(Exception):
    pass


def libvirtd_conf(listen_ip, host_uuid):
    return '\n'.join([
        'listen_tls = 0', 'listen_tcp = 1',
        'listen_addr = "%s"' % listen_ip,
        # Lab only: the management network is private to the lab.
        'auth_tcp = "none"', 'auth_unix_rw = "none"', 'auth_unix_ro = "none"',
        'unix_sock_group = "root"',
        # Distinct per host, or: "Attempt to migrate guest to the same host".
        'host_uuid = "%s"' % host_uuid, ''])


def qemu_conf(ip):
    return '\n'.join([
        'user = "root"', 'group = "root"', 'security_driver = "none"',
        'dynamic_ownership = 0', 'remember_owner = 0', 'namespaces = []',
        'cgroup_controllers = []', 'stdio_handler = "file"',
        'migration_address = "%s"' % ip, 'migration_host = "%s"' % ip, ''])


def domain_xml(name, nics, kernel, initrd, console, memory_mb=128,
               dom_uuid=None, bridge='br-int', beacon=None, cmdline=()):
    """A lab guest as libvirt sees it. nics: [(interfaceid, mac, cidr)];
    interfaceid is the vNIC id (libvirt wants a UUID). Direct kernel boot
    of the lab image; serial console appended to a file both hosts see.
    beacon: 'IP:PORT:MICROSECONDS' the guest sends to on its own; cmdline:
    more kernel arguments for its /init (lab/vwlab/guest/init)."""
    nets = ','.join('eth%d=%s' % (i, n[2]) for i, n in enumerate(nics))
    if beacon:
        nets += ' vw.beacon=' + beacon
    for arg in cmdline:
        if not arg or any(c.isspace() for c in arg):
            raise ValueError('a kernel argument without spaces: %r' % arg)
        nets += ' ' + arg
    ifaces = ''.join(
        "    <interface type='bridge'>\n"
        "      <mac address=%s/>\n"
        "      <source bridge=%s/>\n"
        "      <virtualport type='openvswitch'>\n"
        "        <parameters interfaceid=%s/>\n"
        "      </virtualport>\n"
        "      <model type='virtio'/>\n"
        "      <driver><host csum='off'/></driver>\n"
        "    </interface>\n" % (quoteattr(mac), quoteattr(bridge),
                                quoteattr(iid))
        for iid, mac, _cidr in nics)
    return (
        "<domain type='qemu'>\n"
        "  <name>%s</name>\n"
        "  <uuid>%s</uuid>\n"
        "  <memory unit='MiB'>%d</memory>\n"
        "  <vcpu>1</vcpu>\n"
        "  <os>\n"
        "    <type arch='x86_64' machine='pc'>hvm</type>\n"
        "    <kernel>%s</kernel>\n"
        "    <initrd>%s</initrd>\n"
        "    <cmdline>console=ttyS0 quiet panic=-1 vw.net=%s</cmdline>\n"
        "  </os>\n"
        "  <on_poweroff>destroy</on_poweroff>\n"
        "  <on_crash>destroy</on_crash>\n"
        "  <devices>\n"
        "    <emulator>%s</emulator>\n"
        "%s"
        "    <serial type='file'>\n"
        "      <source path=%s append='on'/>\n"
        "    </serial>\n"
        "    <memballoon model='none'/>\n"
        "  </devices>\n"
        "</domain>\n") % (escape(name), dom_uuid or uuid.uuid4(), memory_mb,
                          escape(kernel), escape(initrd), escape(nets),
                          escape(EMULATOR), ifaces, quoteattr(console))


class LibvirtHost:
    def __init__(self, host):
        self.host = host
        self.root = os.path.join(host.dir, 'libvirt')
        self.anchor_pid = None
        self.uri = ('qemu+unix:///system?socket=%s/run/libvirt/libvirt-sock'
                    % self.root)
        self.tcp_uri = 'qemu+tcp://%s/system' % host.mgmt_ip
        self._conn = None

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def _prepare(self):
        for _, d in BINDS:
            os.makedirs(self.path(d), exist_ok=True)
        if os.path.isdir('/etc/libvirt'):
            shutil.copytree('/etc/libvirt', self.path('etc-libvirt'),
                            dirs_exist_ok=True)
        os.makedirs(self.path('var-log-libvirt', 'qemu'), exist_ok=True)
        os.makedirs(self.hook_dir(), exist_ok=True)
        # libvirt runs ovs-vsctl with the default socket: lead it to ours.
        ovs_run = self.path('run', 'openvswitch')
        os.makedirs(ovs_run, exist_ok=True)
        link = os.path.join(ovs_run, 'db.sock')
        if not os.path.lexists(link):
            os.symlink(os.path.join(self.host.dir, 'db.sock'), link)
        with open(self.path('etc-libvirt', 'libvirtd.conf'), 'w') as f:
            f.write(libvirtd_conf(self.host.mgmt_ip, uuid.uuid4()))
        with open(self.path('etc-libvirt', 'qemu.conf'), 'w') as f:
            # Migration streams: over the management network, or, between
            # clouds, over the underlay, routed through the sites'
            # extenders and their encrypted link (vwlab.sites.route_sites).
            f.write(qemu_conf(self.host.tunnel_ip if self.host.lab.clouds
                              else self.host.mgmt_ip))
        self.install_hook()

    def install_hook(self, on_unreachable='allow', timeout=3,
                     token_file=None, hold=None, hook=HOOK):
        """Our libvirt hook, configured for this lab's controller. libvirtd
        looks for hooks when it starts; the config is read on each call.
        token_file: the hook's token (default: the operator's; a
        hypervisor credential scopes it to this host's migrations).
        hold: True/False asks guests arriving here to have their held
        frames delivered or not (None: the controller's --hold). hook: the
        file (default: the checkout's; a package's, as it installed it)."""
        shutil.copy(hook, os.path.join(self.hook_dir(), 'qemu'))
        with open(os.path.join(self.hook_dir(), 'virtualwire.conf'),
                  'w') as f:
            lab = self.host.lab
            f.write('[controller]\nurl = %s\ntoken_file = %s\n'
                    'host = %s\ntimeout = %s\non_unreachable = %s\n%s' % (
                        lab.southbound_urls(),
                        token_file or os.path.join(
                            self.host.lab.dir, 'controller', 'api-token'),
                        self.host.name, timeout, on_unreachable,
                        'ca_cert = %s\n' % lab.pki.controller_ca if lab.pki
                        else 'insecure_plaintext_lab = yes\n'))
            if hold is not None:
                f.write('hold = %s\n' % ('yes' if hold else 'no'))

    def set_ram_pad(self, kib):
        """KiB the emulator wrapper adds to guests' RAM on this host (None:
        its default, 8: no multiple of 256 KiB, so QEMU 7.2 syncs dirty
        pages on its path that keeps TCG's write trap; 0: QEMU's own sizes,
        with the fast path that loses pages). Applies to guests started
        after; both ends of a move must agree."""
        path = self.path('etc-libvirt', 'vw-qemu-ram-pad-kib')
        if kib is None:
            if os.path.exists(path):
                os.unlink(path)
            return
        with open(path, 'w') as f:
            f.write('%d\n' % int(kib))

    def set_incoming_qemu_args(self, args):
        """Extra QEMU arguments for guests migrating into this host (the
        emulator wrapper adds them when QEMU starts with -incoming), e.g.
        ['-global', 'migration.announce-rounds=0']: no self-announce at all
        after the migration (no RARP, and no guest-announce request)."""
        path = self.path('etc-libvirt', 'vw-qemu-incoming-args')
        if not args:
            if os.path.exists(path):
                os.unlink(path)
            return
        with open(path, 'w') as f:
            f.write('\n'.join(args) + '\n')

    def hook_dir(self):
        """Where this host's libvirt looks for hooks (/etc/libvirt/hooks)."""
        return self.path('etc-libvirt', 'hooks')

    def start(self, timeout=30):
        self._prepare()
        ready = self.path('anchor.ready')
        binds = ' && '.join('mkdir -p %s && mount --bind %s %s' % (
                              target, self.path(d), target)
                            for target, d in BINDS)
        anchor = subprocess.Popen(
            ['ip', 'netns', 'exec', self.host.ns, 'unshare', '-m',
             '--propagation', 'private', 'sh', '-c',
             '%s && touch %s && exec sleep infinity' % (binds, ready)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(self.path('anchor.log'), 'w'),
            start_new_session=True)
        self.anchor_pid = anchor.pid
        with open(self.path('anchor.pid'), 'w') as f:
            f.write('%d\n' % anchor.pid)
        self._wait(lambda: os.path.exists(ready) or anchor.poll() is not None,
                   timeout, 'mount namespace')
        if anchor.poll() is not None:
            raise LibvirtError('mount namespace for %s failed: %s' % (
                self.host.name, open(self.path('anchor.log')).read()))
        log = open(self.path('libvirtd.out'), 'w')
        d = subprocess.Popen(
            ['nsenter', '-t', str(anchor.pid), '-n', '-m', '--',
             sys.executable, '-m', 'vwlab.subreaper', '--',
             'libvirtd', '--listen'],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                [os.path.dirname(HERE)] +
                os.environ.get('PYTHONPATH', '').split(os.pathsep))))
        with open(self.path('libvirtd-reaper.pid'), 'w') as f:
            f.write('%d\n' % d.pid)
        sock = self.path('run', 'libvirt', 'libvirt-sock')
        self._wait(lambda: os.path.exists(sock) or d.poll() is not None,
                   timeout, 'libvirtd socket')
        if d.poll() is not None:
            raise LibvirtError('libvirtd on %s exited: %s' % (
                self.host.name, open(self.path('libvirtd.out')).read()[-2000:]))
        self._wait(self._answers, timeout, 'libvirtd to answer')
        self._start_agent(anchor.pid)
        return self

    def _start_agent(self, anchor_pid):
        """vw-host-agent beside libvirtd, with the hook's settings: it
        reports guests migrating out of this host (strict placement)."""
        # At the switches' niceness, as its systemd unit runs it: its
        # word at QEMU's STOP races the guest's RESUME on the destination.
        a = subprocess.Popen(
            ['nsenter', '-t', str(anchor_pid), '-n', '-m', '--'] + niced(
                self.host.lab.ovs_nice, [
                    sys.executable, '-m', 'virtualwire.host.agent',
                    '--config',
                    os.path.join(self.hook_dir(), 'virtualwire.conf'),
                    '--poll', '0.2']),
            stdin=subprocess.DEVNULL,
            stdout=open(self.path('agent.log'), 'w'),
            stderr=subprocess.STDOUT, start_new_session=True)
        with open(self.path('agent.pid'), 'w') as f:
            f.write('%d\n' % a.pid)

    def _answers(self):
        p = subprocess.run(['virsh', '-c', self.uri, 'version'],
                           capture_output=True, text=True)
        return p.returncode == 0

    def _wait(self, fn, timeout, what):
        end = time.time() + timeout
        while not fn():
            if time.time() > end:
                raise LibvirtError('%s: timed out waiting for %s' % (
                    self.host.name, what))
            time.sleep(0.05)

    def virsh(self, *args, check=True, timeout=120):
        p = subprocess.run(['virsh', '-c', self.uri] + [str(a) for a in args],
                           capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise LibvirtError('virsh %s on %s: %s' % (
                ' '.join(map(str, args)), self.host.name,
                (p.stderr or p.stdout).strip()))
        return p

    def conn(self):
        import libvirt
        if self._conn is None:
            self._conn = libvirt.open(self.uri)
        return self._conn
