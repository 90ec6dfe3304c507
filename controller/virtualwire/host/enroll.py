"""`vw-host-setup enroll`: this host's key is made here and stays here;
the controller gets a certificate request and answers with a certificate
from the host CA, at once for a one-time join token the operator issued
for this name, else once the operator approves (`vwctl hosts approve`).

The controller is reached over HTTPS with its CA pinned (--ca-cert): a
machine in the middle can neither read the join token nor hand this host
a certificate of its own making. Polling resumes across runs (the poll
secret is kept beside the key, readable by root only), so a host that
was rebooted while waiting does not ask twice."""
import argparse
import json
import os
import sys
import time
import urllib.error

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from virtualwire.core import enrolment, errors
from virtualwire.extender.network_io import ControllerClient


class EnrolError(Exception):
    pass


def _write(path, data, mode):
    tmp = path + '.new'
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, 'w') as f:
        f.write(data)
    os.replace(tmp, path)       # no reader sees half a file


def _install(cert_path, key_path, pem):
    """The new certificate, then the key touched (same bytes, new mtime):
    Open vSwitch 3.1 re-reads its SSL pair only when *both* files changed
    since it last read them (measured: with the certificate alone
    replaced, `bridge/reconnect` presented the old one). Certificate
    first, so whichever moment it looks, it never takes the key's new
    time without the certificate's."""
    _write(cert_path, pem, 0o644)
    os.utime(key_path)


def key_and_csr(key_path, name):
    """The host's key (made now, mode 0600, if there is none) and a CSR
    for `name` on it."""
    if os.path.exists(key_path):
        with open(key_path, 'rb') as f:
            key = serialization.load_pem_private_key(f.read(), None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise EnrolError('%s is not an EC key' % key_path)
    else:
        key = ec.generate_private_key(ec.SECP256R1())
        _write(key_path, key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()).decode(), 0o600)
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, 'VirtualWire'),
        x509.NameAttribute(NameOID.COMMON_NAME, name)])).sign(
            key, hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.PEM).decode()


def _post(ctl, path, body):
    """The controller's JSON answer; EnrolError with its message."""
    try:
        return ctl.post(path, body)
    except urllib.error.HTTPError as e:
        try:
            msg = json.loads(e.read())['error']['message']
        except (ValueError, KeyError, TypeError):
            msg = e.reason
        raise EnrolError('%s (HTTP %d)' % (msg, e.code))
    except (urllib.error.URLError, OSError) as e:
        raise EnrolError('no controller answered: %s' % e)


def enroll(args, out=sys.stderr):
    enrolment.check_name(args.name)
    os.makedirs(args.dir, exist_ok=True)
    prefix = os.path.join(args.dir, args.name)
    key_path, cert_path = prefix + '-key.pem', prefix + '-cert.pem'
    state_path = prefix + '-enrol.json'
    csr = key_and_csr(key_path, args.name)
    fp = enrolment.fingerprint(enrolment.load_csr(csr))
    # The agents' client: every instance in turn, the controller CA pinned.
    ctl = ControllerClient(args.controller_url, None, args.ca_cert)
    token = None
    if args.join_token_file:
        with open(args.join_token_file) as f:
            token = f.read().strip()
    secret = None
    if os.path.exists(state_path) and not token:
        with open(state_path) as f:
            secret = json.load(f).get('poll_secret')
    if secret is None:
        body = {'name': args.name, 'csr': csr}
        if token:
            body['join_token'] = token
        doc = _post(ctl, '/v1/enrolments', body)
        if doc['state'] == 'approved':
            _install(cert_path, key_path, doc['certificate'])
            print('vw-host-setup: %s enrolled with its join token; '
                  'certificate %s (key %s)' % (args.name, cert_path, fp),
                  file=out)
            return 0
        secret = doc['poll_secret']
        _write(state_path, json.dumps({'poll_secret': secret}), 0o600)
    print('vw-host-setup: %s awaits approval: on the controller, check the '
          'key fingerprint %s in `vwctl hosts pending`, then `vwctl hosts '
          'approve %s`' % (args.name, fp, args.name), file=out)
    deadline = time.monotonic() + args.wait
    while True:
        doc = _post(ctl, '/v1/enrolments/%s/poll' % args.name,
                    {'poll_secret': secret})
        if doc['state'] == 'approved' and doc.get('certificate'):
            _install(cert_path, key_path, doc['certificate'])
            os.unlink(state_path)
            print('vw-host-setup: %s approved; certificate %s'
                  % (args.name, cert_path), file=out)
            return 0
        if time.monotonic() >= deadline:
            print('vw-host-setup: %s still awaits approval (run enroll '
                  'again to go on waiting)' % args.name, file=out)
            return 3
        time.sleep(args.interval)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog='vw-host-setup enroll',
        description="Make this host's key here and get its certificate "
                    'from the controller (join token or approval).')
    p.add_argument('--name', required=True, help="this host's name")
    p.add_argument('--controller-url', required=True, metavar='URL[,URL]',
                   help="the controllers' southbound REST, "
                        'https://IP:PORT')
    p.add_argument('--ca-cert', required=True, metavar='PEM',
                   help='the controller CA (controller-ca.pem), pinned')
    p.add_argument('--dir', default='/etc/virtualwire/pki',
                   help='where NAME-key.pem and NAME-cert.pem go '
                        '(default: %(default)s)')
    p.add_argument('--join-token-file', metavar='FILE',
                   help='the one-time join token (`vwctl hosts join-token '
                        'NAME`); without it, wait for approval')
    p.add_argument('--wait', type=float, default=600.0, metavar='SECONDS',
                   help='how long to wait for approval (default: '
                        '%(default)s)')
    p.add_argument('--interval', type=float, default=2.0,
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.controller_url.startswith('https://'):
        p.error('--controller-url must be https:// (the join token and '
                'the certificate must not cross the network in clear)')
    try:
        return enroll(args)
    except (EnrolError, errors.VwError, OSError, ValueError) as e:
        print('vw-host-setup enroll: %s' % e, file=sys.stderr)
        return 1
