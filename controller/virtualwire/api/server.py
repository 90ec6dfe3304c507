"""Serve the WSGI app on whichever hub os-ken runs: eventlet's WSGI server
(os_ken.lib.hub.WSGIServer) or, under the native hub, a threading wsgiref
server. The listen socket is opened at construction."""
import logging
import socketserver
import wsgiref.simple_server

from os_ken.lib import hub


class _Quiet(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, fmt, *args):
        logging.getLogger('virtualwire.rest').debug(fmt, *args)


class _ThreadingServer(socketserver.ThreadingMixIn,
                       wsgiref.simple_server.WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(host, port, app):
    if getattr(hub, 'HUB_TYPE', '') == 'eventlet':
        return hub.WSGIServer((host, port), app)
    srv = wsgiref.simple_server.make_server(
        host, port, app, server_class=_ThreadingServer,
        handler_class=_Quiet)
    return srv
