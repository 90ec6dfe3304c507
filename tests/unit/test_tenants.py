"""Tenants at the REST edge (fake fabric): the operator assigns vNICs; a
tenant's credential lists, wires, disconnects and reads stats and
metrics of its own only; another tenant's objects answer exactly as
nonexistent ones (every OpenAPI operation tried); nothing changes; every
change asked for is in the audit log."""
import json
import os
import time
import uuid

import pytest
import webob

from virtualwire.api.audit import AuditLog
from virtualwire.api.openapi import openapi_document
from virtualwire.api.rest import RestApi
from virtualwire.api.rate_limit import RateLimits
from virtualwire.testing import isolation
from virtualwire.testing.harness import Harness

ADMIN = 'operator-token'
VM_B = str(uuid.uuid4())


@pytest.fixture
def api(tmp_path):
    h = Harness()
    h.host('h1', ('acme-web', 1), ('acme-db', 2), ('acme-spare', 3))
    h.host('h2', ('globex-fw', 1), ('globex-app', 2), vm=VM_B)
    log = AuditLog(str(tmp_path / 'audit.log'))
    rest = RestApi(h.loop, h.ctl, h.intent, h.runtime, ADMIN, log)
    # The probe makes hundreds of calls at once; the limit per credential
    # has its own tests (test_credential_limits).
    rest.rate_limits = RateLimits(rate=1e9, burst=1e9)

    def call(method, path, body=None, token=ADMIN):
        req = webob.Request.blank(path, method=method,
                                  remote_addr='192.0.2.7')
        if token:
            req.headers['Authorization'] = 'Bearer ' + token
        if body is not None:
            req.body = json.dumps(body).encode()
        resp = req.get_response(rest)
        return resp.status_int, resp.text
    call.h, call.log = h, log
    stop = h.run_threads()
    for v in ('acme-web', 'acme-db', 'acme-spare'):
        assert call('PUT', '/v1/vnics/%s/tenant' % v,
                    {'tenant': 'acme'})[0] == 200
    for v in ('globex-fw', 'globex-app'):
        assert call('PUT', '/v1/vnics/%s/tenant' % v,
                    {'tenant': 'globex'})[0] == 200
    yield call
    stop()


def token(api, role, name):
    status, text = api('POST', '/v1/credentials', {'role': role,
                                                   'name': name})
    assert status == 201, text
    return json.loads(text)['token']


def doc(answer):
    status, text = answer
    return status, json.loads(text)


def test_a_tenant_wires_lists_and_disconnects_only_its_own(api):
    acme = token(api, 'tenant', 'acme')
    status, wire = doc(api('POST', '/v1/wires', {'a': 'acme-web',
                                                 'b': 'acme-db'}, acme))
    assert status == 201 and wire['state'] == 'collapsed'
    status, other = doc(api('POST', '/v1/wires', {'a': 'globex-fw',
                                                  'b': 'globex-app'}))
    assert status == 201
    assert [w['id'] for w in doc(api('GET', '/v1/wires', token=acme))[1][
        'wires']] == [wire['id']]
    assert sorted(v['id'] for v in doc(api('GET', '/v1/vnics', token=acme))[
        1]['vnics']) == ['acme-db', 'acme-spare', 'acme-web']
    api.h.loop.post(api.h.ctl.collector.poll)    # a first reading
    for _ in range(500):
        status, stats = doc(api('GET', '/v1/stats', token=acme))
        if status == 200:
            break
        time.sleep(0.01)
    assert [w['id'] for w in stats['wires']] == [wire['id']]
    status, text = api('GET', '/metrics', token=acme)
    assert status == 200 and wire['connector_id'] in text
    assert other['connector_id'] not in text
    assert 'virtualwire_host_' not in text and 'globex' not in text
    # The operator sees both, with whose each vNIC is.
    vnics = doc(api('GET', '/v1/vnics'))[1]['vnics']
    assert {v['id']: v['tenant'] for v in vnics}['globex-fw'] == 'globex'
    assert api('DELETE', '/v1/wires/%d' % wire['id'], token=acme)[0] == 204
    assert doc(api('GET', '/v1/wires'))[1]['wires'][0]['id'] == other['id']


def test_another_tenants_objects_answer_as_nonexistent_ones(api):
    acme = token(api, 'tenant', 'acme')
    status, wire = doc(api('POST', '/v1/wires', {'a': 'globex-fw',
                                                 'b': 'globex-app'}))
    token(api, 'tenant', 'globex')
    assert api('PUT', '/v1/topologies/globex-net?tenant=globex', {
        'source': 'name: globex-net\nnodes:\n  fw: {vm: %s, nics: {eth0: '
                  '{vnic: globex-fw}}}\n' % VM_B})[0] == 201
    assert api('POST', '/v1/switches', {'name': 'globex-lan', 'ports': 2,
                                        'tenant': 'globex',
                                        'host': 'h2'})[0] == 201
    before = [api('GET', p) for p in ('/v1/wires', '/v1/tenants',
                                      '/v1/credentials', '/v1/vnics',
                                      '/v1/topologies?tenant=globex',
                                      '/v1/switches')]
    flows = api.h.flow_mods()
    victim = isolation.Objects('globex', ['globex-fw', 'globex-app'],
                               wire['id'], VM_B, 'h2', 'globex-net',
                               'globex-lan')
    problems, seen = isolation.probe(
        lambda m, p, b: api(m, p, b, acme), victim, 'acme-spare')
    assert problems == []
    assert len(seen) == sum(len(set(ops) - {'parameters'}) for ops in
                            openapi_document()['paths'].values())
    assert seen['GET /v1/wires/{wire_id}'] == [(404, 404)]
    assert seen['DELETE /v1/wires/{wire_id}'] == [(404, 404)]
    assert seen['POST /v1/wires'] == [(404, 404)] * 3
    assert seen['GET /v1/switches/{name}'] == [(404, 404)]
    assert seen['DELETE /v1/switches/{name}'] == [(404, 404)]
    assert seen['POST /v1/switches'] == [(404, 404)]
    assert seen['PUT /v1/vnics/{vnic_id}/tenant'] == [(403, 403)]
    assert seen['DELETE /v1/topologies/{name}'] == [(404, 404)]
    assert seen['GET /v1/topologies/{name}/graph'] == [(404, 404)]
    assert seen['PUT /v1/topologies/{name}'] == [(422, 422), (422, 422)]
    assert [api('GET', p) for p in ('/v1/wires', '/v1/tenants',
                                    '/v1/credentials', '/v1/vnics',
                                    '/v1/topologies?tenant=globex',
                                    '/v1/switches')] == before
    assert api.h.flow_mods() == flows
    # Every change it tried is in the audit log, refused, as acme.
    tried = [e for e in api.log.recent if e['who'] == 'tenant:acme']
    changes = sum(n for label, runs in seen.items()
                  if not label.startswith('GET') for n in [2 * len(runs)])
    assert len(tried) == changes
    # A file naming what is not its own is refused as a file naming
    # nothing (422, the line), exactly as for nonexistent objects.
    assert all((e['status'] in (403, 404) or e['status'] == 422 and
                e['path'].startswith('/v1/topologies/')) and e['error']
               for e in tried)


def test_a_tenant_reader_only_reads(api):
    reader = token(api, 'tenant-reader', 'acme')
    status, text = api('POST', '/v1/wires', {'a': 'acme-web',
                                             'b': 'acme-db'}, reader)
    assert status == 403 and 'may only read' in text
    assert api('GET', '/v1/wires')[1].count('"id"') == 0
    assert api('GET', '/v1/vnics', token=reader)[0] == 200
    assert api('GET', '/v1/hosts', token=reader)[0] == 403


def test_a_vnic_wired_across_tenants_is_the_operators(api):
    acme = token(api, 'tenant', 'acme')
    status, cross = doc(api('POST', '/v1/wires', {'a': 'acme-web',
                                                  'b': 'globex-fw'}))
    assert status == 201
    assert doc(api('GET', '/v1/wires', token=acme))[1]['wires'] == []
    # Its own vNIC is wired, it is told so, but not to what.
    status, err = doc(api('POST', '/v1/wires', {'a': 'acme-web',
                                                'b': 'acme-db'}, acme))
    assert status == 409
    assert err['error']['message'] == 'vNIC acme-web is already wired'
    assert api('GET', '/v1/wires/%d' % cross['id'], token=acme)[0] == 404


def test_assignments_say_what_is_wrong_and_change_nothing(api):
    owners = dict(api.h.intent.ownership.owners())
    for path, body, status, words in (
            ('/v1/vnics/acme-web/tenant', {'tenant': '../x'}, 422,
             'tenant must be a name'),
            ('/v1/vnics/acme-web/tenant', {'owner': 'x'}, 400,
             'body must be {"tenant": name}'),
            ('/v1/vnics/bad%20id/tenant', {'tenant': 'x'}, 422, 'vNIC id')):
        got, text = api('PUT', path, body)
        assert got == status and words in json.loads(text)['error'][
            'message'], text
    assert api('DELETE', '/v1/vnics/nobody/tenant')[0] == 404
    assert api.h.intent.ownership.owners() == owners
    tenants = doc(api('GET', '/v1/tenants'))[1]['tenants']
    assert [(t['name'], t['vnics']) for t in tenants] == [('acme', 3),
                                                          ('globex', 2)]


def test_the_audit_log_says_who_did_what_when_and_the_result(api, tmp_path):
    acme = token(api, 'tenant', 'acme')
    api('POST', '/v1/wires', {'a': 'acme-web', 'b': 'acme-db'}, acme)
    api('POST', '/v1/wires', {'a': 'acme-web', 'b': 'x'}, 'not-a-token')
    api('GET', '/v1/wires', token=acme)          # reads are not logged
    path = str(tmp_path / 'audit.log')
    assert os.stat(path).st_mode & 0o777 == 0o600
    with open(path) as f:
        lines = [json.loads(x) for x in f]
    last = lines[-2:]
    assert [(e['who'], e['status'], e['action']) for e in last] == [
        ('tenant:acme', 201, 'connect'), ('anonymous', 401, 'unauthenticated')]
    assert last[0]['request'] == {'a': 'acme-web', 'b': 'acme-db'}
    assert last[0]['from'] == '192.0.2.7' and last[0]['at'].endswith('+00:00')
    # No credential: a summary (count, busiest sources), never its body.
    assert last[1]['count'] == 1 and last[1]['from'] == {'192.0.2.7': 1}
    assert 'request' not in last[1]
    issued = [e for e in lines if e['action'] == 'issue_credential']
    assert issued and all('token' not in json.dumps(e) for e in issued)
    # The operator reads it back; a reader may not.
    assert doc(api('GET', '/v1/audit?limit=2'))[1]['entries'] == last
    reader = token(api, 'reader', 'noc')
    assert api('GET', '/v1/audit', token=reader)[0] == 403
    assert api('GET', '/v1/audit?limit=0')[0] == 422
    # A restarted controller reads its last lines back.
    with open(path) as f:
        lines = [json.loads(x) for x in f]
    assert lines[-1]['request'] == {'role': 'reader', 'name': 'noc'}
    assert AuditLog(path).view(3)['entries'] == lines[-3:]


def test_requests_without_a_credential_cannot_fill_the_audit_log(api,
                                                                 tmp_path):
    path = str(tmp_path / 'audit.log')
    size = os.path.getsize(path) if os.path.exists(path) else 0
    for i in range(2000):
        api('POST', '/v1/wires', {'a': 'x%d' % i, 'b': 'y'}, 'not-a-token')
    with open(path) as f:
        f.seek(size)
        new = [json.loads(x) for x in f]
    # One summary line (the first refusal), not 2,000 lines.
    assert [(e['who'], e['count']) for e in new] == [('anonymous', 1)]
    view = doc(api('GET', '/v1/audit'))[1]
    assert view['unauthenticated_total'] >= 2000
