"""The OpenFlow listener: os-ken's OFPHandler (hello, features, echo: the
`ofp_event` app) with our own accept loop, so that

- a TLS handshake takes a context from `tls.TlsFiles` per connection
  (certificates rotate without a restart; os-ken builds one context at
  start and keeps it),
- a handshake runs in the connection's own green thread with a deadline
  (a peer that connects and says nothing holds nothing for long), and a
  failed one is logged with the peer's address and the reason,
- plain TCP is served only when the controller was started with the lab
  flag (`main`), never beside TLS.

`main` puts `handler_class(...)` in place of os-ken's OFPHandler (every
OpenFlow app depends on that module; loading both would open two
listeners).
"""
import logging
import ssl

from os_ken.base import app_manager
from os_ken.controller import controller as of_controller
from os_ken.controller.ofp_handler import OFPHandler
from os_ken.lib import hub

from virtualwire.southbound.tls import HANDSHAKE_TIMEOUT

LOG = logging.getLogger(__name__)


def handler_class(host, port, tls, on_refused=None):
    """An OFPHandler subclass listening on host:port, TLS when `tls` (a
    TlsFiles) is given, plain TCP when it is None. on_refused(peer, why)
    hears of each failed handshake (the controller keeps the last ones)."""

    class VirtualWireOFPHandler(OFPHandler):
        def start(self):
            app_manager.OSKenApp.start(self)
            return hub.spawn(serve, host, port, tls, on_refused)

    return VirtualWireOFPHandler


def serve(host, port, tls, on_refused=None):
    server = hub.listen((host, port))
    LOG.info('OpenFlow listening on %s:%d (%s)', host, port,
             'TLS, client certificates required' if tls else
             'PLAIN TCP: lab only')
    while True:
        sock, addr = server.accept()
        hub.spawn(connection, sock, addr, tls, on_refused)


def connection(sock, addr, tls, on_refused=None):
    if tls is not None:
        try:
            sock.settimeout(HANDSHAKE_TIMEOUT)
            sock = tls.server_context().wrap_socket(sock, server_side=True)
        except (ssl.SSLError, OSError) as e:
            why = 'TLS handshake failed: %s' % (
                getattr(e, 'verify_message', None) or
                getattr(e, 'reason', None) or e or type(e).__name__)
            LOG.warning('OpenFlow connection from %s:%d refused: %s',
                        addr[0], addr[1], why)
            sock.close()
            if on_refused is not None:
                on_refused('%s:%d' % tuple(addr[:2]), why)
            return
    of_controller.datapath_connection_factory(sock, addr)
