"""Serve the WSGI app on whichever hub os-ken runs: eventlet's WSGI server
(as os_ken.lib.hub.WSGIServer runs it, with our bounds) or, under the
native hub, a threading wsgiref server. The listen socket is opened at
construction.

HTTPS when given `tls` (virtualwire.tls.TlsFiles): each accepted connection
is wrapped with the context current at that moment (certificates rotate
without a restart) and its handshake runs in the connection's own thread,
under its timeout, never in the accept loop.

Bounded, so that no client can stop the API for others (one idle client
with 1,030 half-sent requests once did: eventlet's pool of 1,024 filled),
with `listen_guard`'s parts:
- a request head (the TLS handshake included) must be complete within
  DEADLINE seconds of being awaited, however slowly it trickles in; an
  idle or half-sent connection is closed after SOCKET_TIMEOUT as well;
- one client address holds at most PER_CLIENT connections, and all of
  them at most the budget's share of the file limit: more are closed at
  once, not queued;
- accept() survives running out of descriptors.
What this does not stop: many addresses at once beyond the total cap (a
network's job), or a client within its limits sending slowly but steadily
after its head.
"""
import logging
import socketserver
import wsgiref.simple_server

from os_ken.lib import hub

from virtualwire import listen_guard
from virtualwire.listen_guard import (DEADLINE, Deadline, GuardedListener,
                                      Limits, Refusals, accepted_at)

LOG = logging.getLogger(__name__)
SOCKET_TIMEOUT = 10.0


def _wrap(tls, conn):
    return tls.https_context().wrap_socket(
        conn, server_side=True, do_handshake_on_connect=False)


class _LimitedPool:
    """eventlet.wsgi's `custom_pool`: over its client's limit, a
    connection is closed instead of waiting for a free green thread."""

    def __init__(self, limits, name, refusals):
        import eventlet
        self.limits, self.name, self.refusals = limits, name, refusals
        # Evicted connections end after their places are retaken.
        self.pool = eventlet.GreenPool(limits.total * 2)
        self._spawn = eventlet.spawn

    def spawn(self, fn, conn):
        ip = self.limits.take(conn[0], conn[1])
        if ip is None:
            self.refusals.count(self.name, 'over_cap', str(conn[0][0]))
            return self._spawn(_drop, conn)
        return self.pool.spawn(self._run, ip, fn, conn)

    def _run(self, ip, fn, conn):
        try:
            fn(conn)
        finally:
            self.limits.give(ip, conn[1])

    def waitall(self):
        self.pool.waitall()


def _drop(conn):
    try:
        conn[1].close()
    except OSError:
        pass


class _HeadDeadline:
    """A request handler's deadline on its request head: armed when a
    request (or the TLS handshake before it) is awaited, disarmed once
    the head is parsed."""
    name = 'rest'
    refusals: Refusals
    limits: Limits
    deadline = DEADLINE
    connection: object
    _deadline = None

    def _arm(self):
        """From the accept for a connection's first request (under a
        flood its handler may first run seconds later), from now for a
        kept-alive connection's next."""
        self._disarm()
        self._deadline = Deadline(
            hub, self.deadline, self.connection,
            lambda: self.refusals.count(
                self.name, 'deadline',
                'request head not complete in %gs' % self.deadline),
            since=accepted_at(self.connection))

    def _disarm(self):
        if self._deadline is not None:
            self._deadline.done()
            self._deadline = None

    def parse_request(self):
        try:
            ok = super().parse_request()     # type: ignore[misc]
        finally:
            self._disarm()
        if ok:                  # a head: this client is no flood's
            self.limits.proven(self.connection)
        return ok


class _Quiet(_HeadDeadline, wsgiref.simple_server.WSGIRequestHandler):
    timeout = SOCKET_TIMEOUT

    def setup(self):
        super().setup()
        srv = self.server
        self.name = getattr(srv, 'name', 'rest')
        self.refusals = getattr(srv, 'refusals', None) or Refusals()
        self.deadline = getattr(srv, 'deadline', DEADLINE)
        self.limits = srv.limits        # type: ignore[attr-defined]
        self._arm()             # one request a connection (HTTP/1.0)

    def finish(self):
        self._disarm()
        super().finish()

    def log_message(self, fmt, *args):
        logging.getLogger('virtualwire.rest').debug(fmt, *args)


class _ThreadingServer(socketserver.ThreadingMixIn,
                       wsgiref.simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024
    tls = None
    limits: Limits
    name = 'rest'
    refusals: Refusals
    guarded: GuardedListener
    deadline = DEADLINE

    def get_request(self):
        return self.guarded.accept()

    def verify_request(self, request, client_address):
        ip = self.limits.take(client_address, request)
        if ip is None:
            self.refusals.count(self.name, 'over_cap', client_address[0])
            return False
        request._vw_ip = ip
        return True

    def shutdown_request(self, request):
        ip = getattr(request, '_vw_ip', None)
        if ip is not None:
            request._vw_ip = None
            self.limits.give(ip, request)
        super().shutdown_request(request)


def make_server(host, port, app, tls=None, limits=None, name='rest',
                refusals=None, deadline=DEADLINE):
    """`name` labels this listener's refusals (`refusals`, shared by the
    process's listeners for /metrics); a request head must be complete
    within `deadline` seconds."""
    limits = limits or Limits(total=listen_guard.budget()['rest'])
    refusals = refusals or Refusals()
    limits.on_evict = lambda: refusals.count(name, 'evicted')
    wrap = (lambda conn: _wrap(tls, conn)) if tls else None
    if getattr(hub, 'HUB_TYPE', '') == 'eventlet':
        return _eventlet_server((host, port), app, tls, limits,
                                name, refusals, wrap, deadline)
    srv = wsgiref.simple_server.make_server(
        host, port, app, server_class=_ThreadingServer,
        handler_class=_Quiet)
    srv.tls, srv.limits, srv.name, srv.refusals = tls, limits, name, refusals
    srv.deadline = deadline
    srv.guarded = GuardedListener(srv.socket, name, refusals, hub, wrap)
    if tls:     # redirects (webob's absolute Location) say https
        srv.base_environ['HTTPS'] = 'on'
    return srv


def _eventlet_server(listen_info, app, tls, limits, name, refusals, wrap,
                     deadline):
    """os-ken's hub.WSGIServer (it opens the listening socket), serving
    with what its own serve_forever cannot pass to eventlet.wsgi.server:
    the socket timeout, the bounded pool, TLS per connection, the head
    deadline, accept() that survives running out of descriptors."""
    import eventlet.wsgi

    class Protocol(_HeadDeadline, eventlet.wsgi.HttpProtocol):
        def _read_request_line(self):
            self._arm()         # each request on a kept-alive connection
            return super()._read_request_line()

        def handle_one_request(self):
            try:
                super().handle_one_request()
            finally:
                self._disarm()

    Protocol.name, Protocol.refusals = name, refusals
    Protocol.deadline, Protocol.limits = deadline, limits

    class Server(hub.WSGIServer):
        def serve_forever(self):
            sock = GuardedListener(self.server, name, refusals, hub, wrap)
            # The listener hides the TLS socket from eventlet's own check:
            # say it, so redirects (absolute Locations) keep https.
            environ = {'wsgi.url_scheme': 'https', 'HTTPS': 'on'} \
                if tls else None
            eventlet.wsgi.server(sock, self.handle, log=hub.LoggingWrapper(),
                                 environ=environ, protocol=Protocol,
                                 socket_timeout=SOCKET_TIMEOUT,
                                 custom_pool=_LimitedPool(limits, name,
                                                          refusals),
                                 log_output=False, debug=False)
    srv = Server(listen_info, app)
    srv.server.listen(1024)     # os-ken opens it with 50: a burst waits
    return srv
