"""OVN beside VirtualWire in one lab: the peer our migration outage is
measured against, on the same hosts, the same underlay and the same
libvirtd (lab notes, section 12).

Central: OVN's northbound and southbound ovsdb-servers and ovn-northd in
the lab folder (unix sockets). Each lab host runs an ovn-controller on its
own ovsdb-server with its own integration bridge, br-ovn (netdev,
fail_mode=secure), Geneve from the host's underlay IP; VirtualWire keeps
br-int. A guest plugged into br-ovn is OVN's, into br-int ours.

A migration the OVN way (its multichassis activation): before it,
requested-chassis=SRC,DST with activation-strategy=rarp (both chassis
bound, the destination delivering only after the guest's RARP); after it,
requested-chassis=DST. `--wait=hv` returns once every chassis applied it.
"""
import os
import time

from vwlab.shell import LabError, niced, sh

NB_SCHEMA = '/usr/share/ovn/ovn-nb.ovsschema'
SB_SCHEMA = '/usr/share/ovn/ovn-sb.ovsschema'
BRIDGE = 'br-ovn'


class Ovn:
    def __init__(self, lab, bridge=BRIDGE):
        self.lab = lab
        self.bridge = bridge
        self.dir = os.path.join(lab.dir, 'ovn')
        self.nb = 'unix:%s/nb.sock' % self.dir
        self.sb = 'unix:%s/sb.sock' % self.dir

    def _env(self, rundir):
        return dict(os.environ, OVN_RUNDIR=rundir, OVS_RUNDIR=rundir)

    def _niced(self, cmd):
        # ovn-ctl starts OVN's daemons at nice -10, as ovs-ctl does OVS's:
        # the same niceness as the lab's switches.
        return niced(self.lab.ovs_nice, cmd)

    def _db(self, name, schema):
        db = os.path.join(self.dir, '%s.db' % name)
        sh(['ovsdb-tool', 'create', db, schema])
        sh(self._niced([
            'ovsdb-server', db, '--remote=punix:%s/%s.sock' % (self.dir, name),
            '--pidfile=%s/%s.pid' % (self.dir, name),
            '--unixctl=%s/%s.ctl' % (self.dir, name),
            '--log-file=%s/%s.log' % (self.dir, name),
            '--detach', '--no-chdir']), env=self._env(self.dir))

    def start(self, timeout=60):
        """Central, then a chassis on every lab host; returns once all
        chassis are registered in the southbound database."""
        for path in (NB_SCHEMA, SB_SCHEMA):
            if not os.path.exists(path):
                raise LabError('%s missing: install ovn-central ovn-host'
                               % path)
        os.makedirs(self.dir, exist_ok=True)
        self._db('nb', NB_SCHEMA)
        self._db('sb', SB_SCHEMA)
        self.nbctl('init')
        sh(['ovn-sbctl', '--db=' + self.sb, 'init'])
        sh(self._niced([
            'ovn-northd', '--ovnnb-db=' + self.nb, '--ovnsb-db=' + self.sb,
            '--pidfile=%s/northd.pid' % self.dir,
            '--unixctl=%s/northd.ctl' % self.dir,
            '--log-file=%s/northd.log' % self.dir, '--detach', '--no-chdir']),
           env=self._env(self.dir))
        for h in self.lab.hosts:
            self._chassis(h)
        end = time.time() + timeout
        while time.time() < end:
            names = sh(['ovn-sbctl', '--db=' + self.sb, '--bare',
                        '--columns=name', 'list', 'Chassis']).split()
            if len(names) == len(self.lab.hosts):
                return
            time.sleep(0.2)
        raise LabError('OVN chassis did not register: %s' % names)

    def _chassis(self, h):
        run = os.path.join(h.dir, 'ovn')
        os.makedirs(run, exist_ok=True)
        h.vsctl('--may-exist', 'add-br', self.bridge, '--', 'set', 'bridge',
                self.bridge, 'datapath_type=netdev', 'fail_mode=secure',
                'other_config:disable-in-band=true')
        h.vsctl('set', 'Open_vSwitch', '.',
                'external_ids:system-id=%s' % h.name,
                'external_ids:ovn-remote=%s' % self.sb,
                'external_ids:ovn-encap-type=geneve',
                'external_ids:ovn-encap-ip=%s' % h.tunnel_ip,
                'external_ids:ovn-bridge=%s' % self.bridge,
                'external_ids:ovn-bridge-datapath-type=netdev')
        env = self._env(run)
        env['OVS_RUNDIR'] = h.dir
        sh(self._niced([
            'ovn-controller', 'unix:%s/db.sock' % h.dir,
            '--pidfile=%s/ovn-controller.pid' % run,
            '--log-file=%s/ovn-controller.log' % run, '--detach',
            '--no-chdir']), ns=h.ns, env=env)

    def nbctl(self, *args):
        return sh(['ovn-nbctl', '--db=' + self.nb, '--timeout=30']
                  + [str(a) for a in args])

    def add_port(self, switch, port, mac, ip):
        """A logical port `port` (the vNIC's iface-id) on logical switch
        `switch` (made if missing) with its MAC and IP."""
        self.nbctl('--may-exist', 'ls-add', switch)
        self.nbctl('--may-exist', 'lsp-add', switch, port)
        self.nbctl('lsp-set-addresses', port, '%s %s' % (mac, ip))

    def prepare_move(self, port, src, dst):
        """Both chassis bound, the destination activated by the RARP."""
        self.nbctl('--wait=hv', 'lsp-set-options', port,
                   'requested-chassis=%s,%s' % (src, dst),
                   'activation-strategy=rarp')

    def finish_move(self, port, dst):
        """The migration is over: bound on the destination alone."""
        self.nbctl('--wait=hv', 'lsp-set-options', port,
                   'requested-chassis=%s' % dst)

    def wait_up(self, port, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            if self.nbctl('get', 'Logical_Switch_Port', port,
                          'up').strip() == 'true':
                return
            time.sleep(0.2)
        raise LabError('OVN port %s never came up' % port)
