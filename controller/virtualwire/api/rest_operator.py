"""REST handlers of the operator's own business (a part of `RestApi`):
scoped credentials, tenants' vNICs, the cloud's word on where vNICs run,
the audit log and the intent database's safe start. Only the operator's
token reaches them (`core.credentials.refusal`), but for a reader's GET
/v1/tenants and an orchestrator's placements."""
import time
from typing import Any

import webob

from virtualwire.api.controller_port import ControllerPort
from virtualwire.api.render import json_response, read_json_object
from virtualwire.core import credentials, errors, ids, tenancy


class OperatorHandlers:
    intent: Any
    audit_log: Any
    ctl: ControllerPort

    def _call(self, fn, *args):
        raise NotImplementedError

    def list_credentials(self, req):
        return json_response(200, {'credentials':
                                   self.intent.credentials.list()})

    def issue_credential(self, req):
        role, name, lifetime = credentials.parse_request(
            read_json_object(req))
        token, created, expires = self.intent.credentials.issue(
            role, name, lifetime)
        return json_response(201, {'role': role, 'name': name,
                                   'token': token, 'created_at': created,
                                   'expires_at': expires})

    def revoke_credential(self, req, role, name):
        role, name = credentials.check(role, name)
        if not self.intent.credentials.revoke(role, name):
            raise errors.NotFound('no %s credential for %s' % (role, name))
        return webob.Response(status=204)

    def revoke_host(self, req, name):
        """Take back a host's certificates: one, by fingerprint, or every
        one it had (and its hypervisor and extender tokens). Connected
        switches presenting one are hung up within a second."""
        credentials.check('hypervisor', name)
        doc = read_json_object(req, 1024) if req.body else {}
        extra = set(doc) - {'certificate', 'reason'}
        if extra:
            raise errors.Invalid('unknown field(s): %s; the body is '
                                 '{"certificate": SHA256, "reason": TEXT}, '
                                 'both optional' % ', '.join(sorted(extra)))
        reason = doc.get('reason', 'revoked by the operator')
        if not isinstance(reason, str) or not 0 < len(reason) <= 200:
            raise errors.Invalid('reason must be a string of 1 to 200 '
                                 'characters')
        fp = doc.get('certificate')
        revs = self.intent.revocations
        if 'certificate' in doc:
            if not isinstance(fp, str):
                raise errors.Invalid('certificate must be a SHA-256 '
                                     'fingerprint (hex)')
            entry = revs.revoke_certificate(name, fp, reason)
            tokens = []
        else:
            entry = revs.revoke_host(name, reason)
            tokens = [role for role in ('hypervisor', 'extender')
                      if self.intent.credentials.revoke(role, name)]
        return json_response(200, dict(entry, tokens_revoked=tokens))

    def list_revocations(self, req):
        return json_response(200, {
            'revocations': self.intent.revocations.entries()})

    def list_tenants(self, req):
        return json_response(200, {'tenants': tenancy.tenants_view(
            self.intent.ownership.owners(), self.intent.credentials.list())})

    def assign_tenant(self, req, vnic_id):
        ids.check_vnic_id(vnic_id)
        tenant = tenancy.parse_assignment(read_json_object(req))
        at = self.intent.ownership.assign(vnic_id, tenant)
        return json_response(200, {'vnic': vnic_id, 'tenant': tenant,
                                   'assigned_at': at})

    def release_tenant(self, req, vnic_id):
        if not self.intent.ownership.release(vnic_id):
            raise errors.NotFound('vNIC %s has no tenant' % vnic_id)
        return webob.Response(status=204)

    def place_vnic(self, req, vnic_id):
        ids.check_vnic_id(vnic_id)
        doc = read_json_object(req, 1024)
        if set(doc) != {'host'}:
            raise errors.Invalid('the body is {"host": "NAME"}')
        who = req.environ.get('virtualwire.principal')
        by = 'operator' if not isinstance(who, tuple) else ' '.join(who)
        word = self.intent.placements.place(vnic_id, doc['host'], by,
                                            time.time())
        # In force on this instance before the answer (the others follow
        # the database within a second: control.cloud_word).
        self._call(self.ctl.on_words, {vnic_id: word})
        return json_response(200, {'vnic': vnic_id, 'host': word.host,
                                   'previous': word.previous})

    def unplace_vnic(self, req, vnic_id):
        ids.check_vnic_id(vnic_id)
        if not self.intent.placements.forget(vnic_id):
            raise errors.NotFound('the cloud has not placed vNIC %s'
                                  % vnic_id)
        self._call(self.ctl.on_words, {vnic_id: None})
        return webob.Response(status=204)

    def audit(self, req):
        unknown = sorted(set(req.GET) - {'limit'})
        if unknown:
            raise errors.Invalid('unknown query parameter(s): %s (only '
                                 'limit)' % ', '.join(unknown))
        raw = req.GET.get('limit', '100')
        if not raw.isdigit() or not 1 <= int(raw) <= 1000:
            raise errors.Invalid('limit must be 1 to 1000, got %r' % raw)
        return json_response(200, self.audit_log.view(int(raw)))

    def orphans(self, req):
        return json_response(200, self._call(self.ctl.safe_start.view))

    def release_orphans(self, req):
        """The operator says the intent database is right (safe_start)."""
        view = self._call(self.ctl.safe_start.release)
        return json_response(200, dict(view, released=True))
