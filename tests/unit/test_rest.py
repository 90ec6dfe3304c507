"""The REST layer on a controller driven in-process (no server): domain
errors map to statuses here and only here, and a refused call changes
nothing."""
import json
import uuid

import pytest
import webob

from virtualwire.api.errors import status_of
from virtualwire.api.rest import RestApi
from virtualwire.core import errors
from virtualwire.testing.harness import Harness

TOKEN = 'secret'


@pytest.fixture
def rest():
    h = Harness()
    h.host('h1', ('a', 1), ('b', 2))
    api = RestApi(h.loop, h.ctl, h.intent, h.runtime, TOKEN)

    def call(method, path, body=None, raw=None, token=TOKEN):
        req = webob.Request.blank(path, method=method)
        if token:
            req.headers['Authorization'] = 'Bearer ' + token
        if body is not None or raw is not None:
            req.body = raw if raw is not None else json.dumps(body).encode()
        resp = req.get_response(api)
        h.settle()
        return resp.status_int, (resp.json if resp.body else None)
    call.h = h
    return call


def test_connect_then_show_then_disconnect(rest):
    status, w = rest('POST', '/v1/wires', {'a': 'a', 'b': 'b'})
    assert status == 201 and w['state'] == 'collapsed'
    assert rest('GET', '/v1/wires/%#x' % w['id'])[1]['a'] == 'a'
    assert rest('DELETE', '/v1/wires/%d' % w['id'])[0] == 204
    assert rest('GET', '/v1/wires')[1] == {'wires': []}


@pytest.mark.parametrize('method,path,body,raw,status,words', [
    ('POST', '/v1/wires', None, b'[' * 1024 + b']' * 1024, 400,
     'nested too deeply'),
    ('POST', '/v1/wires', None, b'{"a":', 400, 'not valid JSON'),
    ('POST', '/v1/wires', [1], None, 400, 'JSON object'),
    ('POST', '/v1/wires', {'a': 'a'}, None, 400, 'missing'),
    ('POST', '/v1/wires', {'a': 'a', 'b': 'a'}, None, 422, 'two different'),
    ('POST', '/v1/wires', None, b' ' * 70000, 413, 'over'),
    ('GET', '/v1/wires/%205', None, None, 422, 'connector id'),
    ('GET', '/v1/wires/5%0A', None, None, 400, 'control characters'),
    ('GET', '/v1/wires/0x5', None, None, 404, 'no wire'),
    ('GET', '/v1/hosts/h9', None, None, 404, 'no host'),
    ('POST', '/v1/migrations/%s/released' % uuid.UUID(int=5), {'host': 'h1'},
     None, 404, 'no migration'),
    ('POST', '/v1/migrations/%s/stopped' % uuid.UUID(int=5), {'host': 'h1'},
     None, 404, 'no migration'),
    ('POST', '/v1/migrations/%s/stopped' % uuid.UUID(int=5), {'hosts': 'h1'},
     None, 400, 'body must be'),
    ('POST', '/v1/migrations/%s/stopped' % uuid.UUID(int=5),
     {'host': 'h1', 'reads': {'v1': 'many'}}, None, 422, 'integer from 0'),
    ('POST', '/v1/migrations/%s/stopped' % uuid.UUID(int=5),
     {'host': 'h1', 'reads': {'bad id!': 1}}, None, 422, 'vNIC id'),
    ('POST', '/v1/migrations/%s/stopped' % uuid.UUID(int=5),
     {'host': 'h1', 'stopped_at': 'now'}, None, 422, 'Unix time'),
    ('POST', '/v1/migrations/%s/stopped' % uuid.UUID(int=5),
     {'host': 'h1', 'stopped_at': -3}, None, 422, 'Unix time'),
    ('POST', '/v1/migrations', {'vm': 'g', 'vm_uuid': str(uuid.uuid4()),
                                'vnics': ['a'], 'destination': 'h9'},
     None, 404, 'unknown'),
    ('PUT', '/v1/wires', None, None, 405, 'not allowed'),
])
def test_refusals_say_why_and_change_nothing(rest, method, path, body, raw,
                                             status, words):
    before = rest('GET', '/v1/wires')[1]
    got, doc = rest(method, path, body, raw)
    assert got == status, doc
    assert doc['error']['status'] == status
    assert words.lower() in doc['error']['message'].lower()
    assert rest('GET', '/v1/wires')[1] == before
    assert rest('GET', '/v1/migrations')[1] == {'migrations': []}


def test_wrong_token_is_refused_before_anything_runs(rest):
    status, doc = rest('POST', '/v1/wires', {'a': 'a', 'b': 'b'},
                       token='nope')
    assert status == 401 and rest('GET', '/v1/wires')[1] == {'wires': []}


def test_every_domain_error_has_one_status():
    assert [status_of(e('x')) for e in (
        errors.Malformed, errors.NotFound, errors.Conflict, errors.TooLarge,
        errors.Invalid, errors.Unavailable)] == [400, 404, 409, 413, 422, 503]
