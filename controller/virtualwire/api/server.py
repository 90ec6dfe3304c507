"""Serve the WSGI app on whichever hub os-ken runs: eventlet's WSGI server
(as os_ken.lib.hub.WSGIServer runs it, with our bounds) or, under the
native hub, a threading wsgiref server. The listen socket is opened at
construction.

HTTPS when given `tls` (southbound.tls.TlsFiles): each accepted connection
is wrapped with the context current at that moment (certificates rotate
without a restart) and its handshake runs in the connection's own thread,
under its timeout, never in the accept loop.

Bounded, so that no client can stop the API for others (one idle client
with 1,030 half-sent requests once did: eventlet's pool of 1,024 filled):
- a connection idle or half-sent for SOCKET_TIMEOUT seconds is closed;
- one client address holds at most PER_CLIENT connections, and all of
  them at most MAX_CONNECTIONS: more are closed at once, not queued.
What this does not stop: many addresses at once (a network's job), or a
client within its limits sending slowly but steadily.
"""
import collections
import logging
import socketserver
import threading
import wsgiref.simple_server

from os_ken.lib import hub

LOG = logging.getLogger(__name__)
SOCKET_TIMEOUT = 10.0
PER_CLIENT = 64
MAX_CONNECTIONS = 4096


class Limits:
    """Connections held per client address; one owner per server."""

    def __init__(self, per_client=PER_CLIENT, total=MAX_CONNECTIONS):
        self.per_client, self.total = per_client, total
        self.active: collections.Counter = collections.Counter()
        self.held = 0           # sum of `active`, kept as it changes
        self.refused = 0
        self._lock = threading.Lock()

    def take(self, addr):
        ip = addr[0] if isinstance(addr, tuple) else str(addr)
        with self._lock:
            if self.active[ip] >= self.per_client or \
                    self.held >= self.total:
                self.refused += 1
                return None
            self.active[ip] += 1
            self.held += 1
            return ip

    def give(self, ip):
        with self._lock:
            self.held -= 1
            self.active[ip] -= 1
            if self.active[ip] <= 0:
                del self.active[ip]


def _wrap(tls, conn):
    return tls.https_context().wrap_socket(
        conn, server_side=True, do_handshake_on_connect=False)


class _TlsListener:
    """The listening socket, wrapping each accepted connection."""

    def __init__(self, sock, tls):
        self._sock, self._tls = sock, tls

    def accept(self):
        conn, addr = self._sock.accept()
        return _wrap(self._tls, conn), addr

    def __getattr__(self, name):
        return getattr(self._sock, name)


class _LimitedPool:
    """eventlet.wsgi's `custom_pool`: over its client's limit, a
    connection is closed instead of waiting for a free green thread."""

    def __init__(self, limits):
        import eventlet
        self.limits = limits
        self.pool = eventlet.GreenPool(limits.total)
        self._spawn = eventlet.spawn

    def spawn(self, fn, conn):
        ip = self.limits.take(conn[0])
        if ip is None:
            return self._spawn(_drop, conn)
        return self.pool.spawn(self._run, ip, fn, conn)

    def _run(self, ip, fn, conn):
        try:
            fn(conn)
        finally:
            self.limits.give(ip)

    def waitall(self):
        self.pool.waitall()


def _drop(conn):
    try:
        conn[1].close()
    except OSError:
        pass


class _Quiet(wsgiref.simple_server.WSGIRequestHandler):
    timeout = SOCKET_TIMEOUT

    def log_message(self, fmt, *args):
        logging.getLogger('virtualwire.rest').debug(fmt, *args)


class _ThreadingServer(socketserver.ThreadingMixIn,
                       wsgiref.simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True
    tls = None
    limits: Limits

    def get_request(self):
        conn, addr = self.socket.accept()
        return (_wrap(self.tls, conn) if self.tls else conn), addr

    def verify_request(self, request, client_address):
        ip = self.limits.take(client_address)
        if ip is None:
            return False
        request._vw_ip = ip
        return True

    def shutdown_request(self, request):
        ip = getattr(request, '_vw_ip', None)
        if ip is not None:
            request._vw_ip = None
            self.limits.give(ip)
        super().shutdown_request(request)


def make_server(host, port, app, tls=None, limits=None):
    limits = limits or Limits()
    if getattr(hub, 'HUB_TYPE', '') == 'eventlet':
        return _eventlet_server((host, port), app, tls, limits)
    srv = wsgiref.simple_server.make_server(
        host, port, app, server_class=_ThreadingServer,
        handler_class=_Quiet)
    srv.tls, srv.limits = tls, limits
    if tls:     # redirects (webob's absolute Location) say https
        srv.base_environ['HTTPS'] = 'on'
    return srv


def _eventlet_server(listen_info, app, tls, limits):
    """os-ken's hub.WSGIServer (it opens the listening socket), serving
    with what its own serve_forever cannot pass to eventlet.wsgi.server:
    the socket timeout, the bounded pool, TLS per connection."""
    import eventlet.wsgi

    class Server(hub.WSGIServer):
        def serve_forever(self):
            sock = _TlsListener(self.server, tls) if tls else self.server
            # The listener hides the TLS socket from eventlet's own check:
            # say it, so redirects (absolute Locations) keep https.
            environ = {'wsgi.url_scheme': 'https', 'HTTPS': 'on'} \
                if tls else None
            eventlet.wsgi.server(sock, self.handle, log=hub.LoggingWrapper(),
                                 environ=environ,
                                 socket_timeout=SOCKET_TIMEOUT,
                                 custom_pool=_LimitedPool(limits),
                                 log_output=False, debug=False)
    return Server(listen_info, app)
