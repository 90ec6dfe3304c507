"""vw-host-setup on a hypervisor another system (OVN, Neutron) already
configured: a real ovsdb-server and ovs-vswitchd in a namespace of their
own. It adds its manager beside theirs, keeps to its own bridge, and
refuses, changing nothing, another's bridge or SSL identity."""
import os
import subprocess

import pytest

from vwlab.pki import OVSDB_SERVER_SSL, LabPki
from vwlab.shell import HOST_SETUP, kill_pidfiles, sh

NS = 'vwcoex'


class Ovs:
    """One host's Open vSwitch, as a distribution starts it."""

    def __init__(self, d):
        self.dir, self.db = d, 'unix:%s/db.sock' % d
        self.env = dict(os.environ, OVS_RUNDIR=d)

    def start(self):
        sh(['ovsdb-tool', 'create', '%s/conf.db' % self.dir,
            '/usr/share/openvswitch/vswitch.ovsschema'])
        sh(['ovsdb-server', '%s/conf.db' % self.dir,
            '--remote=punix:%s/db.sock' % self.dir,
            '--remote=db:Open_vSwitch,Open_vSwitch,manager_options'] +
           OVSDB_SERVER_SSL + [
            '--pidfile=%s/ovsdb-server.pid' % self.dir,
            '--unixctl=%s/ovsdb-server.ctl' % self.dir,
            '--log-file=%s/ovsdb-server.log' % self.dir, '--detach',
            '--no-chdir'], ns=NS, env=self.env)
        self.vsctl('--no-wait', 'init')
        sh(['ovs-vswitchd', self.db, '--pidfile=%s/vswitchd.pid' % self.dir,
            '--unixctl=%s/vswitchd.ctl' % self.dir,
            '--log-file=%s/vswitchd.log' % self.dir, '--detach',
            '--no-chdir', '--disable-system'], ns=NS, env=self.env)
        return self

    def stop(self):
        kill_pidfiles(['%s/%s.pid' % (self.dir, p)
                       for p in ('vswitchd', 'ovsdb-server')])

    def vsctl(self, *args):
        return sh(['ovs-vsctl', '--db=' + self.db, '--timeout=10'] +
                  list(args), env=self.env).strip()

    def flows(self, bridge):
        return sorted(sh(['ovs-ofctl', 'dump-flows', bridge, '--no-stats'],
                         env=self.env).splitlines()[1:])

    def managers(self):
        return sorted(self.vsctl('get-manager').split())

    def ssl(self):
        return self.vsctl('get-ssl')

    def listening(self):
        return {line.split()[3] for line in sh(
            ['ss', '-Hltn'], ns=NS).splitlines()}

    def state(self):
        """What another system relies on."""
        return (self.managers(), self.ssl(), self.vsctl('list-br'),
                self.flows('br-int'), self.vsctl('get-controller', 'br-ex'))

    def setup(self, *args):
        return subprocess.run(
            ['ip', 'netns', 'exec', NS, HOST_SETUP, '--db', self.db,
             '--name', 'h7', '--tunnel-ip', '10.1.0.7',
             '--datapath-type', 'netdev'] + list(args),
            capture_output=True, text=True, env=self.env, timeout=60)


@pytest.fixture
def ovs(tmp_path):
    sh(['ip', 'netns', 'add', NS])
    sh(['ip', 'link', 'set', 'lo', 'up'], ns=NS)
    o = Ovs(str(tmp_path)).start()
    yield o
    o.stop()
    sh(['ip', 'netns', 'del', NS], check=False)


@pytest.fixture
def pki(tmp_path_factory):
    return LabPki(str(tmp_path_factory.mktemp('pki'))).init()


def ovn_was_here(ovs, pki):
    """What OVN and Neutron leave on a hypervisor: OVN's manager target,
    its SSL identity, br-int holding ovn-controller's flows (it speaks
    OpenFlow over the bridge's own socket, so no controller row), and a
    bridge with Neutron's agent as its controller."""
    key, cert = pki.issue('ovn-h7')
    ovs.vsctl('set-manager', 'ptcp:6641:127.0.0.1')
    ovs.vsctl('set-ssl', key, cert, pki.host_ca)
    ovs.vsctl('add-br', 'br-int', '--', 'set', 'bridge', 'br-int',
              'datapath_type=netdev', 'fail_mode=secure')
    for f in ('cookie=0x5a1,table=0,priority=100,in_port=1,actions=drop',
              'cookie=0x5a2,table=8,priority=50,actions=resubmit(,9)'):
        sh(['ovs-ofctl', 'add-flow', 'br-int', f], env=ovs.env)
    ovs.vsctl('add-br', 'br-ex', '--', 'set', 'bridge', 'br-ex',
              'datapath_type=netdev', '--', 'set-controller', 'br-ex',
              'tcp:127.0.0.1:6633')


def test_it_adds_itself_beside_another_system_and_takes_nothing(ovs, pki):
    ovn_was_here(ovs, pki)
    before = ovs.state()
    key, cert = pki.issue('h7')
    ssl = ['--ssl-key', key, '--ssl-cert', cert,
           '--ssl-ca', pki.controller_ca]
    ours = ['--controller', 'ssl:127.0.0.1:6653',
            '--manager', 'pssl:6640:127.0.0.1']

    # OVN's bridge, by name: refused, its first flow named.
    p = ovs.setup(*ours, *ssl, '--bridge', 'br-int', '--replace-ssl')
    assert p.returncode == 3, p.stderr
    assert 'bridge br-int holds 2 flows of another controller' in p.stderr
    assert 'cookie=0x5a1' in p.stderr and 'default br-vw' in p.stderr
    # Neutron's bridge: refused, its controller named.
    p = ovs.setup(*ours, *ssl, '--bridge', 'br-ex', '--replace-ssl')
    assert p.returncode == 3, p.stderr
    assert 'bridge br-ex belongs to another system: its controller is ' \
        'tcp:127.0.0.1:6633' in p.stderr
    # Our own bridge, but OVN's SSL identity in the way: refused.
    p = ovs.setup(*ours, *ssl)
    assert p.returncode == 3, p.stderr
    assert "already presents another system's SSL identity" in p.stderr
    assert 'ovn-h7' in p.stderr and '--replace-ssl' in p.stderr
    assert ovs.state() == before                 # nothing changed

    # Sharing OVN's identity (the same files): accepted, left as it was.
    ovn_ssl = ovs.vsctl('get', 'ssl', '.', 'private_key',
                        'certificate', 'ca_cert').replace('"', '').split()
    p = ovs.setup(*ours, '--ssl-key', ovn_ssl[0], '--ssl-cert', ovn_ssl[1],
                  '--ssl-ca', ovn_ssl[2], '--name', 'ovn-h7')
    assert p.returncode == 0, p.stderr
    assert ovs.ssl() == before[1]
    assert ovs.managers() == ['pssl:6640:127.0.0.1', 'ptcp:6641:127.0.0.1']
    assert 'br-vw' in ovs.vsctl('list-br').split()
    assert ovs.vsctl('get', 'bridge', 'br-vw',
                     'external_ids:vw-host-name').strip('"') == 'ovn-h7'
    assert ovs.flows('br-int') == before[3]
    assert ovs.vsctl('get-controller', 'br-ex') == before[4]
    # Frames towards guests migrating in are kept on our bridge's vw-hold
    # by default; the one switch-wide change that needs is said.
    assert ovs.vsctl('port-to-br', 'vw-hold') == 'br-vw'
    assert "Open vSwitch's vlan-limit set to 2 (was 1, its default)" \
        in p.stderr

    # Moved to another manager address: ours replaced, OVN's kept and
    # still listening; re-runs add nothing.
    for _ in range(2):
        p = ovs.setup('--controller', 'ssl:127.0.0.1:6653',
                      '--manager', 'pssl:6642:127.0.0.1', '--ssl-key',
                      ovn_ssl[0], '--ssl-cert', ovn_ssl[1], '--ssl-ca',
                      ovn_ssl[2], '--name', 'ovn-h7')
        assert p.returncode == 0, p.stderr
        assert 'vlan-limit' not in p.stderr       # already as it needs
        assert ovs.managers() == ['pssl:6642:127.0.0.1',
                                  'ptcp:6641:127.0.0.1']
    assert len(ovs.vsctl('--bare', '--columns=_uuid', 'list',
                         'manager').split()) == 2
    sh('for i in $(seq 50); do ss -Hltn | grep -q :6642 && exit 0; '
       'sleep 0.1; done; exit 1', ns=NS)
    assert {'127.0.0.1:6641', '127.0.0.1:6642'} <= ovs.listening()
    assert '127.0.0.1:6640' not in ovs.listening()


def test_replaced_on_request_its_own_identity_renews_freely(ovs, pki):
    ovn_was_here(ovs, pki)
    key, cert = pki.issue('h7')
    args = ['--controller', 'ssl:127.0.0.1:6653', '--ssl-key', key,
            '--ssl-cert', cert, '--ssl-ca', pki.controller_ca]
    p = ovs.setup(*args, '--replace-ssl')
    assert p.returncode == 0, p.stderr
    assert cert in ovs.ssl()
    assert ovs.vsctl('get', 'ssl', '.',
                     'external_ids:vw-owner').strip('"') == 'virtualwire'
    # A renewed certificate in new files: ours to replace, no flag.
    key2, cert2 = pki.issue('h7', out=os.path.join(pki.dir, 'renewed'))
    p = ovs.setup('--controller', 'ssl:127.0.0.1:6653', '--ssl-key', key2,
                  '--ssl-cert', cert2, '--ssl-ca', pki.controller_ca)
    assert p.returncode == 0, p.stderr
    assert cert2 in ovs.ssl() and cert not in ovs.ssl()
    # Opted out of keeping frames on the host: its port goes (the
    # controller holds them instead), and back on the next default run.
    assert 'vw-hold' in ovs.vsctl('list-ports', 'br-vw').split()
    renewed = ['--controller', 'ssl:127.0.0.1:6653', '--ssl-key', key2,
               '--ssl-cert', cert2, '--ssl-ca', pki.controller_ca]
    p = ovs.setup(*renewed, '--no-hold-frames')
    assert p.returncode == 0, p.stderr
    assert 'vw-hold' not in ovs.vsctl('list-ports', 'br-vw').split()
    assert ovs.setup(*renewed).returncode == 0
    assert 'vw-hold' in ovs.vsctl('list-ports', 'br-vw').split()
