"""A namespace VM reported to the controller as libvirt's hook reports a
guest: the same hook script (`migration_hooks/qemu NAME started begin -`),
fed the domain XML libvirt would give it, run in the host's namespace
with the host's hook configuration. A topology file can then name the VM
and its NICs (by name, ethN, alias or MAC) exactly as for a real guest.
"""
import os
import subprocess
import sys
from xml.sax.saxutils import escape, quoteattr

from vwlab.libvirt_host import HOOK
from vwlab.shell import LabError


def domain_xml(vm):
    """What libvirt would hand its hook for this VM: its name, UUID, and
    each NIC in order, with interfaceid, MAC and a user alias ua-IFNAME."""
    itfs = ''.join(
        "    <interface type='bridge'>\n"
        "      <mac address=%s/>\n"
        "      <source bridge='br-int'/>\n"
        "      <virtualport type='openvswitch'>\n"
        "        <parameters interfaceid=%s/>\n"
        "      </virtualport>\n"
        "      <alias name=%s/>\n"
        "    </interface>\n" % (quoteattr(info['mac']), quoteattr(vnic),
                                quoteattr(info.get('alias') or
                                          'ua-' + info['ifname']))
        for vnic, info in sorted(vm.nics.items(),
                                 key=lambda kv: int(kv[1]['ifname'][3:])))
    return ("<domain type='qemu'>\n  <name>%s</name>\n  <uuid>%s</uuid>\n"
            "  <devices>\n%s  </devices>\n</domain>\n"
            % (escape(vm.name), escape(vm.uuid), itfs))


def hook_config(host):
    """The host's hook configuration (as `libvirt_host.install_hook`
    writes it for a libvirt host), written once."""
    lab = host.lab
    path = os.path.join(host.dir, 'hook.conf')
    with open(path, 'w') as f:
        f.write('[controller]\nurl = %s\ntoken_file = %s\nhost = %s\n'
                'timeout = 5\n%s' % (
                    lab.southbound_urls(), lab.token_file, host.name,
                    'ca_cert = %s\n' % lab.pki.controller_ca if lab.pki
                    else 'insecure_plaintext_lab = yes\n'))
    return path


def report(host, vm):
    """Run the hook for `vm` on `host`; LabError with its stderr if the
    controller did not take the report."""
    env = {'PATH': os.environ.get('PATH', ''), 'HOME': '/root',
           'LC_ALL': 'C', 'VW_HOOK_CONFIG': hook_config(host)}
    p = subprocess.run(['ip', 'netns', 'exec', host.ns, sys.executable, HOOK,
                        vm.name, 'started', 'begin', '-'],
                       input=domain_xml(vm), capture_output=True, text=True,
                       env=env, timeout=30)
    if p.returncode != 0 or p.stderr.strip():
        raise LabError('reporting VM %s on %s failed: %s'
                       % (vm.name, host.name, p.stderr.strip()))
