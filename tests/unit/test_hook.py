"""The libvirt hook as libvirt runs it (a process, XML on stdin): it reads
the vNICs, and when the controller cannot be reached it follows the
configured policy and says so."""
import os
import subprocess
import sys

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


def run(tmp_path, policy, *args, xml=XML):
    tok = tmp_path / 'token'
    tok.write_text('t\n')
    conf = tmp_path / 'vw.conf'
    conf.write_text('[controller]\nurl = http://127.0.0.1:%d\n'
                    'token_file = %s\nhost = h2\ntimeout = 1\n'
                    'on_unreachable = %s\n' % (free_port(), tok, policy))
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
