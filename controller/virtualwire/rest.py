"""REST API /v1 on WebOb + Routes. Handlers validate, call the engine and
render JSON; every error is JSON {"error": {"status", "message"}}."""
import hmac
import json
import logging

import routes
import webob
import webob.dec

from virtualwire import ids
from virtualwire.engine import ApiError
from virtualwire.openapi import openapi_document

LOG = logging.getLogger(__name__)
MAX_BODY = 64 * 1024


def _json(status, doc):
    return webob.Response(status=status, charset='utf-8',
                          content_type='application/json',
                          body=(json.dumps(doc, indent=1) + '\n')
                          .encode())


def error(status, message):
    return _json(status, {'error': {'status': status, 'message': message}})


class RestApi:
    def __init__(self, engine, token):
        self.engine = engine
        self.token = token
        m = routes.Mapper()
        get, post, delete = (dict(method=['GET']), dict(method=['POST']),
                             dict(method=['DELETE']))
        m.connect('/v1/openapi.json', action='openapi', conditions=get)
        m.connect('/v1/status', action='status', conditions=get)
        m.connect('/v1/hosts', action='list_hosts', conditions=get)
        m.connect('/v1/hosts/{name}', action='show_host', conditions=get)
        m.connect('/v1/vnics', action='list_vnics', conditions=get)
        m.connect('/v1/vnics/{vnic_id}', action='show_vnic', conditions=get)
        m.connect('/v1/wires', action='list_wires', conditions=get)
        m.connect('/v1/wires', action='connect', conditions=post)
        m.connect('/v1/wires/{wire_id}', action='show_wire', conditions=get)
        m.connect('/v1/wires/{wire_id}', action='disconnect',
                  conditions=delete)
        m.connect('/v1/wires/{wire_id}/stats', action='wire_stats',
                  conditions=get)
        m.connect('/v1/migrations', action='list_migrations', conditions=get)
        m.connect('/v1/migrations', action='announce_migration',
                  conditions=post)
        m.connect('/v1/migrations/{vm_uuid}/released',
                  action='migration_released', conditions=post)
        self.mapper = m

    @webob.dec.wsgify
    def __call__(self, req):
        try:
            match = self.mapper.match(environ=req.environ)
            if match is None:
                if self.mapper.match(req.path_info):
                    return error(405, 'method %s not allowed on %s'
                                 % (req.method, req.path_info))
                return error(404, 'no such resource: %s' % req.path_info)
            action = match.pop('action')
            match.pop('controller', None)
            if action != 'openapi' and not self._authorized(req):
                resp = error(401, 'missing or wrong bearer token')
                resp.headers['WWW-Authenticate'] = 'Bearer'
                return resp
            return getattr(self, action)(req, **match)
        except ApiError as e:
            return error(e.status, e.message)
        except ids.InvalidId as e:
            return error(422, str(e))
        except Exception:
            LOG.exception('internal error on %s %s', req.method, req.path)
            return error(500, 'internal error; see the controller log')

    def _authorized(self, req):
        auth = req.headers.get('Authorization', '')
        if not auth.startswith('Bearer '):
            return False
        return hmac.compare_digest(auth[7:].strip().encode(),
                                   self.token.encode())

    @staticmethod
    def _body(req):
        if req.content_length is not None and req.content_length > MAX_BODY:
            raise ApiError(413, 'request body over %d bytes' % MAX_BODY)
        raw = req.body_file.read(MAX_BODY + 1)
        if len(raw) > MAX_BODY:
            raise ApiError(413, 'request body over %d bytes' % MAX_BODY)
        try:
            doc = json.loads(raw or b'null')
        except (ValueError, UnicodeDecodeError) as e:
            raise ApiError(400, 'body is not valid JSON: %s' % e)
        if not isinstance(doc, dict):
            raise ApiError(400, 'body must be a JSON object')
        return doc

    # ---- handlers --------------------------------------------------------
    def openapi(self, req):
        return _json(200, openapi_document())

    def status(self, req):
        e = self.engine
        return _json(200, {
            'switches_connected': len(e.dps),
            'hosts': len(e.world().hosts),
            'wires': len(e.wires),
            'counters': dict(e.stats)})

    def _host_view(self, h):
        conn = self.engine.dps.get(h.dpid)
        warnings = []
        if h.underlay_mtu and h.underlay_mtu < 1500 + 14 + 4 + 28:
            warnings.append('underlay MTU %d is below 1546: full-size '
                            'guest frames cannot cross wires' % h.underlay_mtu)
        if not h.tunnel_ofport:
            warnings.append('no tunnel port on the integration bridge')
        return {'name': h.name, 'dpid': '%016x' % h.dpid,
                'tunnel_ip': h.tunnel_ip, 'site': h.site,
                'connected': conn is not None,
                'synced': bool(conn and conn.installed is not None),
                # When the switch last confirmed (barrier reply) every flow
                # change we sent it: the moment they were all in place.
                'flows_confirmed_at': conn.confirmed_at if conn else None,
                'datapath_type': h.datapath_type,
                'underlay_mtu': h.underlay_mtu,
                'vnics': len(h.vnics), 'warnings': warnings}

    def list_hosts(self, req):
        hosts = self.engine.world().hosts
        return _json(200, {'hosts': [self._host_view(hosts[n])
                                     for n in sorted(hosts)]})

    def show_host(self, req, name):
        h = self.engine.world().hosts.get(name)
        if h is None:
            raise ApiError(404, 'no host named %s' % name)
        return _json(200, self._host_view(h))

    def _vnics(self):
        """Every plugged vNIC, once, on the host its traffic goes to (the
        incumbent, while a migration has it plugged on two)."""
        world = self.engine.world()
        wired = world.wire_of_vnic()
        out = {}
        for vid, loc in sorted(world.locations().items()):
            v = next(x for x in world.hosts[loc.host].vnics
                     if x.vnic_id == vid)
            cid = wired.get(vid)
            out[vid] = {
                'id': vid, 'host': loc.host, 'port': v.port_name,
                'ofport': v.ofport, 'mac': v.mac, 'vm_id': v.vm_id,
                'wire': ids.fmt_connector(cid) if cid else None}
        return out

    def list_vnics(self, req):
        return _json(200, {'vnics': list(self._vnics().values())})

    def show_vnic(self, req, vnic_id):
        ids.check_vnic_id(vnic_id)
        v = self._vnics().get(vnic_id)
        if v is None:
            raise ApiError(404, 'no vNIC %s is plugged on any host' % vnic_id)
        return _json(200, v)

    def list_wires(self, req):
        return _json(200, {'wires': [
            self.engine.wire_view(w)
            for _, w in sorted(self.engine.wires.items())]})

    def connect(self, req):
        doc = self._body(req)
        missing = [k for k in ('a', 'b') if k not in doc]
        if missing:
            raise ApiError(400, 'missing field(s): %s (expected {"a": '
                           'vNIC id, "b": vNIC id})' % ', '.join(missing))
        unknown = sorted(set(doc) - {'a', 'b'})
        if unknown:
            raise ApiError(400, 'unknown field(s): %s' % ', '.join(unknown))
        wire = self.engine.connect(doc['a'], doc['b'])
        resp = _json(201, self.engine.wire_view(wire))
        resp.headers['Location'] = '/v1/wires/%d' % wire.connector_id
        return resp

    def show_wire(self, req, wire_id):
        wire = self.engine.get_wire(ids.parse_connector_id(wire_id))
        return _json(200, self.engine.wire_view(wire))

    def disconnect(self, req, wire_id):
        self.engine.disconnect(ids.parse_connector_id(wire_id))
        return webob.Response(status=204)

    def list_migrations(self, req):
        return _json(200, {'migrations': [
            m.view() for m in self.engine.migrations.all()]})

    def announce_migration(self, req):
        return _json(201, self.engine.announce_migration(
            self._body(req)).view())

    def migration_released(self, req, vm_uuid):
        doc = self._body(req)
        if set(doc) != {'host'} or not isinstance(doc['host'], str):
            raise ApiError(400, 'body must be {"host": host name}')
        m = self.engine.migration_released(vm_uuid, doc['host'])
        return _json(200, {'migration': m.view() if m else None})

    def wire_stats(self, req, wire_id):
        try:
            return _json(200, self.engine.wire_stats(
                ids.parse_connector_id(wire_id)))
        except TimeoutError as e:
            raise ApiError(504, str(e))
