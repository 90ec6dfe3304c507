"""REST handlers of topologies and guests (a part of `RestApi`): thin.
The file is read and planned by `core.topology_file` / `core.topology_plan`,
written by `store.topologies` in one transaction, shown by
`core.topology_view` and drawn by `core.topology_graph`.

A topology belongs to a tenant: a tenant's credential names its own
(`/v1/topologies/NAME`); the operator names a tenant's with `?tenant=T`
(without it, the operator's own, which may wire any vNIC). A tenant's
file is resolved as that tenant sees the deployment, whoever applies it:
the operator applying it cannot wire another tenant's vNIC into it.
"""
import dataclasses
from typing import Any, Callable

import webob

from virtualwire.api.controller_port import ControllerPort
from virtualwire.api.render import error, json_response, read_json_object
from virtualwire.api.rest_switches import check_mesh_ids
from virtualwire.api.rest_wires import wait_args
from virtualwire.api.topology_parsing import TopologyParser, check_quota
from virtualwire.store import wire_writes
from virtualwire.core import (errors, ids, tenancy, topology_file,
                              topology_graph, topology_plan, topology_switches,
                              topology_view)

MAX_SOURCE_BODY = topology_file.MAX_SOURCE + 64 * 1024


def _query(req, allowed):
    unknown = sorted(set(req.GET) - set(allowed))
    if unknown:
        raise errors.Invalid('unknown query parameter(s): %s (%s)' % (
            ', '.join(unknown), ', '.join(allowed)))


def file_error(e):
    """422 naming the line (also as a field, for tools)."""
    resp = error(422, e.message)
    doc = resp.json
    doc['error']['line'] = e.line
    return json_response(422, doc)


class TopologyHandlers:
    ctl: ControllerPort
    intent: Any
    topology_parser: TopologyParser

    def _call(self, fn, *args):
        raise NotImplementedError

    def _programmed(self, seconds, req):
        raise NotImplementedError

    # SwitchHandlers': the database's switches applied before answering.
    _apply_switches: Callable[[], None]

    # -- whose ------------------------------------------------------------------
    def _tenant(self, req):
        """(tenant name or '', Scope or None) the request is about."""
        scope = req.environ.get('virtualwire.scope')
        if scope is not None:
            if 'tenant' in req.GET and \
                    tenancy.check_name(req.GET['tenant']) != scope.tenant:
                raise errors.NotFound('no tenant %s' % req.GET['tenant'])
            return scope.tenant, scope
        if 'tenant' not in req.GET:
            return '', None
        tenant = tenancy.check_name(req.GET['tenant'])
        return tenant, tenancy.Scope(tenant,
                                     self.intent.ownership.end_owners())

    def _record(self, req, name):
        tenancy.check_name(name)
        tenant, scope = self._tenant(req)
        rec = self.intent.topologies.record(tenant, name)
        if rec is None:
            raise errors.NotFound('no topology %s%s' % (
                name, ' of tenant %s' % tenant if tenant else ''))
        return self._seen(rec, scope)

    def _seen(self, rec, scope):
        """The record as `scope` sees it: a wire one of whose vNICs has
        since gone to another tenant is no longer this tenant's to show,
        count or delete (review point 11)."""
        if rec is None or scope is None:
            return rec
        wires = self.intent.wires()
        keep = {k: c for k, c in rec.wires.items()
                if c in wires and scope.sees_wire(*wires[c].ends())}
        nics = {k: v for k, v in rec.resolved.items()
                if ':' not in k or scope.sees_vnic(v)}
        if keep == rec.wires and nics == rec.resolved:
            return rec
        return dataclasses.replace(rec, wires=keep, resolved=nics)

    # -- reads ------------------------------------------------------------------
    def list_topologies(self, req):
        _query(req, ('tenant',))
        tenant, scope = self._tenant(req)
        recs = [self._seen(r, scope) for r in self.intent.topologies.records(
            tenant if (scope or tenant) else None)]
        cids = [c for r in recs for c in r.wires.values()]
        wires = self._call(self.ctl.views.wires_with_rates, cids)
        out = []
        for r in recs:
            try:
                tf = self.topology_parser.parse(r.source)
            except errors.VwError:
                tf = None
            out.append(topology_view.summary(r, tf, wires))
        return json_response(200, {'topologies': out})

    def _view(self, rec, scope):
        tf = self.topology_parser.parse(rec.source, rec.name)
        wires = self._call(self.ctl.views.wires_with_rates,
                           list(rec.wires.values()))
        # Where its provider switches run is the cloud's, not a tenant's:
        # a tenant sees only that one is split, and which ports share a
        # part.
        places = topology_view.switch_places(
            self._call(self.ctl.provider_switches.views), scope is not None)
        return topology_view.inspect(rec, tf, wires,
                                     self._call(self.ctl.views.vnic_views),
                                     places)

    def show_topology(self, req, name):
        _query(req, ('tenant',))
        rec = self._record(req, name)
        view = self._view(rec, req.environ.get('virtualwire.scope'))
        view['source'] = rec.source
        return json_response(200, view)

    def topology_graph(self, req, name):
        _query(req, ('tenant',))
        body = topology_graph.svg(self._view(
            self._record(req, name), req.environ.get('virtualwire.scope')))
        resp = webob.Response(status=200, body=body.encode())
        resp.headers['Content-Type'] = 'image/svg+xml; charset=utf-8'
        # The picture holds the tenant's data: a browser must not run it as
        # a page of ours nor keep it.
        resp.headers['Content-Security-Policy'] = "default-src 'none'"
        resp.headers['Cache-Control'] = 'no-store'
        return resp

    def topology_schema(self, req):
        return json_response(200, topology_file.schema())

    # -- apply / destroy -----------------------------------------------------
    def apply_topology(self, req, name):
        _query(req, ('tenant', 'wait', 'timeout'))
        tenancy.check_name(name)
        doc = read_json_object(req, MAX_SOURCE_BODY)
        unknown = sorted(set(doc) - {'source', 'dry_run'})
        if unknown or 'source' not in doc:
            raise errors.Malformed('body must be {"source": the file\'s text '
                                   '(YAML or JSON), "dry_run": optional '
                                   'boolean}%s' % (' (unknown: %s)' % ', '
                                                   .join(unknown) if unknown
                                                   else ''))
        dry = doc.get('dry_run', False)
        if not isinstance(dry, bool):
            raise errors.Malformed('dry_run must be true or false')
        seconds = wait_args(_only(req, ('wait', 'timeout')))
        tenant, scope = self._tenant(req)
        if not dry and isinstance(doc['source'], str):   # before the cost
            check_quota(self.intent.topologies.records(tenant), tenant, name,
                        doc['source'])
        try:
            tf = self.topology_parser.parse(doc['source'], 'topology')
            if tf.name != name:
                raise topology_file.FileError(
                    'the file is topology %r, not %r' % (tf.name, name),
                    None, 'topology')
            plan, resolved, before = self._plan(tf, scope)
            switches = topology_switches.plan(
                resolved, tenant, self.intent.switches.switches(), before)
        except topology_file.FileError as e:
            return file_error(e)
        out = {'name': name, 'tenant': tenant or None, 'dry_run': dry,
               'plan': dict(plan.view(), switches=switches.view(resolved)),
               'changed': False}
        if dry:
            return json_response(200, out)
        mapping = switches.mapping(resolved)
        if before is not None and plan.changes == 0 and \
                not switches.create and not switches.delete and \
                before.source == doc['source'] and \
                before.resolved == mapping:
            out['generation'] = before.generation   # nothing to write
            return json_response(200, out)
        if switches.create:          # before the wires plugged into them
            topology_switches.make(switches, resolved, tenant,
                                   self.intent.switches,
                                   lambda v: self._switch_host(tenant, v))
            self._apply_switches()
        links = self.intent.topologies.apply(tenant, name, doc['source'],
                                             plan, mapping, before,
                                             wire_writes.now())
        self._remove_switches(switches.delete)
        self._split_switches(switches, resolved)
        out.update(changed=True, generation=(before.generation
                                             if before else 0) + 1,
                   wires={k: ids.fmt_connector(c) for k, c in links.items()})
        if seconds is not None and plan.changes:
            out['programmed'] = self._programmed(seconds, req)
        return json_response(201 if before is None else 200, out)

    def _plan(self, tf, scope):
        visible = scope.sees_vnic if scope is not None else (lambda v: True)
        inv = topology_plan.Inventory(
            self.intent.topologies.guests(),
            self._call(self.ctl.views.vnic_views), visible)
        resolved = topology_plan.resolve(tf, inv)
        before = self._seen(self.intent.topologies.record(
            scope.tenant if scope else '', tf.name), scope)
        wires = {c: w.ends() for c, w in self.intent.wires().items()}
        by_vnic = {v: c for c, e in wires.items() for v in e}

        def taken(vnic, cid):
            if scope is not None:
                return scope.taken(vnic, (cid,) + tuple(wires[cid]))
            return errors.Conflict('vNIC %s is already wired (connector %s)'
                                   % (vnic, ids.fmt_connector(cid)))
        plan = topology_plan.plan(resolved, before.wires if before else {},
                                  wires, by_vnic, taken)
        return plan, resolved, before

    def _switch_host(self, tenant, vnics):
        """Where a topology's new switch runs: the host with most of the
        vNICs linked to it (of all the tenant's, if none is)."""
        if not vnics:
            vnics = sorted(v for v, t in self.intent.ownership.owners()
                           .items() if t == tenant)
        return self._call(self.ctl.provider_switches.suggest_host, vnics)

    def _split_switches(self, plan, resolved):
        """The topology's switches split as their nodes say (a part where
        each linked vNIC runs), or joined."""
        nodes = topology_switches.mine(plan)
        if not nodes:
            return
        hosts = {v: view['host'] for v, view in
                 self._call(self.ctl.views.vnic_views).items()}
        changed = False
        for node_name in nodes:
            node = resolved.file.nodes[node_name]
            sw = self.intent.switches.get(node.switch)
            if sw is None:
                continue
            want = topology_switches.parts_for(
                resolved, node_name, sw.host, hosts) if node.split else {}
            if dict(sw.parts) != want:
                check_mesh_ids(sw, self.intent.wires())
                self.intent.switches.split(sw.name, want)
                changed = True
        if changed:
            self._apply_switches()

    def _remove_switches(self, names):
        if names and topology_switches.remove(names, self.intent.switches,
                                              self.intent.wires()):
            self._apply_switches()

    def destroy_topology(self, req, name):
        _query(req, ('tenant', 'wait', 'timeout'))
        seconds = wait_args(_only(req, ('wait', 'timeout')))
        rec = self._record(req, name)
        gone = self.intent.topologies.destroy(rec)
        self._remove_switches(sorted(topology_switches.owned(rec)))
        out = {'name': name, 'tenant': rec.tenant or None,
               'deleted': [ids.fmt_connector(c) for c in gone]}
        if seconds is not None and gone:
            out['programmed'] = self._programmed(seconds, req)
        return json_response(200, out)

    # -- guests (the libvirt hook) ----------------------------------------------
    def report_guest(self, req, vm_uuid):
        doc = read_json_object(req)
        guest = topology_plan.parse_guest(vm_uuid, doc)
        who = req.environ.get('virtualwire.principal')
        if isinstance(who, tuple) and who[0] == 'hypervisor':
            self._may_replace_guest(guest)
        self.intent.topologies.report_guest(guest, wire_writes.now())
        return json_response(200, {'uuid': guest.uuid, 'name': guest.name,
                                   'host': guest.host,
                                   'nics': len(guest.nics)})

    def _may_replace_guest(self, guest):
        """A hypervisor replaces only its own guests' records, or those of
        guests that moved to it (`topology_plan.guest_move_refusal`)."""
        old = self.intent.topologies.guest(guest.uuid)
        if old is None or old.host == guest.host:
            return
        moving = {m['destination'] for m in self._call(
            self.ctl.views.migration_views) if m['vm_uuid'] == guest.uuid}
        plugged = {v: view['host'] for v, view in
                   self._call(self.ctl.views.vnic_views).items()
                   if v in old.vnics()}
        why = topology_plan.guest_move_refusal(old, guest.host, moving,
                                               plugged)
        if why is not None:
            raise errors.Refused(why)

    def list_guests(self, req):
        _query(req, ())
        scope = req.environ.get('virtualwire.scope')
        inv = topology_plan.Inventory(
            self.intent.topologies.guests(), {},
            scope.sees_vnic if scope else (lambda v: True))
        return json_response(200, {'guests': [
            {'uuid': g.uuid, 'name': g.name, 'host': g.host,
             'nics': [n.__dict__ for n in g.nics]}
            for g in inv.guests if scope is None or inv.guest_visible(g)]})


class _only:
    """The request's query reduced to `keys` (for a parser of those)."""

    def __init__(self, req, keys):
        self.GET = {k: v for k, v in req.GET.items() if k in keys}
