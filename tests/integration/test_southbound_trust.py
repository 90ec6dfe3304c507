"""Attacks on the southbound channels of the real lab (TLS, two CAs from
vw-pki), tried the way an attacker on the management network
would: a rogue namespace with its own Open vSwitch claims to be h1 (its
name, datapath id, a port with the victim's vNIC and a frame from it)
with no certificate, one from another CA, and h2's real certificate; and
peers without the right CA's certificate knock on OpenFlow and on a host's
OVSDB. Meanwhile a 1 kHz stream crosses the victim's wire."""
import hashlib
import json
import os
import re
import ssl
import subprocess
import time

import pytest

from vwtest import wait_until
from vwlab import rogue as rogue_mod
from vwlab.pki import LabPki
from vwlab.shell import CONTROLLER_IP, sh

def _refusals(api):
    return api.ok('GET', '/v1/status')['admission']['recent_refusals']


def _refused(api, rogue, why):
    return [r for r in _refusals(api)
            if r['peer'].startswith(rogue.mgmt_ip + ':') and why in r['why']]


def _host(api, name):
    return api.ok('GET', '/v1/hosts/%s' % name)


def _our_flows(host):
    return [line for line in host.dump_flows().splitlines()
            if 'cookie=0x5657' in line]


@pytest.fixture(scope='module')
def rogue(lab):
    return rogue_mod.impostor(lab, 'rogue1', index=80)


def test_a_rogue_host_cannot_connect_claim_a_name_or_take_a_datapath(
        lab, api, pair, rogue, streams, tmp_path):
    va, vb, w = pair('h1', 'h3')
    victim = lab.host('h1')
    vnic = next(iter(va.nics))
    mac = va.nics[vnic]['mac']
    h1_before = _host(api, 'h1')
    assert h1_before['certificate'] == ['h1'] and \
        h1_before['switch_address'] == victim.mgmt_ip

    stream = streams(va, vb, '192.0.2.2', 6201)

    other = LabPki(str(tmp_path / 'other-ca')).init()
    okey, ocert = other.issue('h1')
    h2key, h2cert = lab.pki.files('h2')
    attacks = [
        # OpenFlow in the clear to the TLS port.
        ('no certificate', 'tcp', None, 'TLS handshake failed'),
        # A certificate naming h1, from a CA the controller does not trust.
        ('another CA', 'ssl', (okey, ocert, lab.pki.controller_ca),
         'TLS handshake failed'),
        # h2's real key and certificate, claiming to be h1.
        ("h2's certificate", 'ssl', (h2key, h2cert, lab.pki.controller_ca),
         'is not derived from a name its certificate holds (h2)'),
    ]
    for what, scheme, creds, why in attacks:
        vm = rogue_mod.claim(rogue, victim, vnic, mac,
                             rogue_mod.controller_target(lab, scheme), creds)
        wait_until(lambda: _refused(api, rogue, why), 20,
                   what='the controller refusing the rogue (%s)' % what)
        vm.tool('rarp', 'rg0')            # a frame from the victim's vNIC
        time.sleep(1.5)
        # Nothing of ours reached the rogue; h1 is still h1.
        assert _our_flows(rogue) == [], what
        h1 = _host(api, 'h1')
        assert (h1['dpid'], h1['switch_address'], h1['certificate']) == (
            h1_before['dpid'], victim.mgmt_ip, ['h1']), what
        assert h1['connected'] and h1['synced'], what
        wire = api.wire(w['id'])
        assert (wire['host_a'], wire['state'], wire['moving']) == (
            'h1', 'tunnelled', {}), (what, wire)
        assert not [m for m in api.ok('GET', '/v1/migrations')['migrations']
                    if vnic in m.get('vnics', [])], what
        assert [h['name'] for h in api.ok('GET', '/v1/hosts')['hosts']] == \
            ['h1', 'h2', 'h3'], what
    # The stream ran through every attack and lost nothing.
    sent, got, missing, dups = stream.stop()
    assert (got, missing, dups) == (sent, 0, 0), (sent, got, missing, dups)

    # h1's switch still takes changes: a new wire through it works.
    va2, vb2, _w2 = pair('h1', 'h2', '192.0.2.5/24', '192.0.2.6/24')
    assert va2.ping('192.0.2.6', count=3)[1] == 3


def _takeovers_refused(api, host):
    m = re.search(r'^virtualwire_switch_takeovers_refused_total'
                  r'\{host="%s"\} (\S+)$' % host,
                  api.req('GET', '/metrics').text, re.M)
    return float(m.group(1)) if m else 0.0


def test_a_stolen_key_cannot_flap_its_hosts_session(lab, api, pair, rogue,
                                                    streams):
    """A machine with h1's own key and certificate (stolen) claims h1 from
    another address and retries every second, as OVS does. h1's session
    is never handed over (its connection time does not change), every
    attempt alarms (status, metric), the impostor gets no flow, and a
    1 kHz stream over h1's wire loses nothing."""
    va, vb, w = pair('h1', 'h3', '192.0.2.9/24', '192.0.2.10/24')
    victim = lab.host('h1')
    vnic = next(iter(va.nics))
    before = _host(api, 'h1')
    refused0 = _takeovers_refused(api, 'h1')
    stream = streams(va, vb, '192.0.2.10', 6202)
    key, cert = lab.pki.files('h1')
    rogue_mod.claim(rogue, victim, vnic, va.nics[vnic]['mac'],
                    rogue_mod.controller_target(lab, 'ssl'),
                    (key, cert, lab.pki.controller_ca))
    try:
        for n in (1, 2, 3):
            # Each attempt, without waiting out OVS's growing back-off.
            wait_until(lambda: _takeovers_refused(api, 'h1') >=
                       refused0 + n, 15, what='refused takeover %d' % n)
            rogue.appctl('bridge/reconnect', 'br-int')
        assert stream.running(), 'the stream ended before the attack did'
        why = _refused(api, rogue, 'key in two places')
        assert why and why[-1]['kind'] == 'switch takeover', _refusals(api)
        assert _our_flows(rogue) == []
        h1 = _host(api, 'h1')
        assert (h1['connected_at'], h1['switch_address']) == (
            before['connected_at'], victim.mgmt_ip), (before, h1)
    finally:
        rogue.vsctl('del-controller', 'br-int')
    sent, got, missing, dups = stream.stop()
    assert (got, missing, dups) == (sent, 0, 0), (sent, got, missing, dups)
    assert _host(api, 'h1')['connected_at'] == before['connected_at']


def test_a_revoked_certificate_is_cut_within_a_second_and_refused_after(
        lab, api, pair, streams):
    """`vwctl hosts revoke h3 --certificate SHA256` while h3 is connected
    and a 1 kHz stream crosses h1 > h2: h3's session is hung up within a
    second, its switch's reconnections with that certificate are refused,
    the stream loses nothing; a certificate issued after lets h3 back."""
    va, vb, w = pair('h1', 'h2', '192.0.2.13/24', '192.0.2.14/24')
    h3 = lab.host('h3')
    fp = _host(api, 'h3')['certificate_sha256']
    assert fp and len(fp) == 64
    stream = streams(va, vb, '192.0.2.14', 6203)
    read = lab.collector_get('/v1/status')['switches']
    time.sleep(1.0)
    try:
        _revoke_h3_and_back(lab, api, pair, stream, h3, fp, read)
    finally:
        # Whatever failed, h3 is readmitted: a host left revoked fails
        # every later test that wires through it.
        _readmit(lab, api, h3)


def _readmit(lab, api, h3):
    """h3 connected and synced; if it is not, a new certificate (vw-pki
    dates it now, after any revocation) and its switch reconnected."""
    if _host(api, 'h3')['connected'] and _host(api, 'h3')['synced']:
        return
    time.sleep(1.1)
    lab.pki.issue('h3')
    h3.appctl('bridge/reconnect', 'br-int')
    wait_until(lambda: _host(api, 'h3')['connected'] and
               _host(api, 'h3')['synced'], 30, what='h3 back with a new '
               'certificate')


def _revoke_h3_and_back(lab, api, pair, stream, h3, fp, read):
    from vwtest.migration import vwctl
    t0 = time.time()
    p = vwctl(lab, '--json', 'hosts', 'revoke', 'h3', '--certificate', fp,
              '--reason', 'lab: key leaked')
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)['digest'] == 'sha256:' + fp

    def hung_up():
        return [r for r in _refusals(api) if r['at'] >= t0 and
                'hung up' in r['why'] and 'was revoked' in r['why']]
    wait_until(hung_up, 5, what='h3 hung up')
    assert hung_up()[0]['at'] - t0 < 1.0, (hung_up(), t0)
    assert not _host(api, 'h3')['connected']
    # The collector too: it reads h3's switch no more.
    cut = wait_until(lambda: [r for r in lab.collector_get('/v1/status')[
        'recent_refusals'] if r['at'] >= t0 and 'was revoked' in r['why']],
        5, what='the collector hanging up h3')
    assert cut[0]['at'] - t0 < 1.5, (cut, t0)
    # Its switch keeps trying with the revoked certificate: refused.
    wait_until(lambda: [r for r in _refusals(api) if r['at'] > t0 and
                        r['peer'].startswith(h3.mgmt_ip + ':') and
                        'hung up' not in r['why'] and
                        'was revoked' in r['why']], 15,
               what="h3's reconnection refused")
    assert not _host(api, 'h3')['connected']
    assert [e['kind'] for e in json.loads(vwctl(
        lab, '--json', 'hosts', 'revoked').stdout)['revocations']
            if e['name'] == 'h3'] == ['certificate']
    # A new certificate (vw-pki dates it now, after the revocation).
    _readmit(lab, api, h3)
    assert _host(api, 'h3')['certificate_sha256'] != fp
    wait_until(lambda: lab.collector_get('/v1/status')['switches'] == read,
               30, what='the collector reading h3 again')
    sent, got, missing, dups = stream.stop()
    assert (got, missing, dups) == (sent, 0, 0), (sent, got, missing, dups)
    va3, vb3, _ = pair('h1', 'h3', '192.0.2.15/24', '192.0.2.16/24')
    assert va3.ping('192.0.2.16', count=3)[1] == 3


def _ovsdb_client(ns, remote, creds=None, timeout=8):
    cmd = ['ovsdb-client', '--timeout=%d' % timeout]
    if creds:
        cmd += ['--private-key=' + creds[0], '--certificate=' + creds[1],
                '--ca-cert=' + creds[2]]
    cmd += ['list-dbs', remote]
    p = subprocess.run(['ip', 'netns', 'exec', ns] + cmd,
                       capture_output=True, text=True, timeout=timeout + 5)
    return p.returncode, (p.stdout + p.stderr).strip()


def _guard_resets(host):
    """Connections the host's OVSDB guard turned away (its nft counter)."""
    out = sh(['nft', 'list', 'table', 'inet', 'virtualwire_ovsdb'],
             ns=host.ns)
    return int(re.search(r'counter packets (\d+)', out).group(1))


def test_a_hosts_ovsdb_answers_only_the_controllers(lab, api, rogue,
                                                    tmp_path):
    """Host OVSDB is pssl: and trusts only the controller CA: another
    host's key (a compromised hypervisor), another CA's certificate and
    plain TCP all fail. That CA also signs the collector, whose key would
    open every host's OVSDB (ovsdb-server and ovs-vswitchd share one CA,
    and the switch must accept the collector): vw-host-setup's guard lets
    only the controllers' address reach it, so the collector's key, even
    the controller's, from any other machine opens nothing; the
    controller itself still manages h1."""
    h1 = lab.host('h1')
    target = 'ssl:%s:6640' % h1.mgmt_ip
    other = LabPki(str(tmp_path / 'other-ca')).init()
    okey, ocert = other.issue('controller', role='controller')
    h2key, h2cert = lab.pki.files('h2')
    ckey, ccert = lab.pki.files('controller')
    colkey, colcert = lab.pki.files('collector')
    ca = lab.pki.host_ca
    before = _guard_resets(h1)
    for what, remote, creds in (
            ('plain TCP', 'tcp:%s:6640' % h1.mgmt_ip, None),
            ("h2's certificate", target, (h2key, h2cert, ca)),
            ('another CA', target, (okey, ocert, ca)),
            ("the collector's certificate", target, (colkey, colcert, ca)),
            ("the controller's certificate", target, (ckey, ccert, ca))):
        rc, out = _ovsdb_client(rogue.ns, remote, creds)
        assert rc != 0 and 'Open_vSwitch' not in out, (what, out)
    assert _guard_resets(h1) >= before + 5
    # The guard is what stops the collector's key: without it, that key
    # opens h1's OVSDB from the rogue machine (and could rewrite h1's
    # switch); with it back, from the file the boot unit loads, it does not.
    sh(['nft', 'delete', 'table', 'inet', 'virtualwire_ovsdb'], ns=h1.ns)
    try:
        rc, out = _ovsdb_client(rogue.ns, target, (colkey, colcert, ca))
        assert rc == 0 and 'Open_vSwitch' in out, out
    finally:
        sh(['nft', '-f', os.path.join(h1.dir, 'ovsdb-guard.nft')], ns=h1.ns)
    rc, out = _ovsdb_client(rogue.ns, target, (colkey, colcert, ca))
    assert rc != 0 and 'Open_vSwitch' not in out, out
    # From the controllers' address, the controller's certificate reads it,
    # and the controller's own session to h1's OVSDB never stopped.
    rc, out = _ovsdb_client(lab.mgmt_ns, target, (ckey, ccert, ca))
    assert rc == 0 and 'Open_vSwitch' in out, out
    h = {x['name']: x for x in api.ok('GET', '/v1/hosts')['hosts']}['h1']
    assert h['connected'] and h['synced'], h


def test_openflow_refuses_a_peer_without_a_host_certificate(lab, api,
                                                            rogue):
    """The controller's OpenFlow port completes no TLS handshake without
    a client certificate the host CA signed (the controller's own
    certificate, from the other CA, is not one), and says so."""
    ckey, ccert = lab.pki.files('controller')

    def failed():
        return api.ok('GET', '/v1/status')['counters'][
            'tls_handshakes_failed']
    for what, extra in (('no certificate', []),
                        ("the controller CA's certificate",
                         ['-cert', ccert, '-key', ckey])):
        before = failed()
        p = subprocess.run(
            ['ip', 'netns', 'exec', rogue.ns, 'openssl', 's_client',
             '-connect', '%s:%d' % (CONTROLLER_IP, lab.of_port),
             '-CAfile', lab.pki.controller_ca] + extra,
            input='', capture_output=True, text=True, timeout=20)
        # The server's certificate verifies (the client trusts that CA),
        # then the server turns the client away.
        assert 'Verify return code: 0 (ok)' in p.stdout, (what, p.stdout)
        wait_until(lambda: failed() > before, 10,
                   what='the controller counting the refusal of %s' % what)
        assert _refused(api, rogue, 'TLS handshake failed'), what


def _fingerprint_pem(pem):
    der = ssl.PEM_cert_to_DER_cert(pem)
    return hashlib.sha256(der).hexdigest()


def _openflow_server_cert(lab, host):
    """The certificate the controller's OpenFlow port shows now (asked
    from `host`'s namespace with its own certificate, as its switch)."""
    key, cert = lab.pki.files(host.name)
    p = subprocess.run(
        ['ip', 'netns', 'exec', host.ns, 'openssl', 's_client', '-connect',
         '%s:%d' % (CONTROLLER_IP, lab.of_port), '-cert', cert, '-key', key,
         '-CAfile', lab.pki.controller_ca], input='', capture_output=True,
        # After the handshake the controller's OpenFlow HELLO (binary)
        # may reach s_client's output too.
        text=True, errors='replace', timeout=20)
    m = re.search(r'-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----',
                  p.stdout, re.S)
    assert m, p.stdout + p.stderr
    return _fingerprint_pem(m.group(0))


def test_certificates_rotate_without_a_restart(lab, api, pair):
    """vw-pki re-issues the controller's and h1's certificates in place;
    the same controller process shows the new one on REST and OpenFlow,
    and h1's switch, reconnecting with its new one, is admitted as h1."""
    va, vb, w = pair('h1', 'h2')
    pid = lab.controller.pid
    h1 = lab.host('h1')

    def rest_cert():
        return _fingerprint_pem(ssl.get_server_certificate(
            ('127.0.0.1', lab.rest_port)))
    with open(lab.pki.files('controller')[1]) as f:
        old = _fingerprint_pem(f.read())
    assert rest_cert() == old and _openflow_server_cert(lab, h1) == old
    lab.pki.issue('controller', role='controller',
                  ips=[CONTROLLER_IP, '127.0.0.1'])
    lab.pki.issue('h1')
    with open(lab.pki.files('controller')[1]) as f:
        new = _fingerprint_pem(f.read())
    assert new != old
    wait_until(lambda: rest_cert() == new, 15, what='REST showing the new '
               'certificate')
    assert _openflow_server_cert(lab, h1) == new
    # h1's switch reconnects with its new certificate (and checks the
    # controller's new one against the controller CA): still h1.
    targets = h1.controller_targets()
    h1.vsctl('del-controller', 'br-int')
    try:
        wait_until(lambda: not _host(api, 'h1')['connected'], 15,
                   what='h1 disconnected')
    finally:
        # Back even if that failed: later tests wire through h1.
        h1.set_controllers(targets)
    wait_until(api.synced, 30, what='h1 back with its new certificate')
    assert _host(api, 'h1')['certificate'] == ['h1']
    assert lab.controller.pid == pid and lab.controller.poll() is None
    assert va.ping('192.0.2.2', count=3)[1] == 3
