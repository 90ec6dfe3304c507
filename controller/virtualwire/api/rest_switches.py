"""REST handlers of provider switches (a part of `RestApi`; issue 41):
list, show, create, delete, place on a host, split, and advise where it
should run. A switch's ports are
wire ends (`sw:NAME/PORT`): wires are plugged into them with
`POST /v1/wires` like any other end.

A tenant's credential sees and makes only its own tenant's switches
(another's reads as none), and never names or sees a host: where a
switch runs is the cloud's (the host with most of the tenant's vNICs,
unless the operator says). A switch with wires still plugged in is not
deleted: unplug them first, so no wire is left pointing nowhere."""
from typing import Any

import webob

from virtualwire.api.controller_port import ControllerPort
from virtualwire.api.render import json_response, read_json_object
from virtualwire.core import errors, ids, switch_advice, tenancy
from virtualwire.core.switches import (IDLE_TIMEOUT, MAC_LIMIT, PORTS_MAX,
                                       check_host, check_name)

FIELDS = ('name', 'ports', 'host', 'tenant', 'mac_limit', 'idle_timeout')
HIDDEN_FROM_TENANTS = ('host', 'placed', 'parts')
READ_TIMEOUT = 5.0         # s: a connected switch answers in milliseconds


def _scope(req):
    return req.environ.get('virtualwire.scope')


def parse_create(doc):
    """(name, ports, host or None, tenant or None, mac_limit,
    idle_timeout) of a `POST /v1/switches` body."""
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise errors.Malformed('unknown field(s): %s (expected %s)'
                               % (', '.join(unknown), ', '.join(FIELDS)))
    for k in ('name', 'ports'):
        if k not in doc:
            raise errors.Malformed('missing field: %s' % k)
    name = check_name(doc['name'])
    ports = doc['ports']
    if isinstance(ports, int) and not isinstance(ports, bool):
        if not 1 <= ports <= PORTS_MAX:
            raise errors.Invalid('ports: 1-%d, got %d' % (PORTS_MAX, ports))
        ports = ['p%d' % i for i in range(1, ports + 1)]
    if not isinstance(ports, list) or not ports:
        raise errors.Invalid('ports must be a count or a list of port '
                             'names, got %r' % (ports,))
    host = doc.get('host')
    if host is not None:
        check_host(host)
    tenant = doc.get('tenant')
    if tenant is not None:
        tenancy.check_name(tenant)
    limits = []
    for k, default in (('mac_limit', MAC_LIMIT),
                       ('idle_timeout', IDLE_TIMEOUT)):
        v = doc.get(k, default)
        if isinstance(v, bool) or not isinstance(v, int):
            raise errors.Invalid('%s must be a whole number, got %r'
                                 % (k, v))
        limits.append(v)
    return name, ports, host, tenant, limits[0], limits[1]


def auto_parts(view):
    """{port: host}: each plugged port on its other end's host (the
    others on the switch's)."""
    return {p['name']: p['peer_host'] for p in view['ports']
            if p['peer_host'] and p['peer_host'] != view['host']}


def check_mesh_ids(sw, wires):
    """Refuse to split a switch while a user's wire holds one of the
    connector ids its mesh would use (drawn before the range was
    reserved): two wires with one tunnel key between the same hosts."""
    taken = sorted(c for c in wires if c >= ids.MESH_CONNECTOR_BASE and
                   (c - ids.MESH_CONNECTOR_BASE) >> 12 == sw.number)
    if taken:
        raise errors.Conflict('wire %s holds a connector id reserved for '
                              'the mesh of switch %s: delete or remake it '
                              'first' % (ids.fmt_connector(taken[0]),
                                         sw.name))


def _for_tenant(view):
    """A switch's view without what is the cloud's: its host, and where
    each port's other end runs."""
    out = {k: v for k, v in view.items() if k not in HIDDEN_FROM_TENANTS}
    out['ports'] = [{k: v for k, v in p.items()
                     if k not in ('peer_host', 'part')}
                    for p in view['ports']]
    return out


class SwitchHandlers:
    ctl: ControllerPort
    intent: Any

    def _call(self, fn, *args) -> Any: ...

    def _visible_switch(self, req, name):
        """The switch's view, once it is known this caller may see it (a
        tenant's 404 for another's switch reads as for none)."""
        check_name(name)
        view = self._call(self.ctl.views.switch_views, name)[0]
        scope = _scope(req)
        if scope is None:
            return view
        if view['tenant'] != scope.tenant:
            raise errors.NotFound('no switch named %s' % name)
        return _for_tenant(view)

    def _apply_switches(self):
        """The database's switches applied on this instance before it
        answers (the others follow within a second: SwitchWatch)."""
        self._call(self.ctl.on_switches, self.intent.switches.switches())

    def list_switches(self, req):
        scope = _scope(req)
        views = self._call(self.ctl.views.switch_views)
        if scope is not None:
            views = [_for_tenant(v) for v in views
                     if v['tenant'] == scope.tenant]
        return json_response(200, {'switches': views})

    def show_switch(self, req, name):
        """The switch, its ports' counters (the collector's, as listed),
        and each port's figures as its OVS counts them now, with the MACs
        learned there (`figures_error` if its host cannot say)."""
        view = self._visible_switch(req, name)
        try:
            figs = self._call(self.ctl.provider_switches.read,
                              name).result(READ_TIMEOUT)
        except (errors.Unavailable, TimeoutError) as e:
            view['figures_error'] = str(e) if _scope(req) is None else \
                "the switch's host cannot be read now"
        else:
            for p in view['ports']:
                p.update(figs.get(p['name'], {}))
        return json_response(200, view)

    def create_switch(self, req):
        name, ports, host, tenant, mac_limit, idle = parse_create(
            read_json_object(req))
        scope = _scope(req)
        if scope is not None:
            if host is not None:
                raise errors.Refused('where a switch runs is the cloud\'s '
                                     'choice: leave out host')
            if tenant not in (None, scope.tenant):
                raise errors.NotFound('no tenant %s' % tenant)
            tenant = scope.tenant
        if tenant is None:
            raise errors.Malformed('missing field: tenant (the tenant whose '
                                   'vNICs the switch joins)')
        if host is None:
            owners = self.intent.ownership.owners()
            host = self._call(self.ctl.provider_switches.suggest_host,
                              sorted(v for v, t in owners.items()
                                     if t == tenant))
        sw = self.intent.switches.create(name, tenant, host, ports,
                                         mac_limit, idle)
        self._apply_switches()
        resp = json_response(201, self._visible_switch(req, sw.name))
        resp.headers['Location'] = '/v1/switches/%s' % sw.name
        return resp

    def delete_switch(self, req, name):
        view = self._visible_switch(req, name)
        wired = [p for p in view['ports'] if p['wire']]
        if wired:
            raise errors.Conflict('switch %s still has %d wire(s) plugged '
                                  'in (%s): disconnect them first' % (
                                      name, len(wired), ', '.join(
                                          '%s: %s' % (p['name'],
                                                      ids.fmt_connector(
                                                          p['wire']))
                                          for p in wired)))
        self.intent.switches.delete(name)
        self._apply_switches()
        return webob.Response(status=204)

    def split_switch(self, req, name):
        """Split a switch (the paper's 3.5): {"auto": true} puts each
        plugged port on a part on its other end's host (a tenant may ask
        this of its own switch: the cloud says where); the operator may
        name {"parts": {PORT: HOST}} (the others stay on the switch's
        host; {} joins it again). The parts are joined by a mesh of wires
        with reserved connector ids."""
        doc = read_json_object(req)
        self._visible_switch(req, name)          # 404 if not the caller's
        view = self._call(self.ctl.views.switch_views, name)[0]
        if set(doc) == {'auto'} and doc['auto'] is True:
            parts = auto_parts(view)
        elif set(doc) == {'parts'} and isinstance(doc['parts'], dict):
            if _scope(req) is not None:
                raise errors.Refused('where a switch\'s parts run is the '
                                     'cloud\'s choice: ask for {"auto": '
                                     'true}')
            parts = {str(p): check_host(h) for p, h in doc['parts'].items()
                     if h != view['host']}
        else:
            raise errors.Malformed('body must be {"parts": {PORT: HOST}} or '
                                   '{"auto": true}')
        unknown = sorted(set(parts) - {p['name'] for p in view['ports']})
        if unknown:
            raise errors.NotFound('switch %s has no port %s (its ports: %s)'
                                  % (name, ', '.join(unknown), ', '.join(
                                      p['name'] for p in view['ports'])))
        sw = self.intent.switches.get(name)
        check_mesh_ids(sw, self.intent.wires())
        self.intent.switches.split(name, parts)
        self._apply_switches()
        return json_response(200, self._visible_switch(req, name))

    def place_switch(self, req, name):
        """The operator moves a switch's flows to another host (its wires
        follow, make-before-break, with the MACs it learned:
        `control.switch_moves`)."""
        doc = read_json_object(req)
        if set(doc) != {'host'}:
            raise errors.Malformed('body must be {"host": name}')
        check_host(doc['host'])
        self._visible_switch(req, name)
        self.intent.switches.place(name, doc['host'])
        self._apply_switches()
        return json_response(200, self._visible_switch(req, name))

    def advise_switch(self, req, name):
        """Where the switch should run by its ports' traffic over the
        collector's window (`core.switch_advice`): the operator's to act
        on (PUT .../host; `vwctl switch move NAME --advised`). It names
        hosts, so no tenant reads it."""
        if _scope(req) is not None:
            raise errors.Refused('where a switch runs is the cloud\'s '
                                 'choice')
        view = self._visible_switch(req, name)
        cids = [p['wire'] for p in view['ports'] if p['wire'] is not None]
        wires = self._call(self.ctl.views.wires_with_rates, cids)
        return json_response(200, switch_advice.advise(
            view, {cid: w['bits_per_second'] for cid, w in wires.items()}))
