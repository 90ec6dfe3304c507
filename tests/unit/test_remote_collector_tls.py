"""The controller's client of the collector process makes its TLS
context once per CA file, never per connection: a default context loads
the system's certificates, and making one per long poll held the whole
controller (every green thread) 200-370 ms each time on the lab."""
import ssl
import urllib.parse

from virtualwire.metrics import remote
from vwlab.pki import LabPki


def test_connections_share_one_context_and_never_load_the_system_store(
        tmp_path, monkeypatch):
    ca = LabPki(str(tmp_path)).init().controller_ca
    loads = []
    real = ssl.SSLContext.load_default_certs

    def counted(self, *a, **kw):
        loads.append(1)
        return real(self, *a, **kw)

    monkeypatch.setattr(ssl.SSLContext, 'load_default_certs', counted)
    remote._context.cache_clear()
    u = urllib.parse.urlsplit('https://127.0.0.1:7443')
    first = remote._connection(u, ca, 5)
    second = remote._connection(u, ca, 5)
    assert loads == []
    assert first._context is second._context
    assert first._context.verify_mode == ssl.CERT_REQUIRED
    assert first._context.check_hostname
