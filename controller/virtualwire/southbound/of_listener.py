"""The OpenFlow listener: os-ken's OFPHandler (hello, features, echo: the
`ofp_event` app) with our own accept loop, so that

- a TLS handshake takes a context from `tls.TlsFiles` per connection
  (certificates rotate without a restart; os-ken builds one context at
  start and keeps it),
- a handshake runs in the connection's own green thread and must finish
  within `listen_guard.DEADLINE` (however slowly its bytes trickle in),
  and a failed one is logged with the peer's address and the reason,
- handshakes under way are capped per client address and in all (the
  budget's share of the file limit), and accept() survives running out of
  descriptors (`listen_guard`): no unauthenticated flood stops the
  listener or takes the descriptors switches' sessions need,
- plain TCP is served only when the controller was started with the lab
  flag (`main`), never beside TLS.

`main` puts `handler_class(...)` in place of os-ken's OFPHandler (every
OpenFlow app depends on that module; loading both would open two
listeners).
"""
import logging
import ssl
import time

from os_ken.base import app_manager
from os_ken.controller import controller as of_controller
from os_ken.controller.ofp_handler import OFPHandler
from os_ken.lib import hub

from virtualwire import listen_guard
from virtualwire.listen_guard import (DEADLINE, Deadline, GuardedListener,
                                      Limits, Refusals)
from virtualwire.tls import HANDSHAKE_TIMEOUT

LOG = logging.getLogger(__name__)


def handler_class(host, port, tls, on_refused=None, refusals=None,
                  name='openflow'):
    """An OFPHandler subclass listening on host:port, TLS when `tls` (a
    TlsFiles) is given, plain TCP when it is None. on_refused(peer, why)
    hears of each failed handshake (the controller keeps the last ones);
    `refusals` counts every refusal for /metrics."""
    listener = Listener(tls, on_refused, refusals or Refusals(), name)

    class VirtualWireOFPHandler(OFPHandler):
        def start(self):
            app_manager.OSKenApp.start(self)
            return hub.spawn(listener.serve, host, port)

    return VirtualWireOFPHandler


class Listener:
    def __init__(self, tls, on_refused, refusals, name='openflow',
                 limits=None, deadline=DEADLINE):
        self.tls, self.on_refused, self.deadline = tls, on_refused, deadline
        self.refusals, self.name = refusals, name
        # A switch needs one or two places (the controller, the
        # collector); the rest of an address's share is a flood's.
        self.limits = limits or Limits(
            per_client=16, total=listen_guard.budget()['openflow_handshakes'])
        self.limits.on_evict = lambda: refusals.count(name, 'evicted')

    def serve(self, host, port):
        server = GuardedListener(hub.listen((host, port), backlog=1024),
                                 self.name, self.refusals, hub)
        LOG.info('OpenFlow listening on %s:%d (%s)', host, port,
                 'TLS, client certificates required' if self.tls else
                 'PLAIN TCP: lab only')
        while True:
            sock, addr = server.accept()
            accepted = time.monotonic()
            if self.tls is None:        # the lab flag: nothing to prove
                hub.spawn(of_controller.datapath_connection_factory,
                          sock, addr)
                continue
            try:
                # No handshake yet: the deadline and the limits hold the
                # TLS socket (wrapping detaches the plain one).
                sock.settimeout(HANDSHAKE_TIMEOUT)
                sock = self.tls.server_context().wrap_socket(
                    sock, server_side=True, do_handshake_on_connect=False)
            except (ssl.SSLError, OSError) as e:
                self._refused(sock, addr, e, False)
                continue
            ip = self.limits.take(addr, sock)
            if ip is None:
                self.refusals.count(self.name, 'over_cap', addr[0])
                sock.close()
                continue
            hub.spawn(self.connection, sock, addr, ip, accepted)

    def connection(self, sock, addr, ip, accepted=None):
        deadline = Deadline(hub, self.deadline, sock, since=accepted)
        failure = None
        try:
            sock.do_handshake()
        except (ssl.SSLError, OSError) as e:
            failure = e
        deadline.done()
        evicted = self.limits.give(ip, sock)
        if failure is None:
            of_controller.datapath_connection_factory(sock, addr)
        elif evicted:           # counted when it was cut
            sock.close()
        else:
            self._refused(sock, addr, failure, deadline.expired)

    def _refused(self, sock, addr, e, expired):
        if expired:
            why = 'TLS handshake not complete in %gs' % self.deadline
        else:
            why = 'TLS handshake failed: %s' % (
                getattr(e, 'verify_message', None) or
                getattr(e, 'reason', None) or e or type(e).__name__)
        self.refusals.count(self.name, 'deadline' if expired else
                            'handshake', '%s:%d' % tuple(addr[:2]))
        LOG.info('OpenFlow connection from %s:%d refused: %s',
                 addr[0], addr[1], why)
        sock.close()
        if self.on_refused is not None:
            self.on_refused('%s:%d' % tuple(addr[:2]), why)
