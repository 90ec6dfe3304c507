"""Credentials that expire, operators by name, and requests per
credential bounded (issue 39): each through the REST layer on an
in-process controller."""
import json

import pytest
import webob

from virtualwire.api.rate_limit import RateLimits
from virtualwire.api.rest import RestApi
from virtualwire.testing.harness import Harness

ROOT = 'root-token'


@pytest.fixture
def rest():
    h = Harness()
    h.host('h1', ('a', 1), ('b', 2))
    api = RestApi(h.loop, h.ctl, h.intent, h.runtime, ROOT)
    audit = []
    api.audit_log.record = lambda *a: audit.append(a)

    def call(method, path, body=None, token=ROOT):
        req = webob.Request.blank(path, method=method)
        req.headers['Authorization'] = 'Bearer ' + token
        if body is not None:
            req.body = json.dumps(body).encode()
        resp = req.get_response(api)
        h.settle()
        return resp.status_int, (resp.json if resp.body else None), resp
    call.h, call.api, call.audit = h, api, audit
    return call


def issue(rest, role, name, **extra):
    status, doc, _ = rest('POST', '/v1/credentials',
                          dict({'role': role, 'name': name}, **extra))
    assert status == 201, doc
    return doc


def test_a_credential_is_refused_once_it_expires(rest):
    t = [1000.0]
    rest.h.intent.credentials.clock = lambda: t[0]
    doc = issue(rest, 'reader', 'mon', expires_in=60)
    assert doc['expires_at'] == 1060.0
    assert rest('GET', '/v1/wires', token=doc['token'])[0] == 200
    t[0] = 1059.0
    assert rest('GET', '/v1/wires', token=doc['token'])[0] == 200
    t[0] = 1060.0
    status, out, _ = rest('GET', '/v1/wires', token=doc['token'])
    assert status == 401 and out['error']['message'] == \
        'missing or wrong bearer token'
    [listed] = rest('GET', '/v1/credentials')[1]['credentials']
    assert listed['expires_at'] == 1060.0
    for bad in (0, -5, 'soon', 1.5, True, 10 * 365 * 86400 + 1):
        status, out, _ = rest('POST', '/v1/credentials', {
            'role': 'reader', 'name': 'x', 'expires_in': bad})
        assert status == 422 and 'expires_in must be whole seconds' in \
            out['error']['message'], bad


def test_an_operator_by_name_may_do_everything_and_is_audited_as_itself(
        rest):
    alice = issue(rest, 'operator', 'alice')['token']
    status, wire, _ = rest('POST', '/v1/wires', {'a': 'a', 'b': 'b'},
                           token=alice)
    assert status == 201
    assert issue(rest, 'reader', 'mon')      # as root; and as alice:
    assert rest('POST', '/v1/credentials', {'role': 'tenant',
                                            'name': 'acme'},
                token=alice)[0] == 201
    whom = [a[0] for a in rest.audit if a[4] in ('connect',
                                                   'issue_credential')]
    assert whom == ['admin', ('operator', 'alice'), 'admin',
                    ('operator', 'alice')]
    assert rest('DELETE', '/v1/credentials/operator/alice')[0] == 204
    assert rest('GET', '/v1/wires', token=alice)[0] == 401


def test_one_credential_over_its_rate_is_told_to_wait_and_others_are_not(
        rest):
    t = [0.0]
    rest.api.rate_limits = RateLimits(rate=20, burst=60, clock=lambda: t[0])
    mon = issue(rest, 'reader', 'mon')['token']
    other = issue(rest, 'reader', 'other')['token']
    answers = [rest('GET', '/v1/wires', token=mon)[0] for _ in range(61)]
    assert answers[:60] == [200] * 60
    status, out, resp = rest('GET', '/v1/wires', token=mon)
    assert status == 429 and resp.headers['Retry-After'] == '1'
    assert out['error']['message'].startswith(
        'this credential (reader mon) is making more than 20 requests a '
        'second')
    assert rest('GET', '/v1/wires', token=other)[0] == 200
    assert [rest('GET', '/v1/wires')[0] for _ in range(100)] == [200] * 100
    t[0] += 0.5                         # ten more a half second on
    assert [rest('GET', '/v1/wires', token=mon)[0]
            for _ in range(11)] == [200] * 10 + [429]
