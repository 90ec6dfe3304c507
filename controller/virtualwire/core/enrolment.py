"""Enrolment: a host makes its key, sends a certificate request (CSR),
and gets a certificate from the host CA, the key never leaving it. Pure:
PEM in, PEM out (the `cryptography` library does the X.509).

What signing protects against: the certificate names the host only by
the name the request was approved or the join token issued for. Every
other name and extension a CSR asks for is ignored, so an enrolling host
cannot ask for another host's name (or a wildcard) and be admitted as it
(`virtualwire.tls` admits a switch as the names its certificate carries).
What it does not: a request awaiting approval could come from anyone
who reaches the controller; the operator compares the fingerprint the
host printed with the one `vwctl hosts pending` shows before approving.
"""
import datetime
import hashlib
import re
import secrets

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from virtualwire.core.errors import Invalid

NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$')   # as vw-pki
MAX_CSR = 8192
DAYS = 825                # as vw-pki issue
TOKEN_TTL_MAX = 7 * 24 * 3600
WARN_DAYS = 30            # `vwctl hosts` and the metric warn this early


def check_name(name):
    if not isinstance(name, str) or not NAME.match(name):
        raise Invalid("a host name is letters, digits, '.', '_' and "
                           "'-', up to 64, starting with a letter or "
                           'digit: %r' % (name,))
    return name


def new_secret():
    return secrets.token_urlsafe(32)


def digest(secret):
    return hashlib.sha256(secret.encode()).hexdigest()


def load_csr(pem):
    """The CSR, checked: PEM, self-signed by its key, EC P-256 or RSA
    >= 2048. InvalidInput otherwise."""
    if not isinstance(pem, str) or len(pem) > MAX_CSR:
        raise Invalid('csr must be a PEM certificate request of at '
                           'most %d characters' % MAX_CSR)
    try:
        csr = x509.load_pem_x509_csr(pem.encode())
    except ValueError as e:
        raise Invalid('csr is not a PEM certificate request: %s' % e)
    if not csr.is_signature_valid:
        raise Invalid("csr's signature does not match its key")
    key = csr.public_key()
    if isinstance(key, ec.EllipticCurvePublicKey):
        if key.curve.name not in ('secp256r1', 'secp384r1'):
            raise Invalid('csr key: EC P-256 or P-384, not %s'
                               % key.curve.name)
    elif getattr(key, 'key_size', 0) < 2048:
        raise Invalid('csr key: EC P-256/P-384 or RSA of 2048 bits '
                           'or more')
    return csr


def fingerprint(csr):
    """SHA-256 of the request's public key (DER), as colon-separated
    hex: what the host prints and the operator compares."""
    der = csr.public_key().public_bytes(
        serialization.Encoding.DER,
        serialization.PublicFormat.SubjectPublicKeyInfo)
    h = hashlib.sha256(der).hexdigest()
    return ':'.join(h[i:i + 2] for i in range(0, 16, 2))


def sign(csr, name, ca_cert_pem, ca_key_pem, now=None, days=DAYS,
         not_before_floor=None):
    """A host certificate for `name` (CN and the only DNS name) on the
    CSR's key, from the host CA. The CSR's own subject and extensions
    are not copied."""
    check_name(name)
    ca = x509.load_pem_x509_certificate(ca_cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca_key_pem.encode(), None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise Invalid('the host CA key must be an EC key (vw-pki init)')
    now = now or datetime.datetime.now(datetime.timezone.utc)
    # Five minutes back for clocks behind ours; never before the host's
    # last revocation (core.revocation), which refuses what started then.
    start = now - datetime.timedelta(minutes=5)
    if not_before_floor is not None:
        start = max(start, datetime.datetime.fromtimestamp(
            int(not_before_floor) + 1, datetime.timezone.utc))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, 'VirtualWire'),
                x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca.subject)
            .public_key(csr.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(
                [x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                           critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_encipherment=True,
                content_commitment=False, data_encipherment=False,
                key_agreement=False, key_cert_sign=False, crl_sign=False,
                encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH,
                 ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def not_after(cert_pem):
    """A certificate's expiry (aware datetime)."""
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    return cert.not_valid_after_utc
