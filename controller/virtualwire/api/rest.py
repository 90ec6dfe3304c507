"""REST API /v1 on WebOb + Routes: thin. Handlers read the request, ask the
control loop (`loop.call`) or the intent store, and render JSON. Every
error is JSON {"error": {"status", "message"}}; domain errors get their
status from `api.errors`, nowhere else."""
import hmac
import itertools
import logging
import time

import routes
import webob
import webob.dec
from os_ken.lib import hub

from virtualwire.api.controller_port import ControllerPort
from virtualwire.api import dashboard, standby
from virtualwire.api.audit import FIELDS, AuditLog
from virtualwire.api.rate_limit import RateLimits
from virtualwire.api.topology_parsing import TopologyParser
from virtualwire.api.errors import status_of
from virtualwire.api.openapi import openapi_document
from virtualwire.api.render import (error, json_response, peek_json,
                                    read_json_object)
from virtualwire.api.rest_departures import DepartureHandlers
from virtualwire.api.rest_enrolment import EnrolmentHandlers
from virtualwire.api.rest_settings import SettingsHandlers
from virtualwire.api.rest_operator import OperatorHandlers
from virtualwire.api.rest_topologies import TopologyHandlers, file_error
from virtualwire.api.rest_switches import SwitchHandlers
from virtualwire.api.rest_wires import WireHandlers
from virtualwire.core import (batch, credentials, errors, ids, tenancy,
                              topology_file)
from virtualwire.metrics.exporter import (CONTENT_TYPE, LoopCollector,
                                          exposition, scoped_exposition,
                                          wire_exposition, wire_pages)

LOG = logging.getLogger(__name__)
CALL_TIMEOUT = 30.0          # the control loop answers long before this


ROUTES = (
    ('/', 'GET', 'home'),
    ('/ui', 'GET', 'home'),
    ('/ui/', 'GET', 'ui'),
    ('/ui/{name}', 'GET', 'ui'),
    ('/v1/openapi.json', 'GET', 'openapi'),
    ('/metrics', 'GET', 'metrics'),
    ('/healthz', 'GET', 'healthz'),
    ('/readyz', 'GET', 'readyz'),
    ('/v1/status', 'GET', 'status'),
    ('/v1/hosts', 'GET', 'list_hosts'),
    ('/v1/hosts/{name}', 'GET', 'show_host'),
    ('/v1/hosts/{name}/revoke', 'POST', 'revoke_host'),
    ('/v1/revocations', 'GET', 'list_revocations'),
    ('/v1/vnics', 'GET', 'list_vnics'),
    ('/v1/vnics/{vnic_id}', 'GET', 'show_vnic'),
    ('/v1/vnics/{vnic_id}/tenant', 'PUT', 'assign_tenant'),
    ('/v1/vnics/{vnic_id}/tenant', 'DELETE', 'release_tenant'),
    ('/v1/vnics/{vnic_id}/placement', 'PUT', 'place_vnic'),
    ('/v1/vnics/{vnic_id}/placement', 'DELETE', 'unplace_vnic'),
    ('/v1/tenants', 'GET', 'list_tenants'),
    ('/v1/audit', 'GET', 'audit'),
    ('/v1/wires', 'GET', 'list_wires'),
    ('/v1/wires', 'POST', 'connect'),
    ('/v1/wires/batch', 'POST', 'batch'),
    ('/v1/wires/{wire_id}', 'GET', 'show_wire'),
    ('/v1/wires/{wire_id}', 'DELETE', 'disconnect'),
    ('/v1/wires/{wire_id}/stats', 'GET', 'wire_stats'),
    ('/v1/stats', 'GET', 'all_stats'),
    ('/v1/migrations', 'GET', 'list_migrations'),
    ('/v1/migrations', 'POST', 'announce_migration'),
    ('/v1/migrations/departures', 'POST', 'report_departure'),
    ('/v1/migrations/{vm_uuid}/released', 'POST', 'migration_released'),
    ('/v1/migrations/{vm_uuid}/stopped', 'POST', 'migration_stopped'),
    ('/v1/extender-links', 'GET', 'list_extender_links'),
    ('/v1/extender-links', 'POST', 'connect_extenders'),
    ('/v1/extender-links/{a}/{b}', 'DELETE', 'disconnect_extenders'),
    ('/v1/extenders/{name}/report', 'POST', 'extender_report'),
    ('/v1/extenders/{name}/rotate-key', 'POST', 'rotate_key'),
    ('/v1/credentials', 'GET', 'list_credentials'),
    ('/v1/credentials', 'POST', 'issue_credential'),
    ('/v1/credentials/{role}/{name}', 'DELETE', 'revoke_credential'),
    ('/v1/topologies', 'GET', 'list_topologies'),
    ('/v1/topologies/{name}', 'GET', 'show_topology'),
    ('/v1/topologies/{name}', 'PUT', 'apply_topology'),
    ('/v1/topologies/{name}', 'DELETE', 'destroy_topology'),
    ('/v1/topologies/{name}/graph', 'GET', 'topology_graph'),
    ('/v1/topology.schema.json', 'GET', 'topology_schema'),
    ('/v1/guests', 'GET', 'list_guests'),
    ('/v1/guests/{vm_uuid}', 'PUT', 'report_guest'),
    ('/v1/enrolments', 'GET', 'list_enrolments'),
    ('/v1/enrolments', 'POST', 'request_enrolment'),
    ('/v1/enrolments/{name}/poll', 'POST', 'poll_enrolment'),
    ('/v1/enrolments/{name}/approve', 'POST', 'approve_enrolment'),
    ('/v1/enrolments/{name}', 'DELETE', 'refuse_enrolment'),
    ('/v1/join-tokens', 'POST', 'issue_join_token'),
    ('/v1/settings', 'GET', 'list_settings'),
    ('/v1/settings/{name}', 'PUT', 'set_setting'),
    ('/v1/switches', 'GET', 'list_switches'),
    ('/v1/switches', 'POST', 'create_switch'),
    ('/v1/switches/{name}', 'GET', 'show_switch'),
    ('/v1/switches/{name}', 'DELETE', 'delete_switch'),
    ('/v1/switches/{name}/host', 'PUT', 'place_switch'),
    ('/v1/switches/{name}/parts', 'PUT', 'split_switch'),
    ('/v1/switches/{name}/advice', 'GET', 'advise_switch'),
    ('/v1/intent/orphans', 'GET', 'orphans'),
    ('/v1/intent/release-orphans', 'POST', 'release_orphans'),
)
ADMIN = 'admin'

# Served without the token: the API's description, and the dashboard's
# static files (they hold no data; the page asks for the token).
# /healthz and /readyz too, for probes that hold no token: they say alive
# or ready and the names of failing checks, nothing of wires or hosts.
# A host enrolling has no token yet: it asks and polls (rest_enrolment).
PUBLIC = frozenset({'openapi', 'home', 'ui', 'topology_schema', 'healthz',
                    'readyz', 'request_enrolment', 'poll_enrolment'})
PROBE_TIMEOUT = 2.0     # a loop this late is not alive, whatever it holds


def _for_caller(req, view):
    """What a hypervisor's hook is told of a migration: not where its
    vNICs were (other hosts), nor anyone's timeline."""
    who = req.environ.get('virtualwire.principal')
    if isinstance(who, tuple) and who[0] == 'hypervisor':
        return {k: view[k] for k in tenancy.MIGRATION_VIEW if k in view}
    return view


def _scope(req):
    """The tenant's `core.tenancy.Scope`, or None for the operator and
    the cloud's own credentials."""
    return req.environ.get('virtualwire.scope')


class RestApi(OperatorHandlers, WireHandlers, TopologyHandlers,
              EnrolmentHandlers, SettingsHandlers, DepartureHandlers,
              SwitchHandlers):
    def __init__(self, loop, controller: ControllerPort, intent, runtime,
                 token, audit_log=None, own_urls=None, signer=None):
        self.loop, self.ctl = loop, controller
        self.signer = signer          # rest_enrolment.Signer or None
        # Where clients reach this instance: {'rest': .., 'southbound': ..}
        self.own_urls = own_urls or {}
        self.audit_log = audit_log or AuditLog('')
        self.topology_parser = TopologyParser()
        self.rate_limits = RateLimits()
        self.instruments = controller.instruments
        self.instruments.registry.register(LoopCollector(loop, controller,
                                                        intent))
        self.intent, self.runtime = intent, runtime
        self.token = token
        m = routes.Mapper()
        for path, method, action in ROUTES:
            # /v1/wires/batch is not wire "batch" (405 for GET, not 422).
            req = {'wire_id': r'(?!batch$)[^/]+'} \
                if '{wire_id}' in path else {}
            m.connect(path, action=action, conditions=dict(method=[method]),
                      requirements=req)
        self.mapper = m

    @webob.dec.wsgify
    def __call__(self, req):
        t0 = time.monotonic()
        route = ['unmatched']
        resp = self._handle(req, route)
        if req.method != 'GET':
            self._audit(req, route[0], resp)
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
                    peek_json(req) if who[0] == 'hypervisor' else None)
                req.environ['virtualwire.principal'] = who
                if who != ADMIN:
                    slow_down = self.rate_limits.refusal(who)
                    if slow_down is not None:
                        return slow_down
                if action in FIELDS:
                    self._keep_body(req)
                if why is not None:
                    return error(403, why)
                moved = standby.redirect(req, self.ctl, self.own_urls)
                if moved is not None:
                    return moved
                if who != ADMIN and who[0] in credentials.TENANT_ROLES:
                    req.environ['virtualwire.scope'] = tenancy.Scope(
                        who[1], self.intent.ownership.end_owners())
            return getattr(self, action)(req, **match)
        except topology_file.FileError as e:
            return file_error(e)
        except batch.ItemsRefused as e:
            resp = error(status_of(e), e.message)
            doc = resp.json
            doc['error']['items'] = e.view()
            return json_response(resp.status_int, doc)
        except errors.VwError as e:
            return error(status_of(e), e.message)
        except TimeoutError as e:
            return error(504, str(e))
        except Exception:
            LOG.exception('internal error on %s %s', req.method, req.path)
            return error(500, 'internal error; see the controller log')

    def _allowed(self, path):
        """The methods some route takes on `path` (for 405's Allow)."""
        return [m for m in ('GET', 'POST', 'PUT', 'DELETE')
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

    @staticmethod
    def _keep_body(req):
        """The body's fields for the audit log, read before the handler
        (which reads it again)."""
        try:
            req.environ['virtualwire.body'] = peek_json(req)
        except errors.VwError:
            pass                # the handler says why; nothing to keep

    def _audit(self, req, action, resp):
        body = req.environ.get('virtualwire.body')
        message = None
        if resp.status_int >= 400 and resp.content_type == 'application/json':
            message = (resp.json.get('error') or {}).get('message')
        self.audit_log.record(req.environ.get('virtualwire.principal'),
                              req.remote_addr, req.method, req.path_info,
                              action, body, resp.status_int, message)

    def _call(self, fn, *args):
        return self.loop.call(fn, *args, timeout=CALL_TIMEOUT)

    # ---- handlers ------------------------------------------------------------
    def openapi(self, req):
        return json_response(200, openapi_document())

    def home(self, req):
        resp = webob.Response(status=302)
        resp.headers['Location'] = '/ui/'
        return resp

    def ui(self, req, name=''):
        resp = dashboard.serve(name)
        return resp if resp is not None else error(
            404, 'no such file of the dashboard: %s' % name)

    def metrics(self, req):
        """Prometheus text format; bearer token as for the rest. A
        tenant's has only its wires' series. The wires' are read and
        written a page at a time (`exporter.wire_exposition`)."""
        scope, views = _scope(req), self.ctl.views
        if scope is None:
            head, keep = exposition(self.instruments.registry), None
        else:
            head = scoped_exposition(scope.metrics(self._call(
                views.metrics_view, False)))

            def keep(rows):
                return scope.metrics({'wires': rows})['wires']
        resp = webob.Response(status=200, app_iter=itertools.chain(
            [head], wire_exposition(wire_pages(self._call, views, keep),
                                    pause=lambda: hub.sleep(0))))
        resp.headers['Content-Type'] = CONTENT_TYPE
        return resp

    def status(self, req):
        return json_response(200, self._call(self.ctl.views.status))

    def healthz(self, req):
        """Alive: the control loop answers (a wedged loop is restarted by
        whoever probes: systemd's watchdog, a kubelet)."""
        try:
            self.loop.call(lambda: None, timeout=PROBE_TIMEOUT)
        except TimeoutError:
            return json_response(503, {'status': 'not alive',
                                       'failing': ['loop']})
        return json_response(200, {'status': 'alive'})

    def readyz(self, req):
        """Ready: alive, the intent database connected, a role (active,
        or standby with a leader known) and every known host's switch in
        session."""
        try:
            failing = self.loop.call(self.ctl.views.readiness,
                                     timeout=PROBE_TIMEOUT)
        except TimeoutError:
            failing = ['loop']
        if not self.intent.connected():
            failing.append('intent-db')
        if failing:
            return json_response(503, {'status': 'not ready',
                                       'failing': failing})
        return json_response(200, {'status': 'ready'})

    def list_hosts(self, req):
        return json_response(200, {'hosts': self._call(self.ctl.views.host_views)})

    def show_host(self, req, name):
        return json_response(200, self._call(self.ctl.views.host_view, name))

    def list_vnics(self, req):
        views = list(self._call(self.ctl.views.vnic_views).values())
        scope = _scope(req)
        owners = self.intent.ownership.owners()
        return json_response(200, {'vnics': [
            dict(v, tenant=owners.get(v['id'])) for v in
            (views if scope is None else scope.vnics(views))]})

    def show_vnic(self, req, vnic_id):
        ids.check_vnic_id(vnic_id)
        scope = _scope(req)
        if scope is not None:
            scope.check_vnic(vnic_id)
        view = self._call(self.ctl.views.vnic_view, vnic_id)
        return json_response(200, dict(
            view, tenant=self.intent.ownership.owners().get(vnic_id)))

    def list_migrations(self, req):
        views = self._call(self.ctl.views.migration_views)
        scope = _scope(req)
        return json_response(200, {'migrations': views if scope is None
                                   else scope.migrations(views)})

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
        # Its source may have reported the guest leaving already.
        words = self._call(self.ctl.cloud_word.words_for_move, view['vm_uuid'])
        self._write_words(words)
        return json_response(201, _for_caller(req, view))

    def migration_released(self, req, vm_uuid):
        doc = read_json_object(req)
        if set(doc) != {'host'} or not isinstance(doc['host'], str):
            raise errors.Malformed('body must be {"host": host name}')
        view = self._call(self.ctl.moves.migration_released, vm_uuid, doc['host'])
        return json_response(200, {'migration': _for_caller(req, view)
                                   if view else view})

    def list_extender_links(self, req):
        return json_response(200, {
            'links': self._call(self.ctl.extenders.link_views),
            'sites': self._call(self.ctl.extenders.site_path_views)})

    def connect_extenders(self, req):
        doc = read_json_object(req)
        if set(doc) != {'a', 'b'}:
            raise errors.Malformed('body must be {"a": extender, "b": '
                                   'extender}')
        self._call(self.ctl.extenders.check_link, doc['a'], doc['b'])
        link = self.intent.create_link(doc['a'], doc['b'])
        views = self._call(self.ctl.extenders.link_views)
        view = next(v for v in views if (v['a'], v['b']) == (link.a, link.b))
        resp = json_response(201, view)
        resp.headers['Location'] = '/v1/extender-links/%s/%s' % (link.a,
                                                                link.b)
        return resp

    def disconnect_extenders(self, req, a, b):
        if not self.intent.delete_link(a, b):
            raise errors.NotFound('extenders %s and %s are not linked'
                                  % (a, b))
        return webob.Response(status=204)

    def extender_report(self, req, name):
        out = self._call(self.ctl.extenders.report, name,
                         read_json_object(req))
        change = out.pop('key_change', None)
        if change is not None:      # reports are not audited; key changes
            ok = change['result'] == 'changed'
            self.audit_log.record(
                req.environ.get('virtualwire.principal'), req.remote_addr,
                req.method, req.path_info, 'extender_key_change', change,
                200 if ok else 403, None if ok else change['why'])
        return json_response(200, out)

    def rotate_key(self, req, name):
        return json_response(202, self._call(self.ctl.extenders.rotate_key, name))
