"""The lab's deployment CAs (vw-pki, as an operator runs it):
one pair per lab (the controller CA, the host CA), a certificate for the
controller and one per host naming it.
A lab made with `tls=False` has none and runs the controller with
--insecure-plaintext-lab."""
import os

from vwlab.shell import REPO, sh

VW_PKI = os.path.join(REPO, 'controller', 'virtualwire', 'host', 'vw-pki')

# ovsdb-server takes its key, certificate and CA from its own database,
# where `ovs-vsctl set-ssl` (vw-host-setup) puts them, as Debian's ovs-ctl
# starts it.
OVSDB_SERVER_SSL = ['--private-key=db:Open_vSwitch,SSL,private_key',
                    '--certificate=db:Open_vSwitch,SSL,certificate',
                    '--ca-cert=db:Open_vSwitch,SSL,ca_cert']


class LabPki:
    def __init__(self, directory):
        self.dir = directory

    @property
    def host_ca(self):
        """What the controller trusts (hosts' certificates)."""
        return os.path.join(self.dir, 'host-ca.pem')

    @property
    def controller_ca(self):
        """What hosts (and API clients) trust: controllers' certificates."""
        return os.path.join(self.dir, 'controller-ca.pem')

    def init(self):
        sh([VW_PKI, 'init', self.dir])
        return self

    def issue(self, name, dns=(), ips=(), out=None, role='host', days=None):
        """(key, cert) paths of a new certificate naming `name` (and
        `dns`), reachable at `ips`, signed by the `role`'s CA, valid for
        `days` (default: vw-pki's)."""
        cmd = [VW_PKI, 'issue', self.dir, name, '--role', role]
        if days is not None:
            cmd += ['--days', str(days)]
        for d in dns:
            cmd += ['--dns', d]
        for a in ips:
            cmd += ['--ip', a]
        if out:
            cmd += ['--out', out]
        sh(cmd)
        prefix = out or os.path.join(self.dir, name)
        return prefix + '-key.pem', prefix + '-cert.pem'

    def files(self, name):
        prefix = os.path.join(self.dir, name)
        return prefix + '-key.pem', prefix + '-cert.pem'

    def host_setup_args(self, name):
        key, cert = self.files(name)
        if not os.path.exists(cert):
            key, cert = self.issue(name)
        return ['--ssl-key', key, '--ssl-cert', cert,
                '--ssl-ca', self.controller_ca]
