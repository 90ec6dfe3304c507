"""Many simulated hosts for control-plane scale runs."""
import os
import subprocess

# Imported here, in the main thread: `ovs` imports eventlet, and eventlet
# first imported in a worker thread leaves the pool unable to join it
# (SimHosts.up hung in ThreadPoolExecutor.shutdown).
from virtualwire.ovsdb.rawrpc import transact
from vwlab.pki import OVSDB_SERVER_SSL
from vwlab.shell import MGMT_NET, sh

# Simulated hosts write their vNICs' rows straight into OVSDB and nobody
# places them, so a lab that runs them trusts hosts (placement is the
# cloud's word per vNIC; what strict placement adds per claim is a lookup
# in core.placement). Benchmarks built on them say so.
SIM_PLACEMENT = 'insecure-trust-hosts'


class SimHosts:
    """Many simulated hypervisors for control-plane scale. Bridges are
    grouped `per_switch` to an ovs-vswitchd (dummy datapath: no kernel
    interfaces needed), each group in its own namespace on the management
    network: one vswitchd reconfigures in time linear in all its ports, so
    one process for 20,000 ports would take longer to build than to test.
    Each bridge is identified as a host the way vw-host-setup identifies a
    real one. `connect=False` leaves the bridges without a controller (a
    baseline to install flows by hand).

    `ports='rows'`: the vNIC ports exist only as rows of the host's OVSDB,
    not in the switch. The group's ovs-vswitchd keeps its own database
    (bridges and tunnel ports only) and the controller reads a second
    ovsdb-server holding what that vswitchd would have written there for
    the ports too (datapath ids and ofports set explicitly). For the
    largest runs: an idle ovs-vswitchd with 5,000 dummy ports used 3-15%
    of a core and took minutes to add them; OpenFlow is unchanged (OVS
    takes flows that name absent ports, and counts them)."""

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

    def dpid(self, k):
        # vw-host-setup's default, which a controller requiring
        # certificates insists on (core.ids.derived_dpid).
        from virtualwire.core.ids import derived_dpid
        return derived_dpid(self.bridge(k))

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
        env = dict(os.environ, OVS_RUNDIR=d)
        pki = self.lab.pki
        rows_only = self.ports == 'rows'
        # The controller dials the group's management address: the switch's
        # own database, or with rows_only the view beside it.
        served = self._ovsdb_server(d, 'conf', ns, env,
                                    remote=not rows_only)
        # (No vswitchd serves the view: never wait for one.)
        view = self._ovsdb_server(d, 'view', ns, env) + ['--no-wait'] \
            if rows_only else served
        sh(['ovs-vswitchd', 'unix:%s/conf.sock' % d,
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
            for vsctl in {id(served): served, id(view): view}.values():
                sh(vsctl + ['set-ssl', key, cert, pki.controller_ca])
        if self.connect:
            sh(view + ['set-manager', 'p%s:6640:%s' % (scheme, mgmt_ip)])
        # One transaction per bridge, not waiting for ovs-vswitchd: one
        # for a group's 5,000 ports cost ovs-vsctl 27 s of CPU and outran
        # its timeout on a loaded 2-core host (the 100,000-wire bench).
        for k in members:
            sh(served + ['--no-wait'] + self._bridge_args(
                k, ports=self.ports is True), timeout=600)
            if rows_only:
                self._insert_rows(d, k)
        # Then wait until ovs-vswitchd has taken them all in.
        sh(['ovs-vsctl', '--db=unix:%s/conf.sock' % d, '--timeout=900', 'set',
            'open_vswitch', '.', 'external_ids:vw-bridges=%d' % len(members)],
           timeout=960)
        if self.connect:
            for k in members:
                br = self.bridge(k)
                # Every controller instance and the collector, each
                # reconnecting within a second.
                targets = self.lab.of_targets(scheme).split(',')
                cmd = list(served)
                for j, t in enumerate(targets):
                    cmd += ['--', '--id=@c%d' % j, 'create', 'controller',
                            'target="%s"' % t, 'max_backoff=1000']
                sh(cmd + ['--', 'set', 'bridge', br, 'controller=%s' % ','.join(
                    '@c%d' % j for j in range(len(targets)))])

    @staticmethod
    def _ovsdb_server(d, name, ns, env, remote=True):
        """An ovsdb-server of the group on d/NAME.sock (and, with `remote`,
        on the remotes its own manager_options name, with the SSL row's
        files); returns the ovs-vsctl prefix that reaches it."""
        db = os.path.join(d, name + '.db')
        sh(['ovsdb-tool', 'create', db,
            '/usr/share/openvswitch/vswitch.ovsschema'])
        sh(['ovsdb-server', db, '--remote=punix:%s/%s.sock' % (d, name)] +
           (['--remote=db:Open_vSwitch,Open_vSwitch,manager_options'] +
            OVSDB_SERVER_SSL if remote else []) + [
            '--pidfile=%s/%s-ovsdb-server.pid' % (d, name),
            '--unixctl=%s/%s-ovsdb-server.ctl' % (d, name),
            '--log-file=%s/%s-ovsdb-server.log' % (d, name),
            '--detach', '--no-chdir'], ns=ns, env=env)
        vsctl = ['ovs-vsctl', '--db=unix:%s/%s.sock' % (d, name),
                 '--timeout=120']
        sh(vsctl + ['--no-wait', 'init'])
        return vsctl

    def _bridge_args(self, k, ports):
        """One ovs-vsctl transaction: bridge k as vw-host-setup leaves a
        host, its tunnel port and (`ports`) its vNIC ports."""
        br = self.bridge(k)
        cmd = ['--', 'add-br', br, '--', 'set', 'bridge', br,
               'datapath_type=dummy', 'fail_mode=secure',
               'protocols=OpenFlow13,OpenFlow14',
               'other_config:datapath-id=%016x' % self.dpid(k),
               'external_ids:vw-host-name=%s' % br,
               'external_ids:vw-tunnel-ip=%s' % self.tunnel_ip(k)]
        cmd += ['--', 'add-port', br, br + '-gre', '--', 'set', 'interface',
                br + '-gre', 'type=gre', 'options:key=flow',
                'options:remote_ip=flow', 'ofport_request=65000']
        for i in range(self.per if ports else 0):
            p = '%sp%d' % (br, i)      # port names are per-OVSDB
            cmd += ['--', 'add-port', br, p, '--', 'set', 'interface', p,
                    'type=dummy', 'ofport_request=%d' % (i + 1),
                    'external_ids:iface-id=%s' % self.vnic_id(k, i)]
        return cmd

    def _insert_rows(self, d, k):
        """Bridge k with its tunnel and vNIC ports into the group's view,
        as ovs-vswitchd would leave them (datapath_id, ofport): one raw
        transaction (ovs-vsctl spends about 8 s of CPU on 1,000 ports)."""
        br = self.bridge(k)

        def smap(d):
            return ['map', sorted(d.items())]
        ops, ports = [], []

        def port(i, name, ofport, itype, **row):
            ops.append({'op': 'insert', 'table': 'Interface',
                        'uuid-name': 'i%d' % i,
                        'row': dict(name=name, type=itype, ofport=ofport,
                                    ofport_request=ofport, **row)})
            ops.append({'op': 'insert', 'table': 'Port',
                        'uuid-name': 'p%d' % i,
                        'row': {'name': name,
                                'interfaces': ['named-uuid', 'i%d' % i]}})
            ports.append(['named-uuid', 'p%d' % i])
        port(0, br + '-gre', 65000, 'gre',
             options=smap({'key': 'flow', 'remote_ip': 'flow'}))
        for i in range(self.per):
            port(i + 1, '%sp%d' % (br, i), i + 1, 'dummy',
                 external_ids=smap({'iface-id': self.vnic_id(k, i)}))
        ops.append({'op': 'insert', 'table': 'Bridge', 'uuid-name': 'br',
                    'row': {'name': br, 'datapath_type': 'dummy',
                            'datapath_id': '%016x' % self.dpid(k),
                            'fail_mode': 'secure',
                            'external_ids': smap({
                                'vw-host-name': br,
                                'vw-tunnel-ip': self.tunnel_ip(k)}),
                            'ports': ['set', ports]}})
        ops.append({'op': 'mutate', 'table': 'Open_vSwitch', 'where': [],
                    'mutations': [['bridges', 'insert',
                                   ['set', [['named-uuid', 'br']]]]]})
        transact('unix:%s/view.sock' % d, 'Open_vSwitch', ops, timeout=60)

    def vsctl(self, k, *args):
        d = self.group_dir(k // self.per_switch)
        return sh(['ovs-vsctl', '--db=unix:%s/conf.sock' % d, '--timeout=60']
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
