"""What a standby instance does with a write: it redirects it (HTTP 307,
`Location` the leader's own URL for the same path and query), it does not
forward it.

Why redirect: the client then talks TLS to the leader itself and checks
the leader's certificate, so its bearer token never passes through a
second process, and the leader's audit log records the caller's own
address; one instance owns every change (the leader's control loop).
A forwarding standby would hold every client's token and be one more
hop to fail mid-request. Clients (`vwctl`, the libvirt hook, the
extender agents) follow a 307 only to a controller in their own list,
so a compromised standby cannot send a token elsewhere.

Reads are answered by every instance from its own state (a standby reads
all the leader reads; its flow counters are not read: the leader's are).
"""
import time

from os_ken.lib import hub

from virtualwire.api.controller_port import ControllerPort
from virtualwire.api.render import json_response

LISTENER = 'virtualwire.listener'
WAIT = 5.0          # an election in progress usually ends well within this


def southbound(app):
    """The API as served on the management network (hooks, agents): a
    standby redirects those callers to the leader's address there."""
    def serve(environ, start_response):
        environ[LISTENER] = 'southbound'
        return app(environ, start_response)
    return serve


def redirect(req, ctl: ControllerPort, own, wait=None):
    """None (serve the request here), or the answer for a write that
    reached a standby: 307 to the leader, or 503 while none is known.
    own: {'rest': URL, 'southbound': URL} of this instance."""
    if req.method in ('GET', 'HEAD') or ctl.active:
        return None
    where = req.environ.get(LISTENER, 'rest')
    end = time.monotonic() + (WAIT if wait is None else wait)
    while True:
        if ctl.active:
            return None
        leader = ctl.roles.leader
        there = (leader.southbound_url if where == 'southbound'
                 else leader.rest_url) if leader is not None else ''
        if there and there.rstrip('/') != own.get(where, '').rstrip('/'):
            url = there.rstrip('/') + req.path_qs
            resp = json_response(307, {'error': {
                'status': 307, 'leader': there, 'term': leader.term,
                'message': 'this controller is a standby (term %d): send '
                           'changes to the leader, %s (%s)'
                           % (leader.term, leader.holder, there)}})
            resp.headers['Location'] = url
            return resp
        if time.monotonic() >= end:
            resp = json_response(503, {'error': {
                'status': 503,
                'message': 'no leader is elected yet: retry shortly'}})
            resp.headers['Retry-After'] = '1'
            return resp
        hub.sleep(0.1)

