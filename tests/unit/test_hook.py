"""The libvirt hook as libvirt runs it (a process, XML on stdin): it reads
the vNICs, and when the controller cannot be reached it follows the
configured policy and says so."""
import os
import re
import socket
import ssl
import subprocess
import sys
import threading
import time

from vwlab.pki import LabPki
from vwlab.shell import free_port

HOOK = os.path.join(os.path.dirname(__file__), '..', '..', 'migration_hooks',
                    'qemu')
XML = """<domain type='qemu'><name>g1</name>
<uuid>0b7c0d5e-2f77-4a57-9e63-0f6a8e0f3b11</uuid><devices>
<interface type='bridge'><virtualport type='openvswitch'>
<parameters interfaceid='11111111-2222-3333-4444-555555555555'/>
</virtualport></interface>
<interface type='network'/>
</devices></domain>"""


def run(tmp_path, policy, *args, xml=XML, url=None, extra=''):
    tok = tmp_path / 'token'
    tok.write_text('t\n')
    conf = tmp_path / 'vw.conf'
    conf.write_text('[controller]\nurl = %s\n'
                    'token_file = %s\nhost = h2\ntimeout = 1\n'
                    'on_unreachable = %s\n%s' % (
                        url or 'https://127.0.0.1:%d' % free_port(), tok,
                        policy, extra))
    return subprocess.run([sys.executable, HOOK] + list(args), input=xml,
                          capture_output=True, text=True, timeout=20,
                          env={'PATH': os.environ['PATH'],
                               'VW_HOOK_CONFIG': str(conf)})


def test_reads_openvswitch_vnics_only():
    sys.path.insert(0, os.path.dirname(HOOK))
    import importlib.machinery
    mod = importlib.machinery.SourceFileLoader('vwhook', HOOK).load_module()
    assert mod.guest_from_xml(XML) == (
        'g1', '0b7c0d5e-2f77-4a57-9e63-0f6a8e0f3b11',
        ['11111111-2222-3333-4444-555555555555'])


def test_unreachable_controller_lets_migration_go_by_default(tmp_path):
    p = run(tmp_path, 'allow', 'g1', 'migrate', 'begin', '-')
    assert p.returncode == 0
    assert 'unreachable' in p.stderr and 'go ahead' in p.stderr
    assert p.stdout == ''          # stdout would replace the domain XML


def test_unreachable_controller_refuses_when_told(tmp_path):
    p = run(tmp_path, 'refuse', 'g1', 'migrate', 'begin', '-')
    assert p.returncode == 1
    assert 'refusing the migration' in p.stderr


def test_guests_on_other_bridges_are_not_ours():
    import importlib.machinery
    mod = importlib.machinery.SourceFileLoader('vwhook', HOOK).load_module()
    other = XML.replace("<virtualport", "<source bridge='br-ovn'/><virtualport")
    assert mod.guest_from_xml(other)[2] == []
    assert mod.guest_from_xml(other, 'br-ovn')[2] == [
        '11111111-2222-3333-4444-555555555555']


def test_a_guest_with_no_vnic_of_ours_is_not_reported(tmp_path):
    p = run(tmp_path, 'refuse', 'g1', 'migrate', 'begin', '-',
            xml=XML.replace("<virtualport", "<source bridge='br-ovn'/>"
                                            "<virtualport"))
    assert (p.returncode, p.stderr) == (0, '')


def test_other_operations_are_ignored(tmp_path):
    p = run(tmp_path, 'refuse', 'g1', 'start', 'begin', '-')
    assert (p.returncode, p.stderr) == (0, '')


def test_a_plain_http_url_gets_no_token_unless_the_lab_flag_says(tmp_path):
    server, got = _listener(tmp_path, None)
    url = 'http://127.0.0.1:%d' % server.getsockname()[1]
    p = run(tmp_path, 'refuse', 'g1', 'migrate', 'begin', '-', url=url)
    assert p.returncode == 1 and 'plain HTTP' in p.stderr
    time.sleep(0.3)
    assert got == []                       # never even connected


def test_the_token_goes_only_to_a_certificate_of_the_controller_ca(
        tmp_path):
    real = LabPki(str(tmp_path / 'real')).init()
    other = LabPki(str(tmp_path / 'other')).init()
    key, cert = other.issue('imposter', role='controller', ips=['127.0.0.1'])
    server, got = _listener(tmp_path, (key, cert))
    url = 'https://127.0.0.1:%d' % server.getsockname()[1]
    p = run(tmp_path, 'allow', 'g1', 'migrate', 'begin', '-', url=url,
            extra='ca_cert = %s\n' % real.controller_ca)
    assert p.returncode == 0 and 'certificate verify failed' in p.stderr
    time.sleep(0.3)
    assert not any(b'Bearer' in g for g in got), got
    # Control: trusting the CA that signed it, the hook does talk to it.
    p = run(tmp_path, 'allow', 'g1', 'migrate', 'begin', '-', url=url,
            extra='ca_cert = %s\n' % other.controller_ca)
    wait = time.time() + 5
    while time.time() < wait and not any(b'Bearer t' in g for g in got):
        time.sleep(0.05)
    assert any(b'Bearer t' in g for g in got)


def _request(conn):
    """One request, headers and body: a client may send them in two
    writes, and one recv() then returned the headers alone."""
    data = b''
    while b'\r\n\r\n' not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b'\r\n\r\n')
    m = re.search(rb'(?i)content-length: *(\d+)', head)
    while m and len(body) < int(m.group(1)):
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b'\r\n\r\n' + body


def _listener(tmp_path, tls):
    """A server that records what each connection sends (TLS with
    `tls` = (key, cert))."""
    srv = socket.socket()
    srv.bind(('127.0.0.1', 0))
    srv.listen(8)
    got = []
    ctx = None
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls[1], tls[0])

    def serve():
        while True:
            conn, _ = srv.accept()
            try:
                if ctx:
                    conn = ctx.wrap_socket(conn, server_side=True)
                conn.settimeout(2)
                got.append(_request(conn))
            except (OSError, ssl.SSLError):
                got.append(b'')
            finally:
                conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv, got


def test_interfaces_are_read_in_order_with_their_mac_and_alias():
    import importlib.machinery
    mod = importlib.machinery.SourceFileLoader('vwhook2', HOOK).load_module()
    xml = XML.replace("<interface type='bridge'>",
                      "<interface type='bridge'><mac address='52:54:00:AA:"
                      "00:01'/><alias name='ua-web'/>")
    assert mod.interfaces_from_xml(xml) == [
        {'index': 0, 'vnic': '11111111-2222-3333-4444-555555555555',
         'mac': '52:54:00:aa:00:01', 'alias': 'ua-web'},
        {'index': 1, 'vnic': '', 'mac': '', 'alias': ''}]


def test_a_started_guest_is_reported_and_never_fails_its_start(tmp_path):
    """started begin: PUT /v1/guests/UUID; the controller unreachable, the
    guest starts all the same (exit 0), saying so."""
    p = run(tmp_path, 'refuse', 'g1', 'started', 'begin', '-')
    assert p.returncode == 0
    assert 'unreachable' in p.stderr and 'letting started g1' in p.stderr


def test_the_hosts_hold_setting_goes_into_the_announcement(tmp_path):
    server, got = _listener(tmp_path, None)
    url = 'http://127.0.0.1:%d' % server.getsockname()[1]
    run(tmp_path, 'allow', 'g1', 'migrate', 'begin', '-', url=url,
        extra='insecure_plaintext_lab = yes\nhold = no\n')
    wait = time.time() + 5
    while time.time() < wait and not got:
        time.sleep(0.05)
    assert got and b'"hold": false' in got[0], got


def test_a_bad_hold_setting_is_said(tmp_path):
    # As any broken configuration: said, the controller not called, and
    # libvirt goes on (the controller follows the guest from OVSDB).
    p = run(tmp_path, 'refuse', 'g1', 'migrate', 'begin', '-',
            extra='hold = maybe\n')
    assert 'hold = maybe' in p.stderr and 'yes or no' in p.stderr
    assert 'not reported' in p.stderr, p.stderr
