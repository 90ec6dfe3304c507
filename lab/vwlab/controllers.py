"""The lab's controller instances: real `virtualwire-controller`
processes, southbound in the management namespace, REST on 127.0.0.1.

One instance by default, its intent database local (in its state
folder). A lab made with `controllers=N` runs N instances on one intent
cluster (`intent_cluster.IntentCluster`, three RAFT members over TLS),
each switch connected to every instance: one leads (`store.leadership`),
the others stand by. Instance k listens for OpenFlow on of_port + k and
for hooks on HOOK_PORT + k; every instance reads the operator's one token.
"""
import json
import os
import secrets
import socket
import subprocess
import sys
import time

import requests

from vwlab.shell import CONTROLLER_IP, LabError, free_port, niced, tail
from vwlab.libvirt_host import HOOK_PORT     # instance 0's; k: + k
from vwlab.sites import CONTROLLER_PUBLIC_IP, RENDEZVOUS_PORT

# The collector's OpenFlow port: the lab's first controller port + this
# (instances take the ports right after it).
COLLECTOR_OF_OFFSET = 50
COLLECTOR_NICE = 5



def port_open(host, port):
    try:
        with socket.create_connection((host, port), 0.5):
            return True
    except OSError:
        return False


class ControllerMixin:
    def init_controllers(self, n, of_port, collector=True):
        self.n_controllers = n
        self.of_ports = [of_port + k for k in range(n)]
        self.instances = {}          # k -> Popen
        self.rest_ports = {}         # k -> REST port
        self.intent_cluster = None   # made in up() when n > 1
        # The collector process (virtualwire-collector): every switch
        # lists it as one more controller; controllers mirror its figures.
        # collector=False: the controller reads counters on its own loop.
        self.collector_on = collector
        self.collector_of_port = of_port + COLLECTOR_OF_OFFSET
        self.collector_proc = None
        self.collector_port = None
        # The local intent database's listener for the collector (TLS
        # labs with one instance): its certificate writes only counters.
        self.collector_db_port = None

    @property
    def controller(self):
        """Instance 0's process (the only one, unless controllers=N)."""
        return self.instances.get(0)

    @property
    def rest_port(self):
        return self.rest_ports.get(0)

    def of_targets(self, scheme):
        """What a host's bridge connects to: every instance (and the
        collector)."""
        return ','.join('%s:%s:%d' % (scheme, CONTROLLER_IP, p)
                        for p in self.of_ports + (
                            [self.collector_of_port] if self.collector_on
                            else []))

    def southbound_urls(self):
        """Every instance's southbound REST (hooks, agents), as a list
        for their configuration."""
        return ','.join('%s://%s:%d' % (self.scheme, CONTROLLER_IP,
                                        HOOK_PORT + k)
                        for k in range(self.n_controllers))

    def start_intent_cluster(self):
        from vwlab.intent_cluster import IntentCluster, NAME
        self.intent_cluster = IntentCluster(
            os.path.join(self.dir, 'intent'),
            lambda n: self.pki.issue(n, dns=[NAME], ips=['127.0.0.1'],
                                     role='controller'),
            self.pki.controller_ca).start()

    def state_dir(self, k=0):
        return os.path.join(self.dir, 'controller' + ('-%d' % k if k else ''))

    def url_of(self, k):
        return '%s://127.0.0.1:%d' % (self.scheme, self.rest_ports[k])

    @property
    def urls(self):
        return [self.url_of(k) for k in sorted(self.rest_ports)]

    def start_controller(self, rest_port=None, extra=(), env=None,
                         instance=0):
        """Run instance `instance` (`env`: extra environment, e.g.
        OSKEN_HUB_TYPE)."""
        k = instance
        self.rest_ports[k] = rest_port or self.rest_ports.get(k) \
            or free_port()
        state = self.state_dir(k)
        os.makedirs(state, exist_ok=True)
        log = open(os.path.join(state, 'controller.log'), 'a')
        self.token_file = os.path.join(self.state_dir(0), 'api-token')
        os.makedirs(self.state_dir(0), exist_ok=True)
        if not os.path.exists(self.token_file):
            fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT, 0o600)
            with os.fdopen(fd, 'w') as f:
                f.write(secrets.token_urlsafe(32) + '\n')
        cluster = []
        if self.intent_cluster is not None:
            cluster = ['--intent-db', self.intent_cluster.remote,
                       '--intent-db-ca', self.pki.controller_ca]
        cmd = [sys.executable, '-m', 'virtualwire.main', '--state-dir', state,
               '--of-listen', '%s:%d' % (CONTROLLER_IP, self.of_ports[k]),
               '--rest-listen', '127.0.0.1:%d' % self.rest_ports[k],
               '--token-file', self.token_file,
               '--instance-name', 'ctl%d' % k,
               '--southbound-netns', self.mgmt_ns] + self.tls_args() + \
            cluster + [
               # For the hosts' libvirt hooks (lab.libvirt_host).
               '--southbound-rest-listen', '%s:%d' % (CONTROLLER_IP,
                                                      HOOK_PORT + k),
               # Flow counters read every second: what tests and the demo
               # watch should move while they watch.
               '--stats-interval', '1',
               '--placement', self.placement] + self.collector_args() + \
            self.collector_listen_args() + \
            (['--rendezvous-listen', '%s:%d' % (CONTROLLER_PUBLIC_IP,
                                                RENDEZVOUS_PORT)]
             if self.clouds and k == 0 else []) + list(extra)
        self._forget_shared_settings()
        # At the hosts' OVS niceness, as OVN's daemons: the controller's
        # bundle is on a migration's activation path (sync_order).
        cmd = niced(self.ovs_nice, cmd)
        self.instances[k] = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, **(env or {})))
        self.url = self.url_of(0) if 0 in self.rest_ports else self.url_of(k)
        self._write_vwctl_config()
        if self.collector_on and self.collector_proc is None:
            self.start_collector()
        if self.placements.waiting:        # plugged while none ran
            self.placements.flush()
        return self.instances[k]

    # -- the collector process -------------------------------------------
    @property
    def collector_dir(self):
        return os.path.join(self.dir, 'collector')

    @property
    def collector_url(self):
        return '%s://127.0.0.1:%d' % (self.scheme, self.collector_port)

    @property
    def collector_token_file(self):
        return os.path.join(self.collector_dir, 'collector-token')

    def collector_args(self):
        """What a controller is started with to mirror the collector."""
        if not self.collector_on:
            return []
        if self.collector_port is None:
            self.collector_port = free_port()
        os.makedirs(self.collector_dir, exist_ok=True)
        if not os.path.exists(self.collector_token_file):
            fd = os.open(self.collector_token_file,
                         os.O_WRONLY | os.O_CREAT, 0o600)
            with os.fdopen(fd, 'w') as f:
                f.write(secrets.token_urlsafe(32) + '\n')
        return ['--collector', self.collector_url,
                '--collector-token-file', self.collector_token_file] + (
            ['--collector-ca', self.pki.controller_ca] if self.pki else [])

    def collector_listen_args(self):
        """The local intent database's listener for the collector (RBAC
        role collector: store.collector_access), in a TLS lab whose one
        instance keeps the database."""
        if not (self.pki and self.collector_on and
                self.intent_cluster is None):
            return []
        self.collector_db_port = self.collector_db_port or free_port()
        return ['--collector-listen', 'pssl:%d:127.0.0.1'
                % self.collector_db_port]

    def _collector_intent_args(self):
        if self.intent_cluster is not None:
            return ['--intent-db', self.intent_cluster.remote,
                    '--intent-db-ca', self.pki.controller_ca]
        if self.collector_db_port is None:
            return ['--intent-db', 'unix:' + os.path.join(
                self.state_dir(0), 'intent.sock')]
        # Served by the controller's own ovsdb-server, under its name; the
        # collector checks the name before it starts: wait for it.
        end = time.time() + 60
        while not port_open('127.0.0.1', self.collector_db_port):
            if time.time() > end:
                raise LabError('the intent database never listened for the '
                               'collector on port %d' % self.collector_db_port)
            time.sleep(0.1)
        return ['--intent-db', 'ssl:127.0.0.1:%d' % self.collector_db_port,
                '--intent-db-ca', self.pki.controller_ca,
                '--intent-db-name', 'controller']

    def start_collector(self):
        """Run `virtualwire-collector` (in the lab as in production: its
        OpenFlow side in the management namespace, its API on 127.0.0.1,
        reading the controllers' intent database)."""
        self.collector_args()           # port and token
        intent = self._collector_intent_args()
        if self.pki is None:
            tls = ['--insecure-plaintext-lab']
        else:
            key, cert = self.pki.files('collector')
            if not os.path.exists(cert):
                key, cert = self.pki.issue('collector', role='controller',
                                           ips=[CONTROLLER_IP, '127.0.0.1'])
            tls = ['--private-key', key, '--certificate', cert,
                   '--ca-cert', self.pki.host_ca]
        cmd = [sys.executable, '-m', 'virtualwire.collectord.main',
               '--state-dir', self.collector_dir,
               '--of-listen', '%s:%d' % (CONTROLLER_IP,
                                         self.collector_of_port),
               '--rest-listen', '127.0.0.1:%d' % self.collector_port,
               '--token-file', self.collector_token_file,
               '--southbound-netns', self.mgmt_ns,
               '--stats-interval', '1'] + intent + tls
        log = open(os.path.join(self.collector_dir, 'collector.log'), 'a')
        # Below the switches and the controllers: counters may wait, a
        # migration's activation may not.
        self.collector_proc = subprocess.Popen(
            niced(COLLECTOR_NICE, cmd), stdout=log, stderr=subprocess.STDOUT)
        return self.collector_proc

    def stop_collector(self, kill=False):
        p, self.collector_proc = self.collector_proc, None
        if p and p.poll() is None:
            (p.kill if kill else p.terminate)()
            p.wait(10)

    def collector_get(self, path):
        """The collector's API (its own token), as a controller calls it."""
        with open(self.collector_token_file) as f:
            token = f.read().strip()
        r = requests.get(self.collector_url + path, timeout=15,
                         headers={'Authorization': 'Bearer ' + token},
                         verify=self.verify)
        r.raise_for_status()
        return r.json()

    def start_controllers(self):
        for k in range(self.n_controllers):
            self.start_controller(instance=k)

    @property
    def scheme(self):
        """https (the lab's default), or http in a plaintext lab."""
        return 'https' if self.pki else 'http'

    @property
    def verify(self):
        """What API clients verify the controller's certificate with
        (requests' `verify`): the controller CA."""
        return self.pki.controller_ca if self.pki else True

    def _forget_shared_settings(self):
        """Lab only: tests restart controllers with other flags
        (--move-timeout 3, --hold on) and mean them, so each start clears
        the intent database's shared settings (control.shared_settings)
        and the first active instance seeds them from its flags again. In
        production the row rules once seeded (`vwctl config set`)."""
        if self.intent_cluster is not None:
            key, cert = self.pki.files('controller')
            remote = self.intent_cluster.remote
            tls = ['-p', key, '-c', cert, '-C', self.pki.controller_ca]
        else:
            sock = os.path.join(self.state_dir(0), 'intent.sock')
            if not os.path.exists(sock):
                return                  # made at the first start
            remote, tls = 'unix:' + sock, []
        subprocess.run(['ovsdb-client'] + tls + [
            'transact', remote, json.dumps(['VirtualWire', {
                'op': 'delete', 'table': 'Global', 'where': []}])],
            capture_output=True, timeout=15)

    def tls_args(self):
        """The controller's TLS options (or the plaintext lab flag)."""
        if self.pki is None:
            return ['--insecure-plaintext-lab']
        key, cert = self.pki.files('controller')
        return ['--private-key', key, '--certificate', cert,
                '--ca-cert', self.pki.host_ca]

    def credential(self, role, name):
        """Issue a scoped credential (`POST /v1/credentials`) with the
        operator's token; returns the file (0600) holding its token."""
        with open(self.token_file) as f:
            admin = f.read().strip()
        r = requests.post(self.url + '/v1/credentials',
                          json={'role': role, 'name': name}, timeout=15,
                          headers={'Authorization': 'Bearer ' + admin},
                          verify=self.verify)
        if r.status_code != 201:
            raise LabError('issuing a %s credential for %s: %d %s'
                           % (role, name, r.status_code, r.text))
        path = os.path.join(self.dir, 'controller', 'token-%s-%s'
                            % (role, name))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, 'w') as f:
            f.write(r.json()['token'] + '\n')
        return path

    def _write_vwctl_config(self):
        self.vwctl_config = os.path.join(self.dir, 'vwctl.conf')
        with open(self.vwctl_config, 'w') as f:
            f.write('[vwctl]\nurl = %s\ntoken_file = %s\n'
                    % (','.join(self.urls), self.token_file))
            if self.pki:
                f.write('ca_cert = %s\n' % self.pki.controller_ca)
            if self.libvirt:
                f.write('\n[libvirt]\n' + ''.join(
                    '%s = %s\n' % (h.name, h.libvirt.uri)
                    for h in self.hosts[:self.n_hosts]))

    def diagnostics(self):
        """Log tails of the controllers and of each host's ovs-vswitchd:
        what a lab that failed to come up leaves for whoever reads the
        output (CI logs, the demo's stderr)."""
        out = []
        for k in sorted(self.instances) or [0]:
            p = self.instances.get(k)
            out += ['--- controller %d (exit %r) ---' % (
                k, p.poll() if p else None),
                tail(os.path.join(self.state_dir(k), 'controller.log'), 40)]
        if self.collector_on:
            p = self.collector_proc
            out += ['--- collector (exit %r) ---' % (p.poll() if p else None),
                    tail(os.path.join(self.collector_dir, 'collector.log'),
                         20)]
        for h in self.hosts:
            out += ['--- %s ovs-vswitchd ---' % h.name,
                    tail(os.path.join(h.dir, 'vswitchd.log'), 15)]
        return '\n'.join(out)

    def stop_controller(self, kill=False, instance=0):
        p = self.instances.pop(instance, None)
        if p and p.poll() is None:
            (p.kill if kill else p.terminate)()
            p.wait(10)

    def stop_controllers(self, kill=False):
        for k in list(self.instances):
            self.stop_controller(kill, k)
