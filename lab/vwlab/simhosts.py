"""Many simulated hosts for control-plane scale runs."""
import os
import subprocess

from vwlab.pki import OVSDB_SERVER_SSL
from vwlab.shell import MGMT_NET, sh


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
                 connect=True, per_switch=5, ports=True):
        self.lab, self.n, self.per = lab, n, vnics_per_host
        self.name = name
        self.per_switch = per_switch
        self.groups = -(-n // per_switch)
        self.mgmt_index = mgmt_index
        self.connect = connect
        # ports=False: bridges without vNIC ports (a baseline that installs
        # flows by hand needs none: OVS takes flows naming absent ports).
        self.ports = ports

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
        pki = self.lab.pki
        sh(['ovsdb-server', db, '--remote=punix:%s/db.sock' % d,
            '--remote=db:Open_vSwitch,Open_vSwitch,manager_options'] +
           (OVSDB_SERVER_SSL if pki else []) + [
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
        members = range(g * self.per_switch,
                        min(self.n, (g + 1) * self.per_switch))
        scheme = 'ssl' if pki else 'tcp'
        if pki and self.connect:
            # One vswitchd serves the group's bridges: one certificate
            # naming every host it may be (vw-pki --dns).
            names = [self.bridge(k) for k in members]
            key, cert = pki.issue(names[0], dns=names[1:],
                                  out=os.path.join(d, 'host'))
            sh(vsctl + ['set-ssl', key, cert, pki.controller_ca])
        if self.connect:
            sh(vsctl + ['set-manager', 'p%s:6640:%s' % (scheme, mgmt_ip)])
        # One transaction per bridge, not waiting for ovs-vswitchd: one
        # for a group's 5,000 ports cost ovs-vsctl 27 s of CPU and outran
        # its timeout on a loaded 2-core host (the 100,000-wire bench).
        for k in members:
            br = self.bridge(k)
            cmd = list(vsctl) + ['--no-wait'] + [
                '--', 'add-br', br, '--', 'set', 'bridge', br,
                'datapath_type=dummy', 'fail_mode=secure',
                'protocols=OpenFlow13,OpenFlow14',
                'other_config:datapath-id=%016x' % (0x5100000000 + k),
                'external_ids:vw-host-name=%s' % br,
                'external_ids:vw-tunnel-ip=%s' % self.tunnel_ip(k),
                '--', 'add-port', br, br + '-gre', '--', 'set', 'interface',
                br + '-gre', 'type=gre', 'options:key=flow',
                'options:remote_ip=flow', 'ofport_request=65000']
            for i in range(self.per if self.ports else 0):
                p = '%sp%d' % (br, i)      # port names are per-OVSDB
                cmd += ['--', 'add-port', br, p, '--', 'set', 'interface', p,
                        'type=dummy', 'ofport_request=%d' % (i + 1),
                        'external_ids:iface-id=%s' % self.vnic_id(k, i)]
            sh(cmd, timeout=600)
        # Then wait until ovs-vswitchd has taken them all in.
        sh(['ovs-vsctl', '--db=unix:%s/db.sock' % d, '--timeout=900', 'set',
            'open_vswitch', '.', 'external_ids:vw-bridges=%d' % len(members)],
           timeout=960)
        if self.connect:
            for k in members:
                br = self.bridge(k)
                # Every controller instance and the collector, each
                # reconnecting within a second.
                targets = self.lab.of_targets(scheme).split(',')
                cmd = list(vsctl)
                for j, t in enumerate(targets):
                    cmd += ['--', '--id=@c%d' % j, 'create', 'controller',
                            'target="%s"' % t, 'max_backoff=1000']
                sh(cmd + ['--', 'set', 'bridge', br, 'controller=%s' % ','.join(
                    '@c%d' % j for j in range(len(targets)))])

    def vsctl(self, k, *args):
        d = self.group_dir(k // self.per_switch)
        return sh(['ovs-vsctl', '--db=unix:%s/db.sock' % d, '--timeout=60']
                  + list(args))

    def reconnect(self, k):
        """Bridge k drops its controller connection and dials again (as
        after a switch or network restart): the controller dumps it."""
        target = self.vsctl(k, 'get-controller', self.bridge(k)).split()
        self.vsctl(k, 'del-controller', self.bridge(k))
        self.vsctl(k, 'set-controller', self.bridge(k), *target)

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
