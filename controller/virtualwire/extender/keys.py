"""An extender's identity: a WireGuard key pair made on the extender itself
(the private key never leaves it); the public key is what peers pin."""
import os
import subprocess


def ensure_identity(state_dir: str):
    """(private key file, public key), made once."""
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    key = os.path.join(state_dir, 'wg.key')
    if not os.path.exists(key):
        make_key(key)
    return key, public_key(key)


def make_key(path: str):
    """A new private key in `path` (also how a key is rotated); the file
    is replaced whole, never seen half-written."""
    priv = subprocess.run(['wg', 'genkey'], check=True, capture_output=True,
                          text=True).stdout
    fd = os.open(path + '.new', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, 'w') as f:
        f.write(priv)
    os.replace(path + '.new', path)


def public_key(path: str) -> str:
    with open(path) as f:
        return subprocess.run(['wg', 'pubkey'], stdin=f, check=True,
                              capture_output=True, text=True).stdout.strip()
