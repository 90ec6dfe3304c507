"""The packages as an operator meets them: built from this checkout with
Debian's tools, lintian-clean, installed by apt into a fresh Debian 12
root (mmdebstrap, from the archive), booted under real systemd
(systemd-nspawn --boot) in the lab's management namespace, where its
controller serves two lab hosts. Then what an operator does: check the
units, read --version, connect a wire with the packaged vwctl, and
restart the controller service under a 1 kHz stream."""
import json
import os
import re
import ssl
import subprocess
import shutil
import threading
import time

import pytest

from conftest import wait_until
from vwlab import Lab, packages
from vwlab.shell import CONTROLLER_IP, LAB_ROOT
from wire_traffic import udp_stream

UNITS = ['virtualwire-intent-db.service', 'virtualwire-controller.service',
         'virtualwire-collector.service', 'virtualwire-extender.service']
PKI = '/etc/virtualwire/pki'
REST = 'https://127.0.0.1:8780'
SOUTHBOUND = 8781


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


def _install_pki(lab, root):
    """The controller's key, certificate and the CAs, owned by the
    packaged service's user (as an operator copies them in)."""
    dst = os.path.join(root, PKI.lstrip('/'))
    os.makedirs(dst, exist_ok=True)
    uid = gid = None
    with open(os.path.join(root, 'etc/passwd')) as f:
        for line in f:
            p = line.split(':')
            if p[0] == 'virtualwire':
                uid, gid = int(p[2]), int(p[3])
    assert uid is not None, 'the package made no virtualwire user'
    for name in ('controller-key.pem', 'controller-cert.pem',
                 'host-ca.pem', 'controller-ca.pem', 'host-ca-key.pem'):
        shutil.copy(os.path.join(lab.pki.dir, name), os.path.join(dst, name))
        os.chown(os.path.join(dst, name), uid, gid)
        os.chmod(os.path.join(dst, name), 0o640)


class Installed:
    def __init__(self, lab, machine, changes, debs):
        self.lab, self.m = lab, machine
        self.changes, self.debs = changes, debs

    def vwctl(self, *args, check=True):
        return self.m.run(['vwctl', '--url', REST, '--ca-cert',
                           PKI + '/controller-ca.pem', '--token-file',
                           '/var/lib/virtualwire/api-token'] + list(args),
                          check=check)

    def hosts_synced(self):
        p = self.vwctl('--json', 'hosts', check=False)
        if p.returncode != 0:
            return False
        hosts = json.loads(p.stdout)['hosts']
        return len(hosts) == len(self.lab.hosts) and all(
            h['connected'] and h['synced'] for h in hosts)


@pytest.fixture(scope='module')
def installed():
    work = os.path.join(LAB_ROOT, 'packages-%d' % os.getpid())
    changes, debs = packages.build(os.path.join(work, 'build'))
    root = packages.make_root(os.path.join(work, 'root'), debs,
                              os.path.join(work, 'root.log'))
    with Lab(2, collector=False) as lab:
        _install_pki(lab, root)
        m = packages.Machine(root, lab.mgmt_ns, 'vwpkg' + lab.prefix[2:],
                             log=os.path.join(work, 'boot.log'))
        m.write('/etc/virtualwire/controller.yaml',
                _controller_yaml(lab.of_port))
        try:
            m.boot()
            inst = Installed(lab, m, changes, debs)
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
                'virtualwire-extender'):
        p = m.run([cmd, '--version'])
        assert p.stdout == '%s %s\n' % (cmd, version) and p.stderr == ''


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
    out = installed.vwctl('connect', 'pka-nic', 'pkb-nic').stdout
    assert 'pka-nic' in out and 'pkb-nic' in out, out
    wait_until(lambda: va.ping('192.0.2.2', count=1)[1] == 1, 20,
               what='ping over the packaged controller\'s wire')
    before = m.main_pid('virtualwire-controller')
    res = {}
    seconds = 10.0
    t = threading.Thread(target=lambda: res.update(zip(
        ('sent', 'got'), udp_stream(va, vb, '192.0.2.2', seconds=seconds,
                                    rate=1000))))
    t.start()
    time.sleep(2.0)
    m.systemctl('restart', 'virtualwire-controller')
    after = m.main_pid('virtualwire-controller')
    t.join(seconds + 60)
    assert after != before and after > 0
    # The sender was sending all along: a restart inside the window.
    assert res['sent']['sent'] == int(seconds * 1000), res['sent']
    assert res['got']['received'] == res['sent']['sent'], res
    assert res['got']['duplicates'] == 0, res
    # And it came back to the wire it had.
    wait_until(installed.hosts_synced, 60, what='hosts back after restart')
    assert 'pka-nic' in installed.vwctl('wires').stdout


def test_sighup_reloads_what_it_can_and_names_the_rest(installed):
    m = installed.m
    pid = m.main_pid('virtualwire-controller')
    m.write('/etc/virtualwire/controller.yaml',
            _controller_yaml(installed.lab.of_port).replace(
                'stats-interval: 1', 'stats-interval: 1\nlog-level: DEBUG\n'
                'hold-frames: 64'))
    m.systemctl('reload', 'virtualwire-controller')
    wait_until(lambda: 'settings reloaded: log_level applied; needing a '
               'restart: --hold-frames' in m.journal(
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
