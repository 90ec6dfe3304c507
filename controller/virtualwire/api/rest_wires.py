"""REST handlers of wires (a part of `RestApi`): list (paginated), connect,
disconnect, many at once (`core.batch`), stats; and, on any change,
`?wait=programmed`: the answer waits until every connected switch holds
the change (`control.programming`)."""
import logging
import time
from typing import Any

import webob

from virtualwire.api.controller_port import ControllerPort
from virtualwire.api.render import json_response, read_json_object
from virtualwire.core import batch, errors, ids
from virtualwire.store.errors import VnicTaken

LOG = logging.getLogger(__name__)

MAX_BATCH_BODY = 4 * 1024 * 1024       # 10,000 items at ~100 bytes and more
DEFAULT_WAIT = 30.0
MAX_PAGE = 10000


def _scope(req):
    return req.environ.get('virtualwire.scope')


def page_args(req):
    """(after, limit) of `?after=CURSOR&limit=N` (None, None: all)."""
    unknown = sorted(set(req.GET) - {'after', 'limit'})
    if unknown:
        raise errors.Invalid('unknown query parameter(s): %s (after, limit)'
                             % ', '.join(unknown))
    limit = req.GET.get('limit')
    if limit is not None:
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_PAGE:
            raise errors.Invalid('limit must be 1 to %d, got %r'
                                 % (MAX_PAGE, limit))
        limit = int(limit)
    return req.GET.get('after'), limit


def wait_args(req):
    """The seconds to wait for the change to be programmed, or None."""
    unknown = sorted(set(req.GET) - {'wait', 'timeout'})
    if unknown:
        raise errors.Invalid('unknown query parameter(s): %s (wait, '
                             'timeout)' % ', '.join(unknown))
    wait = req.GET.get('wait')
    if wait is None:
        if 'timeout' in req.GET:
            raise errors.Invalid('timeout without wait=programmed')
        return None
    if wait != 'programmed':
        raise errors.Invalid('wait must be "programmed", got %r' % wait)
    raw = req.GET.get('timeout', str(DEFAULT_WAIT))
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 300:
        raise errors.Invalid('timeout must be 0 to 300 seconds, got %r' % raw)
    return seconds


def _for(scope, view):
    """A programmed view as `scope` (a tenant, or None: the operator) may
    see it: a tenant gets the counts, not the hosts' names."""
    if scope is None:
        return view
    return dict(view, pending=[], not_connected=[], not_answering=[],
                hosts_pending=len(view['pending']),
                hosts_not_connected=len(view['not_connected']),
                hosts_not_answering=len(view['not_answering']))


class WireHandlers:
    ctl: ControllerPort
    intent: Any

    def _call(self, fn, *args):
        raise NotImplementedError

    def _programmed(self, seconds, req):
        """Wait until every connected switch holds the changes made so
        far; the view of where they are. 504 says where they are not. A
        tenant is told how many hosts, never which (the cloud's)."""
        scope = _scope(req)
        gen = self._call(self.ctl.programming.current_generation)
        done = self._call(self.ctl.programming.wait_programmed, gen)
        try:
            return _for(scope, done.result(seconds))
        except TimeoutError:
            self._call(self.ctl.programming.forget_waiter, done)
            view = self._call(self.ctl.programming.programmed_view, gen)
            pending = ('%d switch(es)' % len(view['pending'])
                       if scope is not None else
                       ', '.join(view['pending']) or '-')
            raise TimeoutError(
                'the change is stored (generation %d) but not yet on every '
                'switch after %g s: waiting for %s' % (
                    gen, seconds, pending)) from None

    def list_wires(self, req):
        after, limit = page_args(req)
        scope = _scope(req)
        if after is not None:
            after = ids.parse_connector_id(after)
        views, nxt = self._call(self.ctl.views.wire_page, after, limit,
                                None if scope is None else scope.sees_wire)
        doc = {'wires': views}
        if nxt is not None:
            doc['next'] = '/v1/wires?after=%d&limit=%d' % (nxt, limit)
        return json_response(200, doc)

    def _visible_wire(self, req, wire_id):
        """The connector id asked for, once it is known to exist for this
        caller (a tenant's 404 for another's wire reads as for none)."""
        cid = ids.parse_connector_id(wire_id)
        wire = self._call(self.ctl.views.wire, cid)        # 404 if unknown
        scope = _scope(req)
        if scope is not None:
            scope.check_wire(wire)
        return cid

    def connect(self, req):
        seconds = wait_args(req)
        doc = read_json_object(req)
        missing = [k for k in ('a', 'b') if k not in doc]
        if missing:
            raise errors.Malformed('missing field(s): %s (expected {"a": '
                                   'vNIC id, "b": vNIC id})'
                                   % ', '.join(missing))
        unknown = sorted(set(doc) - {'a', 'b'})
        if unknown:
            raise errors.Malformed('unknown field(s): %s'
                                   % ', '.join(unknown))
        ids.check_wire_ends(doc['a'], doc['b'])
        scope = _scope(req)
        if scope is not None:
            scope.check_ends(doc['a'], doc['b'])
        self._call(self.ctl.views.check_gateway_ends, doc['a'], doc['b'])
        if any(ids.parse_switch_end(x) for x in (doc['a'], doc['b'])):
            self._call(self.ctl.views.check_switch_ends,
                       self.intent.ownership.owners(), doc['a'], doc['b'])
        # The database is the arbiter between writers (Binding's unique
        # index: a vNIC already wired is refused there, with its wire's
        # id); the loop applies the wire when it comes back from it.
        try:
            wire = self.intent.create_wire(doc['a'], doc['b'])
        except VnicTaken:
            if scope is None:
                raise
            for v in (doc['a'], doc['b']):
                held = self._call(self.ctl.views.wire_of_vnic, v)
                if held is not None:
                    raise scope.taken(v, held) from None
            raise
        view = self._call(self.ctl.views.wire_view, wire.connector_id)
        if seconds is not None:
            view = dict(view, programmed=self._programmed(seconds, req))
        resp = json_response(201, view)
        resp.headers['Location'] = '/v1/wires/%d' % wire.connector_id
        return resp

    def show_wire(self, req, wire_id):
        return json_response(200, self._call(
            self.ctl.views.wire_view, self._visible_wire(req, wire_id)))

    def disconnect(self, req, wire_id):
        seconds = wait_args(req)
        cid = self._visible_wire(req, wire_id)
        self.intent.delete_wire(cid)
        self._call(lambda: None)                     # applied before we answer
        if seconds is None:
            return webob.Response(status=204)
        return json_response(200, {'deleted': cid, 'programmed':
                                   self._programmed(seconds, req)})

    def batch(self, req):
        """Many wires made and removed in one transaction, or none."""
        seconds = wait_args(req)
        t0 = time.perf_counter()
        pairs, cids = batch.parse(read_json_object(req, MAX_BATCH_BODY))
        total = len(pairs) + len(cids)
        owners = self.intent.ownership.owners() if any(
            ids.parse_switch_end(x) for p in pairs for x in p) else None
        refused = batch.refuse(self._call(self.ctl.views.batch_refusals, pairs,
                                          cids, _scope(req), owners), total)
        if refused is not None:
            raise refused
        try:
            made = self.intent.apply_batch(pairs, cids)
        except VnicTaken as e:
            # Another writer was faster: nothing of ours was written.
            raise errors.Conflict('%s; nothing was changed' % e) from None
        gen = self._call(self.ctl.programming.current_generation)
        doc = {'created': [{'id': w.connector_id,
                            'connector_id': ids.fmt_connector(
                                w.connector_id),
                            'a': w.end_a, 'b': w.end_b} for w in made],
               'deleted': cids, 'generation': gen}
        t1 = time.perf_counter()
        if seconds is not None:
            doc['programmed'] = self._programmed(seconds, req)
        if total >= 1000:
            LOG.info('batch of %d: stored in %.0f ms, then programmed in '
                     '%.0f ms', total, (t1 - t0) * 1e3,
                     (time.perf_counter() - t1) * 1e3)
        return json_response(200, doc)

    def all_stats(self, req):
        doc = self._call(self.ctl.views.all_wire_stats)
        scope = _scope(req)
        if scope is not None:
            doc = dict(doc, wires=scope.wires(doc['wires']))
        return json_response(200, doc)

    def wire_stats(self, req, wire_id):
        return json_response(200, self._call(
            self.ctl.views.wire_stats, self._visible_wire(req, wire_id)))
