"""The intent database as production runs it: a 3-member RAFT cluster of
ovsdb-servers on loopback, every connection TLS (the cluster's own and
the controller's), certificates from vw-pki. The real
controller keeps its wires there and goes on when the leader is killed;
a peer without a certificate, or with a host's, is refused by the
database; a controller pointed at an impostor database (a host's
certificate, or a controller-CA certificate that does not name the
database) refuses to start and says why, having read nothing."""
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

import pytest
import requests

from vwtest import wait_until
from virtualwire.store.intent import SCHEMA_PATH
from virtualwire.testing.ports import free_ports

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
VW_PKI = os.path.join(ROOT, 'controller', 'virtualwire', 'host', 'vw-pki')
DB = 'VirtualWire'


def run(*cmd, **kw):
    return subprocess.run(list(cmd), capture_output=True, text=True,
                          timeout=60, **kw)


class Pki:
    def __init__(self, d):
        self.d = d
        assert run(VW_PKI, 'init', d).returncode == 0

    def issue(self, name, *opts):
        r = run(VW_PKI, 'issue', self.d, name, *opts)
        assert r.returncode == 0, r.stderr
        return ('%s/%s-key.pem' % (self.d, name),
                '%s/%s-cert.pem' % (self.d, name))

    def ca(self, role):
        return '%s/%s-ca.pem' % (self.d, role)


def ssl_args(key, cert, ca):
    return ['--private-key=' + key, '--certificate=' + cert,
            '--ca-cert=' + ca]


def start_server(d, name, dbfile, port, key, cert, ca):
    base = os.path.join(d, name)
    r = run('ovsdb-server', dbfile, '--remote=pssl:%d:127.0.0.1' % port,
            *ssl_args(key, cert, ca), '--pidfile=%s.pid' % base,
            '--unixctl=%s.ctl' % base, '--log-file=%s.log' % base,
            '--detach', '--no-chdir')
    assert r.returncode == 0, r.stderr
    return base


def stop_server(base):
    try:
        with open(base + '.pid') as f:
            os.kill(int(f.read()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


@pytest.fixture
def pki(tmp_path):
    p = Pki(str(tmp_path / 'pki'))
    p.ctl = p.issue('ctl1', '--role', 'controller', '--ip', '127.0.0.1')
    p.h1 = p.issue('h1')                               # a host's
    p.other = p.issue('ctl2', '--role', 'controller')  # not the database
    return p


@pytest.fixture
def cluster(tmp_path, pki):
    """Three members; [(unixctl base, client port)]."""
    d = str(tmp_path)
    raft = free_ports(3)
    clients = free_ports(3)
    members = []
    for i, n in enumerate(('db1', 'db2', 'db3')):
        dbfile = os.path.join(d, n + '.db')
        local = 'ssl:127.0.0.1:%d' % raft[i]
        r = run('ovsdb-tool', 'create-cluster', dbfile, SCHEMA_PATH, local) \
            if i == 0 else run('ovsdb-tool', 'join-cluster', dbfile, DB,
                               local, 'ssl:127.0.0.1:%d' % raft[0])
        assert r.returncode == 0, r.stderr
        key, cert = pki.issue(n, '--role', 'controller', '--dns',
                              'virtualwire-intent-db', '--ip', '127.0.0.1')
        members.append((start_server(d, n, dbfile, clients[i], key, cert,
                                     pki.ca('controller')), clients[i]))
    wait_until(lambda: all('Role: ' in role(m) for m, _ in members) and
               sum('Role: leader' in role(m) for m, _ in members) == 1, 30,
               what='a leader elected over TLS')
    yield members
    for base, _ in members:
        stop_server(base)


def role(base):
    return run('ovs-appctl', '-t', base + '.ctl', 'cluster/status', DB).stdout


def start_controller(tmp_path, pki, remote, name='ctl'):
    state = tmp_path / name
    state.mkdir()
    rest, of = free_ports(2)
    token = state / 'token'
    token.write_text('t0ken-%s\n' % name)
    log = open(state / 'controller.log', 'w')
    p = subprocess.Popen(
        [sys.executable, '-m', 'virtualwire.main', '--state-dir', str(state),
         '--intent-db', remote, '--intent-db-ca', pki.ca('controller'),
         '--private-key', pki.ctl[0], '--certificate', pki.ctl[1],
         '--ca-cert', pki.ca('host'), '--rest-listen', '127.0.0.1:%d' % rest,
         '--of-listen', '127.0.0.1:%d' % of, '--token-file', str(token)],
        stdout=log, stderr=subprocess.STDOUT)
    p.url = 'https://127.0.0.1:%d' % rest
    p.log = state / 'controller.log'
    p.headers = {'Authorization': 'Bearer t0ken-%s' % name}
    return p


def test_the_controller_keeps_its_wires_in_a_tls_cluster_through_failover(
        tmp_path, pki, cluster):
    remote = ','.join('ssl:127.0.0.1:%d' % port for _, port in cluster)
    ctl = start_controller(tmp_path, pki, remote)
    ca = pki.ca('controller')
    try:
        def connect(a, b):
            try:
                r = requests.post(ctl.url + '/v1/wires', json={'a': a, 'b': b},
                                  headers=ctl.headers, verify=ca, timeout=10)
            except requests.RequestException:
                return None
            return r.json() if r.status_code == 201 else None
        first = wait_until(lambda: connect('vm1-eth0', 'vm2-eth0'), 60,
                           what='the first wire stored in the cluster')
        # Every member has it (read over TLS with the controller's key).
        for _base, port in cluster:
            dump = run('ovsdb-client', *ssl_args(*pki.ctl, ca), 'dump',
                       'ssl:127.0.0.1:%d' % port, DB, 'Wire')
            assert dump.returncode == 0, dump.stderr
            assert str(first['id']) in dump.stdout
        leader = next(b for b, _ in cluster if 'Role: leader' in role(b))
        stop_server(leader)
        t0 = time.monotonic()
        second = wait_until(lambda: connect('vm3-eth0', 'vm4-eth0'), 30,
                            what='a wire stored after the leader died')
        took = time.monotonic() - t0
        wires = requests.get(ctl.url + '/v1/wires', headers=ctl.headers,
                             verify=ca, timeout=10).json()['wires']
        assert {w['id'] for w in wires} == {first['id'], second['id']}
        print('failover: wrote again %.2f s after the leader died' % took)
        assert took < 30
        assert ctl.poll() is None
        # Nothing failed on the way (the collector's counters are saved
        # through any member too).
        log = ctl.log.read_text()
        assert 'ERROR' not in log and 'Traceback' not in log, log
    finally:
        ctl.terminate()
        ctl.wait(10)


def _handshake(port, cert=None):
    """A TLS client of a database member: what the server did with it."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert[1], cert[0])
    try:
        with socket.create_connection(('127.0.0.1', port), 5) as raw:
            with ctx.wrap_socket(raw) as s:
                s.sendall(json.dumps({'method': 'list_dbs', 'params': [],
                                      'id': 1}).encode())
                s.settimeout(5)
                return 'answered: %r' % s.recv(4096)
    except (ssl.SSLError, OSError) as e:
        return 'refused: %s' % e


def test_the_database_refuses_peers_and_the_controller_refuses_impostors(
        tmp_path, pki, cluster):
    port = cluster[0][1]
    # With the controller's certificate a member answers; without one, or
    # with a host's, it does not.
    assert _handshake(port, pki.ctl).startswith('answered'), \
        _handshake(port, pki.ctl)
    assert _handshake(port).startswith('refused')
    assert _handshake(port, pki.h1).startswith('refused')
    r = run('ovsdb-client', *ssl_args(*pki.h1, pki.ca('controller')),
            'list-dbs', 'ssl:127.0.0.1:%d' % port)
    assert r.returncode != 0
    # Impostors: a database server with a host's certificate, then with a
    # controller-CA certificate that does not name the database.
    for label, (key, cert) in (('a host', pki.h1), ('ctl2', pki.other)):
        d = str(tmp_path / ('fake-' + label.replace(' ', '-')))
        os.makedirs(d)
        dbfile = os.path.join(d, 'fake.db')
        assert run('ovsdb-tool', 'create', dbfile,
                   SCHEMA_PATH).returncode == 0
        [fport] = free_ports(1)
        base = start_server(d, 'fake', dbfile, fport, key, cert,
                            pki.ca('controller'))
        try:
            ctl = start_controller(tmp_path, pki,
                                   'ssl:127.0.0.1:%d' % fport,
                                   name='ctl-' + label.replace(' ', '-'))
            assert ctl.wait(30) != 0
            out = ctl.log.read_text()
            assert 'no member of --intent-db can be trusted as ' \
                'virtualwire-intent-db' in out, out
            assert ('certificate verify failed' in out or
                    "not the intent database's" in out), out
            # It read nothing: the impostor saw no monitor request.
            with open(base + '.log') as f:
                assert 'monitor' not in f.read()
        finally:
            stop_server(base)
