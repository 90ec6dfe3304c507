"""The packages as an operator meets them: built from this checkout with
Debian's tools, lintian-clean, put into a fresh Debian 12 root
(mmdebstrap, from the archive) booted under real systemd (systemd-nspawn
--boot) in the lab's management namespace, and installed and set up by
running docs/install.rst's commands as written; its controller then
serves two lab hosts. Then what an operator does: check the units, read
--version, connect a wire with the packaged vwctl, restart the
controller service under a 1 kHz stream, reload settings, probe health,
and enrol hosts with a join token and with approval."""
import json
import os
import re
import ssl
import subprocess
import shutil
import time

import pytest
from cryptography import x509

from vwtest import packaging, wait_until
from vwlab import Lab, packages
from vwlab.overruns import Overruns
from vwlab.shell import CONTROLLER_IP
from vwtest.wire_traffic import stream_across

UNITS = ['virtualwire-intent-db.service', 'virtualwire-controller.service',
         'virtualwire-collector.service', 'virtualwire-extender.service',
         'virtualwire-host-agent.service', 'virtualwire-ovsdb-guard.service',
         'virtualwire-frame-hold.service']
PKI = '/etc/virtualwire/pki'
with open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), 'controller', 'virtualwire', 'store',
        'schema', 'virtualwire.ovsschema')) as _f:
    NOW = json.load(_f)['version']       # the schema this checkout ships
REST = 'https://127.0.0.1:8780'
SOUTHBOUND = 8781
INSTALL_DOC = os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), 'docs', 'install.rst')


def _controller_yaml(of_port):
    return '\n'.join([
        '# written by test_packages, as an operator would',
        'intent-db: unix:/run/virtualwire/intent.sock',
        'of-listen: %s:%d' % (CONTROLLER_IP, of_port),
        'rest-listen: 127.0.0.1:8780',
        'private-key: %s/controller-key.pem' % PKI,
        'certificate: %s/controller-cert.pem' % PKI,
        'ca-cert: %s/host-ca.pem' % PKI,
        # Hosts enrol through it (vw-host-setup enroll).
        'host-ca-key: %s/host-ca-key.pem' % PKI,
        'southbound-rest-listen: %s:%d' % (CONTROLLER_IP, SOUTHBOUND),
        'stats-interval: 1', '']) + '\n'


def _lab_cas_into(lab, root):
    """The lab's two CAs (certificates and keys), where docs/install.rst
    makes them: the doc's `vw-pki init` keeps them, so the controller it
    sets up is trusted by the lab's hosts and trusts them."""
    dst = os.path.join(root, PKI.lstrip('/'))
    os.makedirs(dst, exist_ok=True)
    for name in ('controller-ca.pem', 'controller-ca-key.pem',
                 'host-ca.pem', 'host-ca-key.pem'):
        shutil.copy(os.path.join(lab.pki.dir, name), os.path.join(dst, name))


class Installed:
    def __init__(self, lab, machine, changes, debs):
        self.lab, self.m = lab, machine
        self.changes, self.debs = changes, debs

    def follow_the_install_doc(self):
        """Every sh block of docs/install.rst, as written, with the
        lab's addresses: on the booted root, or on lab host h1 (its
        network, the root's files)."""
        env = {'VW_CONTROLLER_IP': CONTROLLER_IP, 'VW_DEBS': '/srv/debs',
               'VW_HOST': 'h1'}
        head = ''.join('export %s=%s\n' % kv for kv in sorted(env.items()))
        for where, block in packages.doc_blocks(INSTALL_DOC):
            script = head + block
            if where == 'controller':
                p = self.m.run(['bash', '-euo', 'pipefail', '-c', script],
                               check=False, timeout=300)
            else:
                p = subprocess.run(
                    ['ip', 'netns', 'exec', self.lab.hosts[0].ns, 'chroot',
                     self.m.root, 'bash', '-euo', 'pipefail', '-c', script],
                    capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, 'docs/install.rst block failed:\n%s' \
                '\n%s%s' % (block, p.stdout[-2000:], p.stderr[-2000:])

    def vwctl(self, *args, check=True):
        return self.m.run(['vwctl', '--url', REST, '--ca-cert',
                           PKI + '/controller-ca.pem', '--token-file',
                           '/var/lib/virtualwire/api-token'] + list(args),
                          check=check)

    def as_token(self, token_file):
        """`vwctl wires` with another credential than the operator's."""
        return self.m.run(['vwctl', '--url', REST, '--ca-cert',
                           PKI + '/controller-ca.pem', '--token-file',
                           token_file, 'wires'], check=False)

    def hosts_synced(self):
        p = self.vwctl('--json', 'hosts', check=False)
        if p.returncode != 0:
            return False
        hosts = json.loads(p.stdout)['hosts']
        return len(hosts) == len(self.lab.hosts) and all(
            h['connected'] and h['synced'] for h in hosts)


@pytest.fixture(scope='module')
def installed():
    # Built while the unit tier ran, if it did (vwtest.packaging).
    work, root, changes, debs = packaging.prepared()
    with Lab(2, collector=False, libvirt=True) as lab:
        _lab_cas_into(lab, root)
        m = packages.Machine(root, lab.mgmt_ns, 'vwpkg' + lab.prefix[2:],
                             log=os.path.join(work, 'boot.log'))
        try:
            m.boot()
            inst = Installed(lab, m, changes, debs)
            inst.follow_the_install_doc()
            try:
                wait_until(inst.hosts_synced, 90,
                           what='the packaged controller and 2 hosts')
            except AssertionError as e:
                raise AssertionError('%s\n%s' % (
                    e, m.journal('virtualwire-controller')))
            yield inst
        finally:
            m.halt()
    shutil.rmtree(work, ignore_errors=True)


def test_lintian_finds_no_error_in_any_package(installed):
    tags = packages.lintian(installed.changes)
    assert [t for t in tags if t[0] == 'E'] == []
    built = {os.path.basename(d).split('_')[0] for d in installed.debs}
    assert built == {'virtualwire-python', 'virtualwire-controller',
                     'virtualwire-host', 'virtualwire-extender'}


def test_every_unit_verifies_and_every_command_says_its_version(installed):
    m = installed.m
    p = m.run(['systemd-analyze', 'verify'] + UNITS, check=False)
    assert p.returncode == 0 and p.stderr == '', p.stderr
    version = m.run(['dpkg-query', '-W', '-f=${Version}',
                     'virtualwire-controller']).stdout
    for cmd in ('virtualwire-controller', 'virtualwire-collector',
                'virtualwire-intent-db', 'vwctl', 'vw-host-setup', 'vw-pki',
                'virtualwire-extender', 'vw-host-agent', 'vw-frame-hold'):
        p = m.run([cmd, '--version'])
        assert p.stdout == '%s %s\n' % (cmd, version) and p.stderr == ''
    # Log files (when configured) rotate, and the daemons reopen them.
    rot = m.run(['cat', '/etc/logrotate.d/virtualwire-controller']).stdout
    assert '/var/log/virtualwire/controller.log' in rot and \
        'systemctl reload virtualwire-controller.service' in rot
    # The alerting rules ship with the controller, as the source has them.
    ops = os.path.join(os.path.dirname(INSTALL_DOC), '..', 'ops')
    for src, dst in (('prometheus/virtualwire-rules.yml', 'prometheus'),
                     ('grafana/virtualwire-dashboard.json', 'grafana')):
        with open(os.path.join(ops, src)) as a, open(os.path.join(
                m.root, 'usr/share/virtualwire', dst,
                os.path.basename(src))) as b:
            assert a.read() == b.read()
    # The host's drop-in puts the tunnels' routes back after every start
    # of ovs-vswitchd (docs/install.rst), with the command it names.
    drop = 'lib/systemd/system/ovs-vswitchd.service.d/' \
        'virtualwire-tunnel-routes.conf'
    with open(os.path.join(os.path.dirname(INSTALL_DOC), '..', 'packaging',
                           'systemd', os.path.basename(drop))) as a, \
            open(os.path.join(m.root, drop)) as b:
        text = a.read()
        assert text == b.read()
    assert 'ExecStartPost=-/usr/sbin/vw-host-setup routes' in text
    assert m.run(['test', '-x', '/usr/sbin/vw-host-setup']).returncode == 0


def test_services_run_as_their_user_in_the_foreground(installed):
    m = installed.m
    assert m.active('virtualwire-intent-db') == 'active', \
        m.journal('virtualwire-intent-db')
    assert m.active('virtualwire-controller') == 'active', \
        m.journal('virtualwire-controller')
    # Not configured: stays off instead of failing.
    assert m.active('virtualwire-extender') == 'inactive'
    assert m.systemctl('show', '-p', 'ConditionResult', '--value',
                       'virtualwire-extender').stdout.strip() == 'no'
    db = m.main_pid('virtualwire-intent-db')
    ps = m.run(['ps', '-o', 'user:20=,comm=,args=', '-p', str(db)]).stdout
    assert ps.split()[:2] == ['virtualwire', 'ovsdb-server'], ps
    assert '--detach' not in ps
    ctl = m.main_pid('virtualwire-controller')
    ps = m.run(['ps', '-o', 'user:20=,args=', '-p', str(ctl)]).stdout
    assert ps.startswith('virtualwire ') and 'virtualwire-controller' in ps
    # Every process of the controller's unit is its own: nothing escaped
    # to run beside it (the lab's local store would start ovsdb-server).
    pids = m.run(['cat', '/sys/fs/cgroup/systemd/system.slice/'
                  'virtualwire-controller.service/cgroup.procs'],
                 check=False).stdout.split()
    assert pids and all(int(p) for p in pids)
    comms = {m.run(['ps', '-o', 'comm=', '-p', p], check=False)
             .stdout.strip() for p in pids}
    assert 'ovsdb-server' not in comms, comms


def test_a_wire_from_the_packaged_vwctl_survives_a_service_restart(
        installed):
    m, lab = installed.m, installed.lab
    h1, h2 = lab.hosts
    va = h1.add_vm('pka', [('pka-nic', '192.0.2.1/24')])
    vb = h2.add_vm('pkb', [('pkb-nic', '192.0.2.2/24')])
    # Placement is strict in the packaged controller: the cloud says
    # where each vNIC runs before its wire carries anything.
    for vnic, host in (('pka-nic', h1), ('pkb-nic', h2)):
        installed.vwctl('vnics', 'place', vnic, host.name)
    out = installed.vwctl('connect', 'pka-nic', 'pkb-nic').stdout
    assert 'pka-nic' in out and 'pkb-nic' in out, out
    wait_until(lambda: va.ping('192.0.2.2', count=1)[1] == 1, 20,
               what='ping over the packaged controller\'s wire')
    before = m.main_pid('virtualwire-controller')
    t0, age0 = time.monotonic(), _youngest_flow(lab.hosts)

    def restart():
        m.systemctl('restart', 'virtualwire-controller')
        return m.main_pid('virtualwire-controller')
    # A loss names its gaps and what the kernel counted as frames the
    # hosts' switches were too starved to read (a lab's, not a product's,
    # loss). CI lost 5-7 in a row here with nothing counted: the product's
    # (the flows' age below says so; see its comment).
    with Overruns(lab.hosts) as starved:
        sent, got, after = stream_across(va, vb, '192.0.2.2', restart)
    assert after != before and after > 0
    # The sender was sending all along: a restart inside the window.
    assert sent['sent'] == 10000, sent
    # The restarted controller sent the switches nothing: every flow is
    # as old as before (one that went and came back would be younger;
    # a restore had once taken back a host's row, and the restart removed
    # the wire's flows for 5-13 ms).
    assert _youngest_flow(lab.hosts) > age0 + (time.monotonic() - t0) - 1, \
        m.journal('virtualwire-controller')
    assert got['received'] == sent['sent'] and got['duplicates'] == 0, (
        got['missing'], got['gaps'], 'overruns %s' % starved.counted())
    # And it came back to the wire it had.
    wait_until(installed.hosts_synced, 60, what='hosts back after restart')
    assert 'pka-nic' in installed.vwctl('wires').stdout


def _youngest_flow(hosts):
    """Seconds since the newest flow on any of `hosts` was added."""
    return min(float(a) for h in hosts for a in re.findall(
        r'duration=([\d.]+)s', h.ofctl('dump-flows')))


def test_sighup_reloads_what_it_can_and_names_the_rest(installed):
    m = installed.m
    pid = m.main_pid('virtualwire-controller')
    m.write('/etc/virtualwire/controller.yaml',
            _controller_yaml(installed.lab.of_port).replace(
                'stats-interval: 1', 'stats-interval: 1\nlog-level: DEBUG\n'
                'hold-frames: 64\naudit-log: /var/lib/virtualwire/a2.log'))
    m.systemctl('reload', 'virtualwire-controller')
    wait_until(lambda: 'settings reloaded: log_level applied; needing a '
               'restart: --audit-log; shared by every instance, so set at '
               'run time with `vwctl config set`: hold-frames' in m.journal(
                   'virtualwire-controller', 200), 20,
               what='the reload in the journal')
    assert m.main_pid('virtualwire-controller') == pid    # not restarted
    # A file with an error changes nothing and says so.
    m.write('/etc/virtualwire/controller.yaml',
            _controller_yaml(installed.lab.of_port) + 'hold: maybe\n')
    m.systemctl('reload', 'virtualwire-controller')
    wait_until(lambda: 'settings not reloaded' in m.journal(
        'virtualwire-controller', 200), 20, what='the refusal')
    assert m.active('virtualwire-controller') == 'active'
    m.write('/etc/virtualwire/controller.yaml',
            _controller_yaml(installed.lab.of_port))


def test_probes_say_alive_and_ready_without_a_token(installed):
    m = installed.m
    py = '/usr/lib/virtualwire/python/bin/python'
    for extra in ([], ['--ready']):
        p = m.run([py, '-m', 'virtualwire.probe', '--timeout', '30'] + extra,
                  check=False)
        assert p.returncode == 0, p.stderr
    got = m.run([py, '-c', 'import ssl, urllib.request as u; c = '
                 'ssl._create_unverified_context(); print(u.urlopen('
                 '"%s/readyz", context=c).read().decode())' % REST]).stdout
    assert json.loads(got) == {'status': 'ready'}


def _enroll(installed, host, *extra, background=False):
    """The packaged `vw-host-setup enroll`, run in the lab host's network
    namespace from the installed root (the root is the host's disk here:
    its key is made there and stays there)."""
    cmd = ['ip', 'netns', 'exec', host.ns, 'chroot', installed.m.root,
           '/usr/sbin/vw-host-setup', 'enroll', '--name', host.name,
           '--controller-url', 'https://%s:%d' % (CONTROLLER_IP, SOUTHBOUND),
           '--ca-cert', PKI + '/controller-ca.pem',
           '--dir', '/var/lib/enrolled/' + host.name] + list(extra)
    if background:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _presented(host, lab):
    """The certificate a host's OVSDB listener presents (DER), asked as a
    controller asks (its certificate; the host CA pinned)."""
    p = subprocess.run(
        ['ip', 'netns', 'exec', lab.mgmt_ns, 'openssl', 's_client',
         '-connect', '%s:6640' % host.mgmt_ip, '-CAfile', lab.pki.host_ca,
         '-cert', os.path.join(lab.pki.dir, 'controller-cert.pem'),
         '-key', os.path.join(lab.pki.dir, 'controller-key.pem'),
         '-verify_return_error'], input='', capture_output=True, text=True,
        timeout=30)
    assert 'Verify return code: 0 (ok)' in p.stdout, p.stdout + p.stderr
    pem = re.search(r'-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE'
                    r'-----', p.stdout, re.S).group(0)
    return ssl.PEM_cert_to_DER_cert(pem)


def test_hosts_enrol_with_a_join_token_and_with_approval(installed):
    m, lab = installed.m, installed.lab
    h1, h2 = lab.hosts
    # h1: the operator issues a one-time token bound to h1.
    out = installed.vwctl('hosts', 'join-token', 'h1', '--ttl',
                          '600').stdout
    token = out.strip().splitlines()[-1]
    m.write('/tmp/h1.token', token + '\n', 0o600)
    p = _enroll(installed, h1, '--join-token-file', '/tmp/h1.token')
    assert p.returncode == 0, p.stderr
    assert 'h1 enrolled with its join token' in p.stderr
    d1 = os.path.join(m.root, 'var/lib/enrolled/h1')
    assert os.stat(os.path.join(d1, 'h1-key.pem')).st_mode & 0o777 == 0o600
    # Used once: presented again, refused, and nothing is written.
    again = _enroll(installed, h1, '--join-token-file', '/tmp/h1.token',
                    '--dir', '/var/lib/enrolled/again')
    assert again.returncode == 1
    assert 'the join token is not valid for h1' in again.stderr
    # h2: no token; it waits until the operator approves its key.
    bg = _enroll(installed, h2, '--wait', '90', '--interval', '0.5',
                 background=True)
    rows = wait_until(lambda: [r for r in json.loads(installed.vwctl(
        '--json', 'hosts', 'pending').stdout)['enrolments']
        if r['name'] == 'h2' and r['state'] == 'pending'], 30,
        what='h2 pending')
    installed.vwctl('hosts', 'approve', 'h2')
    _out, err = bg.communicate(timeout=60)
    assert bg.returncode == 0, err
    # The fingerprint the host printed is the one the operator approved.
    assert rows[0]['fingerprint'] in err and 'h2 approved' in err
    # Their switches and OVSDBs now present the enrolled certificates,
    # and the controller admits them as h1 and h2.
    for h in (h1, h2):
        d = os.path.join(m.root, 'var/lib/enrolled', h.name)
        h.bootstrap(['--ssl-key', os.path.join(d, h.name + '-key.pem'),
                     '--ssl-cert', os.path.join(d, h.name + '-cert.pem')])
    m.systemctl('restart', 'virtualwire-controller')   # new sessions
    wait_until(installed.hosts_synced, 60, what='enrolled hosts admitted')
    for h in (h1, h2):
        with open(os.path.join(m.root, 'var/lib/enrolled', h.name,
                               h.name + '-cert.pem')) as f:
            assert _presented(h, lab) == ssl.PEM_cert_to_DER_cert(f.read())


def test_a_host_renews_its_certificate_without_a_restart(installed):
    """docs/install.rst's renewal on h1, enrolled above: `vw-host-setup
    enroll` again with a new token keeps the key and swaps the
    certificate; `bridge/reconnect` presents it under a 1 kHz stream (0
    lost); the controller, not restarted, reads the new expiry."""
    m, lab = installed.m, installed.lab
    h1, h2 = lab.hosts
    d1 = os.path.join(m.root, 'var/lib/enrolled/h1')
    with open(os.path.join(d1, 'h1-key.pem')) as f:
        key = f.read()
    with open(os.path.join(d1, 'h1-cert.pem')) as f:
        old = x509.load_pem_x509_certificate(f.read().encode())
    va = h1.add_vm('rna', [('rna-nic', '192.0.2.11/24')])
    vb = h2.add_vm('rnb', [('rnb-nic', '192.0.2.12/24')])
    for vnic, host in (('rna-nic', h1), ('rnb-nic', h2)):   # strict
        installed.vwctl('vnics', 'place', vnic, host.name)
    cid = json.loads(installed.vwctl('--json', 'connect', 'rna-nic',
                                     'rnb-nic').stdout)['connector_id']
    wait_until(lambda: va.ping('192.0.2.12', count=1)[1] == 1, 30,
               what='ping across h1 before renewal')
    pid = m.systemctl('show', '-p', 'MainPID', '--value',
                      'virtualwire-controller').stdout.strip()
    token = installed.vwctl('hosts', 'join-token', 'h1', '--ttl',
                            '600').stdout.strip().splitlines()[-1]
    m.write('/tmp/h1-renew.token', token + '\n', 0o600)
    p = _enroll(installed, h1, '--join-token-file', '/tmp/h1-renew.token')
    assert p.returncode == 0, p.stderr
    with open(os.path.join(d1, 'h1-key.pem')) as f:
        assert f.read() == key                    # the key never moved
    with open(os.path.join(d1, 'h1-cert.pem')) as f:
        pem = f.read()
    new = x509.load_pem_x509_certificate(pem.encode())
    assert new.serial_number != old.serial_number
    assert new.public_key() == old.public_key()
    assert new.not_valid_after_utc > old.not_valid_after_utc
    sent, got, _ = stream_across(
        va, vb, '192.0.2.12',
        lambda: h1.appctl('bridge/reconnect', 'br-int'))
    assert sent['sent'] == 10000 and got['received'] == sent['sent'] and \
        got['duplicates'] == 0, (sent, got)

    def seen():
        hosts = {h['name']: h for h in json.loads(installed.vwctl(
            '--json', 'hosts').stdout)['hosts']}
        return hosts['h1']['connected'] and abs(
            hosts['h1']['certificate_expires_at'] -
            new.not_valid_after_utc.timestamp()) < 1
    wait_until(seen, 30, what="the controller reading h1's new expiry")
    wait_until(lambda: _presented(h1, lab) == ssl.PEM_cert_to_DER_cert(pem),
               30, what="h1's OVSDB presenting the renewed certificate")
    assert m.systemctl('show', '-p', 'MainPID', '--value',
                       'virtualwire-controller').stdout.strip() == pid
    installed.vwctl('disconnect', str(cid))
    h1.remove_vm(va)
    h2.remove_vm(vb)


class Member:
    """One intent-database cluster member run by the packaged tool (as
    its unit on another machine would), in the management namespace."""

    def __init__(self, installed, k, first_port):
        self.inst, self.k = installed, k
        self.raft = first_port + 3 + k
        self.client = first_port + k
        self.dir = '/var/lib/vwdb'
        self.sock = '%s/m%d.sock' % (self.dir, k)
        self.proc = None

    def tool(self, *verb, remote=(), schema=None):
        cmd = ['ip', 'netns', 'exec', self.inst.lab.mgmt_ns, 'chroot',
               self.inst.m.root, 'virtualwire-intent-db',
               '--db', '%s/m%d.db' % (self.dir, self.k),
               '--socket', self.sock,
               '--cluster-local', 'ssl:127.0.0.1:%d' % self.raft,
               '--remote', 'pssl:%d:127.0.0.1' % self.client,
               '--private-key', PKI + '/db-key.pem',
               '--certificate', PKI + '/db-cert.pem',
               '--ca-cert', PKI + '/controller-ca.pem'] + \
            ['--cluster-remote=' + r for r in remote] + \
            (['--schema', schema] if schema else []) + list(verb)
        return cmd

    def start(self, remote=(), schema=None):
        self.proc = subprocess.Popen(self.tool('run', remote=remote,
                                               schema=schema),
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)

    def run(self, *verb):
        return subprocess.run(self.tool(*verb), capture_output=True,
                              text=True, timeout=120)

    def version(self):
        return subprocess.run(
            ['chroot', self.inst.m.root, 'ovsdb-client',
             'get-schema-version', 'unix:' + self.sock, 'VirtualWire'],
            capture_output=True, text=True).stdout.strip()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def _old_schema(root):
    """The schema before enrolment (1.10.0): today's without the tables
    that came since, in the root for the tool to create the cluster
    with."""
    doc = json.load(open(os.path.join(
        root, 'usr/lib/virtualwire/python/lib/python3.11/site-packages/'
        'virtualwire/store/schema/virtualwire.ovsschema')))
    for t in ('Enrolment', 'JoinToken', 'Global', 'Revocation'):
        doc['tables'].pop(t)
    doc['version'] = '1.10.0'
    path = os.path.join(root, 'var/lib/vwdb/old.ovsschema')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        json.dump(doc, f)
    return '/var/lib/vwdb/old.ovsschema'


def test_the_intent_cluster_upgrades_under_traffic_with_the_packaged_tool(
        installed):
    m, lab = installed.m, installed.lab
    key, cert = lab.pki.issue('db', dns=['virtualwire-intent-db'],
                              ips=['127.0.0.1'], role='controller')
    for src, dst in ((key, 'db-key.pem'), (cert, 'db-cert.pem')):
        shutil.copy(src, os.path.join(m.root, PKI.lstrip('/'), dst))
    old = _old_schema(m.root)
    members = [Member(installed, k, 6641) for k in range(3)]
    try:
        members[0].start(schema=old)
        for mb in members[1:]:
            mb.start(remote=['ssl:127.0.0.1:%d' % members[0].raft])
        for mb in members:
            wait_until(lambda: mb.version() == '1.10.0', 60,
                       what='member %d serving 1.10.0' % mb.k)
        # The packaged controller (NOW's code) on the 1.10.0 cluster.
        conf = _controller_yaml(lab.of_port).replace(
            'intent-db: unix:/run/virtualwire/intent.sock',
            'intent-db: %s\nintent-db-ca: %s/controller-ca.pem' % (
                ','.join('ssl:127.0.0.1:%d' % mb.client for mb in members),
                PKI))
        m.write('/etc/virtualwire/controller.yaml', conf)
        m.systemctl('restart', 'virtualwire-controller')
        wait_until(installed.hosts_synced, 90, what='hosts on the cluster')
        # Skew, N+1 against N: what needs the new tables says so.
        p = installed.vwctl('hosts', 'pending', check=False)
        assert p.returncode == 1 and 'virtualwire-intent-db upgrade' in \
            p.stderr, p.stderr
        h1, h2 = lab.hosts
        va = h1.add_vm('pua', [('pua-nic', '192.0.2.1/24')])
        vb = h2.add_vm('pub', [('pub-nic', '192.0.2.2/24')])
        for vnic, host in (('pua-nic', h1), ('pub-nic', h2)):  # strict
            installed.vwctl('vnics', 'place', vnic, host.name)
        cid = json.loads(installed.vwctl('--json', 'connect', 'pua-nic',
                                         'pub-nic').stdout)['connector_id']
        wait_until(lambda: va.ping('192.0.2.2', count=1)[1] == 1, 30,
                   what='ping on the cluster-held wire')
        # Any member: the conversion goes through the leader.
        sent, got, up = stream_across(va, vb, '192.0.2.2',
                                      lambda: members[1].run('upgrade'))
        assert up.returncode == 0, up.stderr
        # Converted, and the collector's listeners written as configured
        # (none here: store.collector_access).
        assert up.stdout.strip().splitlines() == [
            'VirtualWire converted from 1.10.0 to %s' % NOW,
            'collector listeners: none'], up.stdout
        assert sent['sent'] == 10000, sent
        assert got['received'] == sent['sent'] and \
            got['duplicates'] == 0, got
        for mb in members:
            wait_until(lambda: mb.version() == NOW, 30,
                       what='member %d at %s' % (mb.k, NOW))
        assert members[2].run('upgrade').stdout.strip() == \
            'VirtualWire is already at %s' % NOW
        # Controllers take the new tables at their next start.
        m.systemctl('restart', 'virtualwire-controller')
        wait_until(installed.hosts_synced, 90, what='hosts after upgrade')
        assert installed.vwctl('hosts', 'pending').returncode == 0
        assert 'pua-nic' in installed.vwctl('wires').stdout
        # Backup and restore of the cluster: the wire disconnected after
        # the backup comes back and carries traffic; a credential revoked
        # after it stays refused.
        installed.vwctl('credentials', 'issue', 'reader', 'mon', '--out',
                        '/var/lib/vwdb/mon.token')
        assert installed.as_token('/var/lib/vwdb/mon.token').returncode == 0
        assert members[0].run('backup', '/var/lib/vwdb/b.db') \
            .returncode == 0
        with open(os.path.join(m.root, 'var/lib/vwdb/b.db')) as f:
            assert 'pua-nic' in f.read()
        installed.vwctl('credentials', 'revoke', 'reader', 'mon')
        installed.vwctl('disconnect', str(cid))
        wait_until(lambda: va.ping('192.0.2.2', count=1)[1] == 0, 30,
                   what='the wire gone')
        back = members[2].run('restore', '/var/lib/vwdb/b.db')
        assert back.returncode == 0, back.stderr
        assert 'took back 1 credentials' in back.stdout, back.stdout
        wait_until(lambda: va.ping('192.0.2.2', count=1)[1] == 1, 30,
                   what='the restored wire carrying traffic')
        refused = installed.as_token('/var/lib/vwdb/mon.token')
        assert refused.returncode != 0 and '401' in refused.stderr, \
            refused.stderr
    finally:
        for mb in members:
            mb.stop()
        m.write('/etc/virtualwire/controller.yaml',
                _controller_yaml(lab.of_port))
        m.systemctl('restart', 'virtualwire-controller', check=False)


def test_a_guest_migrates_with_the_installed_libvirt_hook(installed):
    """The hook as the host package installed it, run by each lab host's
    libvirtd with a hypervisor credential issued by the packaged vwctl:
    `virsh migrate --live` moves a guest and its wire follows."""
    lab, m = installed.lab, installed.m
    h1, h2 = lab.hosts
    hook = os.path.join(m.root, 'usr/lib/virtualwire/libvirt-hooks/qemu')
    assert os.readlink(os.path.join(
        m.root, 'etc/libvirt/hooks/qemu.d/virtualwire')) == \
        '/usr/lib/virtualwire/libvirt-hooks/qemu'
    for h in (h1, h2):
        out = '/var/lib/virtualwire/hook-%s.token' % h.name
        installed.vwctl('credentials', 'issue', 'hypervisor', h.name,
                        '--out', out)
        h.libvirt.install_hook(token_file=os.path.join(m.root,
                                                       out.lstrip('/')),
                               hook=hook)
    vnic = '6f1c2a52-4a8e-4d8e-9f39-2b0c4d6e8a10'
    # Strict placement: the cloud places both; the move is believed on
    # the two hosts' word (the hook on h2, the agent on h1).
    for v, host in ((vnic, h1), ('pkgfar-nic', h2)):
        installed.vwctl('vnics', 'place', v, host.name)
    g = h1.define_guest('pkgmig', [(vnic, '10.88.0.1/24')])
    far = h2.add_vm('pkgfar', [('pkgfar-nic', '10.88.0.2/24')])
    installed.vwctl('connect', vnic, 'pkgfar-nic')

    def state():
        wires = json.loads(installed.vwctl('--json', 'wires').stdout)
        return [w['state'] for w in wires['wires'] if w['a'] == vnic or
                w['b'] == vnic]
    wait_until(lambda: state() == ['tunnelled'], 30, what='the wire up')
    wait_until(lambda: far.ping('10.88.0.1', count=1)[1] == 1, 30,
               what='the guest answering over the wire')
    lab.migrate(g, h1, h2)
    wait_until(lambda: state() == ['collapsed'], 30,
               what='the wire collapsed on h2 after the move')
    wait_until(lambda: far.ping('10.88.0.1', count=1)[1] == 1, 20,
               what='the guest answering on h2')
    moves = json.loads(installed.vwctl('--json', 'migrations').stdout)
    # Announced by the installed hook (not found in OVSDB afterwards).
    assert [(mv['vm'], mv['sources'], mv['destination'], mv['found_by'])
            for mv in moves['migrations']] == [
                ('pkgmig', {vnic: 'h1'}, 'h2', 'hook')], moves
