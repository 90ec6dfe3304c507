"""REST API /v1 on WebOb + Routes: thin. Handlers read the request, ask the
control loop (`loop.call`) or the intent store, and render JSON. Every
error is JSON {"error": {"status", "message"}}; domain errors get their
status from `api.errors`, nowhere else."""
import hmac
import json
import logging
import time

import routes
import webob
import webob.dec

from virtualwire.api import dashboard
from virtualwire.api.errors import LengthRequired, status_of
from virtualwire.api.openapi import openapi_document
from virtualwire.core import credentials, errors, ids
from virtualwire.metrics.exporter import CONTENT_TYPE, LoopCollector, exposition

LOG = logging.getLogger(__name__)
MAX_BODY = 64 * 1024
CALL_TIMEOUT = 30.0          # the control loop answers long before this


def _json(status, doc):
    return webob.Response(status=status, charset='utf-8',
                          content_type='application/json',
                          body=(json.dumps(doc, indent=1) + '\n').encode())


def error(status, message):
    return _json(status, {'error': {'status': status, 'message': message}})


ROUTES = (
    ('/', 'GET', 'home'),
    ('/ui', 'GET', 'home'),
    ('/ui/', 'GET', 'ui'),
    ('/ui/{name}', 'GET', 'ui'),
    ('/v1/openapi.json', 'GET', 'openapi'),
    ('/metrics', 'GET', 'metrics'),
    ('/v1/status', 'GET', 'status'),
    ('/v1/hosts', 'GET', 'list_hosts'),
    ('/v1/hosts/{name}', 'GET', 'show_host'),
    ('/v1/vnics', 'GET', 'list_vnics'),
    ('/v1/vnics/{vnic_id}', 'GET', 'show_vnic'),
    ('/v1/wires', 'GET', 'list_wires'),
    ('/v1/wires', 'POST', 'connect'),
    ('/v1/wires/{wire_id}', 'GET', 'show_wire'),
    ('/v1/wires/{wire_id}', 'DELETE', 'disconnect'),
    ('/v1/wires/{wire_id}/stats', 'GET', 'wire_stats'),
    ('/v1/stats', 'GET', 'all_stats'),
    ('/v1/migrations', 'GET', 'list_migrations'),
    ('/v1/migrations', 'POST', 'announce_migration'),
    ('/v1/migrations/{vm_uuid}/released', 'POST', 'migration_released'),
    ('/v1/extender-links', 'GET', 'list_extender_links'),
    ('/v1/extender-links', 'POST', 'connect_extenders'),
    ('/v1/extender-links/{a}/{b}', 'DELETE', 'disconnect_extenders'),
    ('/v1/extenders/{name}/report', 'POST', 'extender_report'),
    ('/v1/extenders/{name}/rotate-key', 'POST', 'rotate_key'),
    ('/v1/credentials', 'GET', 'list_credentials'),
    ('/v1/credentials', 'POST', 'issue_credential'),
    ('/v1/credentials/{role}/{name}', 'DELETE', 'revoke_credential'),
    ('/v1/intent/orphans', 'GET', 'orphans'),
    ('/v1/intent/release-orphans', 'POST', 'release_orphans'),
)
ADMIN = 'admin'

# Served without the token: the API's description, and the dashboard's
# static files (they hold no data; the page asks for the token).
PUBLIC = frozenset({'openapi', 'home', 'ui'})


def _peek_json(req):
    """The body as JSON for an access check that depends on it (the
    handler reads it again): a body that is not JSON is refused here,
    saying why, before any access decision is made on it."""
    if not req.content_length:
        return None
    if req.content_length > MAX_BODY:
        raise errors.TooLarge('request body over %d bytes' % MAX_BODY)
    try:
        return json.loads(req.body)
    except RecursionError:
        raise errors.Malformed('body is not valid JSON: nested too deeply') \
            from None
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.Malformed('body is not valid JSON: %s' % e) from None


def read_json_object(req):
    """The request body as a JSON object, or a domain error saying why not
    (too large, undelimited, not JSON, nested too deeply, not an object)."""
    if req.content_length is not None and req.content_length > MAX_BODY:
        raise errors.TooLarge('request body over %d bytes' % MAX_BODY)
    chunked = 'chunked' in req.headers.get('Transfer-Encoding', '').lower()
    if chunked:
        raw_in = req.body_file_raw
        if not getattr(raw_in, 'chunked_input', False):
            raise LengthRequired('chunked request bodies are not supported '
                                 'by this server; send Content-Length')
        raw = raw_in.read(MAX_BODY + 1)
    else:
        raw = req.body_file.read(MAX_BODY + 1)
    if len(raw) > MAX_BODY:
        raise errors.TooLarge('request body over %d bytes' % MAX_BODY)
    try:
        doc = json.loads(raw or b'null')
    except RecursionError:
        raise errors.Malformed('body is not valid JSON: nested too deeply') \
            from None
    except (ValueError, UnicodeDecodeError) as e:
        raise errors.Malformed('body is not valid JSON: %s' % e) from None
    if not isinstance(doc, dict):
        raise errors.Malformed('body must be a JSON object')
    return doc


# What a hypervisor's hook is told of a migration: not where its vNICs
# were (other hosts), nor anyone's timeline.
HOOK_VIEW = ('id', 'vm', 'vm_uuid', 'vnics', 'destination', 'state',
             'started_at', 'ended_at')


def _for_caller(req, view):
    who = req.environ.get('virtualwire.principal')
    if isinstance(who, tuple) and who[0] == 'hypervisor':
        return {k: view[k] for k in HOOK_VIEW if k in view}
    return view


class RestApi:
    def __init__(self, loop, controller, intent, runtime, token):
        self.loop, self.ctl = loop, controller
        self.instruments = controller.instruments
        self.instruments.registry.register(LoopCollector(loop, controller))
        self.intent, self.runtime = intent, runtime
        self.token = token
        m = routes.Mapper()
        for path, method, action in ROUTES:
            m.connect(path, action=action, conditions=dict(method=[method]))
        self.mapper = m

    @webob.dec.wsgify
    def __call__(self, req):
        t0 = time.monotonic()
        route = ['unmatched']
        resp = self._handle(req, route)
        self.instruments.rest.labels(req.method, route[0],
                                     str(resp.status_code)).observe(
            time.monotonic() - t0)
        return resp

    def _handle(self, req, route):
        try:
            if any(ord(c) < 0x20 or c == '\x7f' for c in req.path_info):
                # Routes would drop a trailing newline ('/v1/wires/5%0A'
                # served wire 5): no path of ours has control characters.
                return error(400, 'the path contains control characters')
            match = self.mapper.match(environ=req.environ)
            if match is None:
                allowed = self._allowed(req.path_info)
                if allowed:
                    resp = error(405, 'method %s not allowed on %s'
                                 % (req.method, req.path_info))
                    resp.headers['Allow'] = ', '.join(allowed)
                    return resp
                return error(404, 'no such resource: %s' % req.path_info)
            action = route[0] = match.pop('action')
            match.pop('controller', None)
            if action not in PUBLIC:
                who = self._principal(req)
                if who is None:
                    resp = error(401, 'missing or wrong bearer token')
                    resp.headers['WWW-Authenticate'] = 'Bearer'
                    return resp
                why = None if who == ADMIN else credentials.refusal(
                    who[0], who[1], req.method, action, match,
                    _peek_json(req) if who[0] == 'hypervisor' else None)
                if why is not None:
                    return error(403, why)
                req.environ['virtualwire.principal'] = who
            return getattr(self, action)(req, **match)
        except errors.VwError as e:
            return error(status_of(e), e.message)
        except TimeoutError as e:
            return error(504, str(e))
        except Exception:
            LOG.exception('internal error on %s %s', req.method, req.path)
            return error(500, 'internal error; see the controller log')

    def _allowed(self, path):
        """The methods some route takes on `path` (for 405's Allow)."""
        return [m for m in ('GET', 'POST', 'DELETE')
                if self.mapper.match(environ={'PATH_INFO': path,
                                              'REQUEST_METHOD': m})]

    def _principal(self, req):
        """ADMIN (the operator's token), (role, name) of a scoped
        credential (`core.credentials`), or None."""
        auth = req.headers.get('Authorization', '')
        if not auth.startswith('Bearer ') or not auth[7:].strip():
            return None
        token = auth[7:].strip()
        if hmac.compare_digest(token.encode(), self.token.encode()):
            return ADMIN
        return self.intent.credentials.holder(token)

    def _call(self, fn, *args):
        return self.loop.call(fn, *args, timeout=CALL_TIMEOUT)

    # ---- handlers ------------------------------------------------------------
    def openapi(self, req):
        return _json(200, openapi_document())

    def home(self, req):
        resp = webob.Response(status=302)
        resp.headers['Location'] = '/ui/'
        return resp

    def ui(self, req, name=''):
        resp = dashboard.serve(name)
        return resp if resp is not None else error(
            404, 'no such file of the dashboard: %s' % name)

    def metrics(self, req):
        """Prometheus text format; bearer token as for the rest."""
        resp = webob.Response(status=200, body=exposition(
            self.instruments.registry))
        resp.headers['Content-Type'] = CONTENT_TYPE
        return resp

    def status(self, req):
        return _json(200, self._call(self.ctl.status))

    def list_hosts(self, req):
        return _json(200, {'hosts': self._call(self.ctl.host_views)})

    def show_host(self, req, name):
        return _json(200, self._call(self.ctl.host_view, name))

    def list_vnics(self, req):
        return _json(200, {'vnics': list(self._call(
            self.ctl.vnic_views).values())})

    def show_vnic(self, req, vnic_id):
        return _json(200, self._call(self.ctl.vnic_view, vnic_id))

    def list_wires(self, req):
        return _json(200, {'wires': self._call(self.ctl.wire_views)})

    def connect(self, req):
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
        self._call(self.ctl.check_gateway_ends, doc['a'], doc['b'])
        # The database is the arbiter between writers (Binding's unique
        # index: a vNIC already wired is refused there, with its wire's
        # id); the loop applies the wire when it comes back from it.
        wire = self.intent.create_wire(doc['a'], doc['b'])
        resp = _json(201, self._call(self.ctl.wire_view, wire.connector_id))
        resp.headers['Location'] = '/v1/wires/%d' % wire.connector_id
        return resp

    def show_wire(self, req, wire_id):
        return _json(200, self._call(self.ctl.wire_view,
                                     ids.parse_connector_id(wire_id)))

    def disconnect(self, req, wire_id):
        cid = ids.parse_connector_id(wire_id)
        self._call(self.ctl.wire, cid)               # 404 if unknown
        self.intent.delete_wire(cid)
        self._call(lambda: None)                     # applied before we answer
        return webob.Response(status=204)

    def list_migrations(self, req):
        return _json(200, {'migrations': self._call(
            self.ctl.migration_views)})

    def announce_migration(self, req):
        view, ticket = self._call(self.ctl.announce_migration,
                                  read_json_object(req))
        try:
            ticket.result(CALL_TIMEOUT)
        except Exception as e:
            # The hook must not take a move as recorded when it is not:
            # the controller still follows the vNICs from host OVSDBs.
            LOG.error('migration %s accepted but not saved: %s',
                      view['id'], e)
            raise errors.Unavailable(
                'migration %s was not saved in the intent database (%s); '
                'the controller still follows its vNICs from the hosts'
                % (view['id'], e)) from None
        return _json(201, _for_caller(req, view))

    def migration_released(self, req, vm_uuid):
        doc = read_json_object(req)
        if set(doc) != {'host'} or not isinstance(doc['host'], str):
            raise errors.Malformed('body must be {"host": host name}')
        view = self._call(self.ctl.migration_released, vm_uuid, doc['host'])
        return _json(200, {'migration': _for_caller(req, view)
                           if view else view})

    def list_extender_links(self, req):
        return _json(200, {
            'links': self._call(self.ctl.extender_link_views),
            'sites': self._call(self.ctl.site_path_views)})

    def connect_extenders(self, req):
        doc = read_json_object(req)
        if set(doc) != {'a', 'b'}:
            raise errors.Malformed('body must be {"a": extender, "b": '
                                   'extender}')
        self._call(self.ctl.check_extender_link, doc['a'], doc['b'])
        link = self.intent.create_link(doc['a'], doc['b'])
        views = self._call(self.ctl.extender_link_views)
        view = next(v for v in views if (v['a'], v['b']) == (link.a, link.b))
        resp = _json(201, view)
        resp.headers['Location'] = '/v1/extender-links/%s/%s' % (link.a,
                                                                link.b)
        return resp

    def disconnect_extenders(self, req, a, b):
        if not self.intent.delete_link(a, b):
            raise errors.NotFound('extenders %s and %s are not linked'
                                  % (a, b))
        return webob.Response(status=204)

    def extender_report(self, req, name):
        return _json(200, self._call(self.ctl.extender_report, name,
                                     read_json_object(req)))

    def rotate_key(self, req, name):
        return _json(202, self._call(self.ctl.rotate_key, name))

    def list_credentials(self, req):
        return _json(200, {'credentials': self.intent.credentials.list()})

    def issue_credential(self, req):
        role, name = credentials.parse_request(read_json_object(req))
        token, created = self.intent.credentials.issue(role, name)
        return _json(201, {'role': role, 'name': name, 'token': token,
                           'created_at': created})

    def revoke_credential(self, req, role, name):
        role, name = credentials.check(role, name)
        if not self.intent.credentials.revoke(role, name):
            raise errors.NotFound('no %s credential for %s' % (role, name))
        return webob.Response(status=204)

    def orphans(self, req):
        return _json(200, self._call(self.ctl.safe_start_view))

    def release_orphans(self, req):
        """The operator says the intent database is right (safe_start)."""
        view = self._call(self.ctl.release_orphans)
        return _json(200, dict(view, released=True))

    def all_stats(self, req):
        return _json(200, self._call(self.ctl.all_wire_stats))

    def wire_stats(self, req, wire_id):
        return _json(200, self._call(self.ctl.wire_stats,
                                     ids.parse_connector_id(wire_id)))
