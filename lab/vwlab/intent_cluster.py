"""The intent database as production runs it: a RAFT cluster of
ovsdb-servers (three members by default) with our schema, every
connection TLS, the members' own and the controllers'. Each member's
certificate comes from the controller CA and names
`virtualwire-intent-db` (what controllers check, `ovsdb.tls_remote`).
Members listen on loopback of the namespace the lab runs in (where the
controllers keep their intent connections: `southbound.netns`)."""
import os
import signal
import time

from vwlab.shell import LabError, free_port, sh

DB = 'VirtualWire'
NAME = 'virtualwire-intent-db'


def schema_path():
    from virtualwire.store.intent import SCHEMA_PATH
    return SCHEMA_PATH


class IntentCluster:
    def __init__(self, directory, issue, ca, n=3, host='127.0.0.1'):
        """issue(name) -> (key, cert) signed by `ca` naming NAME."""
        self.dir, self.issue, self.ca, self.host = directory, issue, ca, host
        self.names = ['db%d' % (i + 1) for i in range(n)]
        self.raft = {}
        self.client = {}
        self.files = {}

    @property
    def remote(self):
        """What controllers take as --intent-db: every member."""
        return ','.join('ssl:%s:%d' % (self.host, self.client[n])
                        for n in self.names)

    def path(self, name, ext):
        return os.path.join(self.dir, '%s.%s' % (name, ext))

    def start(self, timeout=30.0):
        os.makedirs(self.dir, exist_ok=True)
        for i, n in enumerate(self.names):
            self.raft[n], self.client[n] = free_port(), free_port()
            self.files[n] = self.issue(n)
            local = 'ssl:%s:%d' % (self.host, self.raft[n])
            first = 'ssl:%s:%d' % (self.host, self.raft[self.names[0]])
            sh(['ovsdb-tool', 'create-cluster', self.path(n, 'db'),
                schema_path(), local] if i == 0 else
               ['ovsdb-tool', 'join-cluster', self.path(n, 'db'), DB, local,
                first])
            self.start_member(n)
        self.wait_leader(timeout)
        return self

    def start_member(self, n):
        key, cert = self.files[n]
        sh(['ovsdb-server', self.path(n, 'db'),
            '--remote=pssl:%d:%s' % (self.client[n], self.host),
            '--private-key=' + key, '--certificate=' + cert,
            '--ca-cert=' + self.ca, '--pidfile=' + self.path(n, 'pid'),
            '--unixctl=' + self.path(n, 'ctl'),
            '--log-file=' + self.path(n, 'log'), '--detach', '--no-chdir'])

    def kill(self, n):
        """kill -9 of member n (a crashed server, its socket closed)."""
        try:
            with open(self.path(n, 'pid')) as f:
                os.kill(int(f.read()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
        for _ in range(100):
            if self.status(n) == '':
                return
            time.sleep(0.05)

    def status(self, n):
        return sh(['ovs-appctl', '-t', self.path(n, 'ctl'), 'cluster/status',
                   DB], check=False)

    def role(self, n):
        """'leader', 'follower', 'candidate', or '' if not running."""
        for line in self.status(n).splitlines():
            if line.startswith('Role: '):
                return line[6:].strip()
        return ''

    def leader(self):
        return next((n for n in self.names if self.role(n) == 'leader'), None)

    def wait_leader(self, timeout=30.0):
        end = time.time() + timeout
        while time.time() < end:
            roles = [self.role(n) for n in self.names]
            if roles.count('leader') == 1:
                return self.names[roles.index('leader')]
            time.sleep(0.2)
        raise LabError('no intent cluster leader within %.0fs: %s' % (
            timeout, {n: self.role(n) for n in self.names}))

    def stop(self):
        for n in self.names:
            self.kill(n)
