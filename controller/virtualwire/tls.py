"""The controller's TLS material, in one place (OVN's `update_ssl_config()`
is the model): its key, its certificate and the deployment CA (made by
`vw-pki`). Every channel asks here for a context when it opens a
connection, and a context is rebuilt whenever one of the three files
changed, so certificates rotate without a restart: connections opened after
the new files are in place use them, open ones keep theirs.

`peer_names` is what admission checks: the names a verified peer
certificate carries (its CN and DNS subjectAltNames). It protects against a
peer that has no certificate from the deployment CA; it does not protect
against a peer that holds a stolen key (there is no revocation list yet:
re-issue the CA).
"""
import logging
import os
import ssl
import threading
from typing import FrozenSet, Optional

LOG = logging.getLogger(__name__)

# A TLS handshake that has not finished by then is dropped: a peer that
# connects and sends nothing must not hold a connection (or a green thread)
# for long.
HANDSHAKE_TIMEOUT = 10.0


class TlsFiles:
    def __init__(self, private_key, certificate, ca_cert):
        self.paths = (private_key, certificate, ca_cert)
        for p in self.paths:
            if not os.access(p, os.R_OK):
                raise ValueError('cannot read %s' % p)
        self._lock = threading.Lock()
        self._stamp: tuple = ()
        self._server: ssl.SSLContext
        self._https: ssl.SSLContext
        self._load()            # a bad file is an error at start, not later

    @property
    def private_key(self):
        return self.paths[0]

    @property
    def certificate(self):
        return self.paths[1]

    @property
    def ca_cert(self):
        return self.paths[2]

    def _stat(self):
        out = []
        for p in self.paths:
            st = os.stat(p)
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(out)

    def _load(self):
        stamp = self._stat()
        # OpenFlow: both sides prove who they are (the switch's names are
        # then checked against the host it claims, control.admission).
        server = _context(self.certificate, self.private_key)
        server.load_verify_locations(self.ca_cert)
        server.verify_mode = ssl.CERT_REQUIRED
        # REST: the server proves who it is; clients prove it with a
        # bearer token (API users have no certificates).
        https = _context(self.certificate, self.private_key)
        self._server, self._https, self._stamp = server, https, stamp

    def refresh(self):
        """Rebuild the contexts if a file changed. A half-written or broken
        set keeps the last good one (and says so)."""
        with self._lock:
            try:
                if self._stat() != self._stamp:
                    self._load()
                    LOG.info('TLS files changed: key, certificate and CA '
                             'reloaded (%s)', self.certificate)
            except (OSError, ssl.SSLError, ValueError) as e:
                LOG.error('TLS files changed but cannot be loaded (%s); '
                          'keeping the previous ones', e)

    def server_context(self) -> ssl.SSLContext:
        self.refresh()
        return self._server

    def https_context(self) -> ssl.SSLContext:
        """For REST: no client certificate asked."""
        self.refresh()
        return self._https


def _context(certificate, private_key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certificate, private_key)
    return ctx


def configure_ovs_streams(tls: TlsFiles):
    """The `ovs` library's SSL settings are process-wide paths, read at
    each connect (so a rotation in place needs nothing more): set them
    once, at start."""
    import ovs.stream
    ovs.stream.Stream.ssl_set_private_key_file(tls.private_key)
    ovs.stream.Stream.ssl_set_certificate_file(tls.certificate)
    ovs.stream.Stream.ssl_set_ca_cert_file(tls.ca_cert)


class Identity(frozenset):
    """The names of a verified certificate (a frozenset: what admission
    compares), with what revocation needs: the certificate's SHA-256
    fingerprint (hex) and when it became valid (Unix time)."""
    fingerprint: Optional[str] = None
    not_before: Optional[float] = None

    @classmethod
    def of(cls, names, fingerprint=None, not_before=None):
        out = cls(names)
        out.fingerprint, out.not_before = fingerprint, not_before
        return out


def peer_names(sock) -> Optional[FrozenSet[str]]:
    """The names of a verified peer's certificate (CN and DNS
    subjectAltNames) as an `Identity`, or None when the socket is not TLS
    (or carries no verified certificate)."""
    getpeercert = getattr(sock, 'getpeercert', None)
    if getpeercert is None:
        return None
    try:
        cert = getpeercert()
        der = getpeercert(binary_form=True) if cert else None
    except (ValueError, OSError):
        return None
    if not cert:
        return None
    import hashlib
    try:
        nb = float(ssl.cert_time_to_seconds(cert['notBefore']))
    except (KeyError, ValueError):
        nb = None
    return Identity.of(names_of(cert), hashlib.sha256(der).hexdigest()
                       if der else None, nb)


def peer_expiry(sock) -> Optional[float]:
    """When a verified peer's certificate expires (Unix time), or None
    (not TLS, no verified certificate)."""
    getpeercert = getattr(sock, 'getpeercert', None)
    if getpeercert is None:
        return None
    try:
        cert = getpeercert()
        return float(ssl.cert_time_to_seconds(cert['notAfter'])) \
            if cert and cert.get('notAfter') else None
    except (ValueError, OSError, KeyError):
        return None


def names_of(cert) -> FrozenSet[str]:
    """Names in a certificate as `ssl.SSLSocket.getpeercert()` gives it."""
    names = set()
    for rdn in cert.get('subject', ()):
        for key, value in rdn:
            if key == 'commonName':
                names.add(value)
    for kind, value in cert.get('subjectAltName', ()):
        if kind == 'DNS':
            names.add(value)
    return frozenset(names)
