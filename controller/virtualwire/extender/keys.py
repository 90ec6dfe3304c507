"""An extender's identity: a key pair and a self-signed certificate made on
the extender itself (the private key never leaves it), and the
certificate's SHA-256 fingerprint, which is what peers pin."""
import os
import subprocess


def ensure_identity(state_dir: str, name: str):
    """(cert path, key path, fingerprint 'AB:CD:...'), made once."""
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    cert = os.path.join(state_dir, 'link.crt')
    key = os.path.join(state_dir, 'link.key')
    if not (os.path.exists(cert) and os.path.exists(key)):
        make_identity(cert, key, name)
    return cert, key, fingerprint(cert)


def make_identity(cert: str, key: str, name: str):
    """A new P-256 key and certificate (also how a key is rotated)."""
    old = os.umask(0o077)
    try:
        subprocess.run(
            ['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt',
             'ec_paramgen_curve:prime256v1', '-nodes', '-days', '3650',
             '-subj', '/CN=%s' % name, '-keyout', key + '.new',
             '-out', cert + '.new'], check=True, capture_output=True)
    finally:
        os.umask(old)
    os.replace(key + '.new', key)
    os.replace(cert + '.new', cert)


def fingerprint(cert: str) -> str:
    out = subprocess.run(['openssl', 'x509', '-in', cert, '-noout',
                          '-fingerprint', '-sha256'], check=True,
                         capture_output=True, text=True).stdout
    return out.strip().split('=', 1)[1].upper()
