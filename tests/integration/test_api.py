"""The REST API and vwctl against the real controller: right answers, clear
errors with the right status, and a rejected call changes nothing."""
import json
import os
import subprocess
import sys
import uuid

import pytest
import requests


def _state(api):
    return api.ok('GET', '/v1/wires')['wires']


def _err(r, status, words):
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers['Content-Type'].startswith('application/json')
    msg = r.json()['error']['message']
    assert words.lower() in msg.lower(), msg
    return msg


def test_openapi_document_is_public_and_describes_the_api(api):
    r = api.req('GET', '/v1/openapi.json', auth=False)
    assert r.status_code == 200
    doc = r.json()
    assert doc['openapi'].startswith('3.')
    for path in ('/v1/wires', '/v1/wires/{wire_id}', '/v1/wires/{wire_id}/stats',
                 '/v1/hosts', '/v1/vnics'):
        assert path in doc['paths']
    assert set(doc['paths']['/v1/wires']['post']['responses']) >= \
        {'201', '400', '401', '409', '413', '422'}


@pytest.mark.parametrize('headers', [{}, {'Authorization': 'Bearer wrong'},
                                     {'Authorization': 'Basic abc'}])
def test_every_call_needs_the_token(api, headers):
    before = _state(api)
    for method, path, body in (('GET', '/v1/wires', None),
                               ('GET', '/v1/hosts', None),
                               ('POST', '/v1/wires', {'a': 'x1', 'b': 'x2'})):
        r = requests.request(method, api.lab.url + path, json=body,
                             headers=headers, timeout=10,
                             verify=api.lab.verify)
        _err(r, 401, 'token')
        assert r.headers.get('WWW-Authenticate') == 'Bearer'
    assert _state(api) == before


def test_rejected_calls_say_why_and_change_nothing(api):
    w = api.connect('api-a', 'api-b')
    try:
        before = _state(api)
        cases = [
            (dict(data=b'{not json'), 400, 'not valid JSON'),
            (dict(json=['a', 'b']), 400, 'JSON object'),
            (dict(json={'a': 'api-c'}), 400, 'missing field'),
            (dict(json={'a': 'api-c', 'b': 'api-d', 'c': 1}), 400, 'unknown field'),
            (dict(json={'a': 'api-a', 'b': 'api-c'}), 409, 'already wired'),
            (dict(json={'a': 'api-c', 'b': 'api-b'}), 409, 'already wired'),
            (dict(json={'a': 'bad id', 'b': 'api-c'}), 422, 'vNIC id'),
            (dict(json={'a': 'api-c', 'b': 5}), 422, 'vNIC id'),
            (dict(json={'a': 'api-c', 'b': 'api-c'}), 422, 'two different'),
            (dict(data=b'{"a": "' + b'x' * 70000 + b'"}'), 413, 'over'),
        ]
        for kw, status, words in cases:
            _err(api.req('POST', '/v1/wires', **kw), status, words)
        for path, status, words in (
                ('/v1/wires/abc', 422, 'connector id'),
                ('/v1/wires/0', 422, 'connector id'),
                ('/v1/wires/4294967296', 422, 'connector id'),
                ('/v1/wires/0x1', 404, 'no wire'),
                ('/v1/hosts/nope', 404, 'no host'),
                ('/v1/vnics/nope', 404, 'no vNIC'),
                ('/v1/nothing', 404, 'no such resource')):
            _err(api.req('GET', path), status, words)
        for path, status, words in (
                ('/v1/wires/abc', 422, 'connector id'),
                ('/v1/wires/0x1', 404, 'no wire')):
            _err(api.req('DELETE', path), status, words)
        _err(api.req('PUT', '/v1/wires'), 405, 'not allowed')
        assert _state(api) == before
    finally:
        api.req('DELETE', '/v1/wires/%d' % w['id'])


def test_hostile_input_found_by_fuzzing_is_refused_cleanly(api):
    """Defects a hostile-input run found in the old API: each answer is a
    4xx with a JSON message (never a 500), and nothing changes."""
    before = _state(api)
    # 2 KB of nesting made every POST answer 500 (RecursionError).
    nested = b'[' * 1024 + b']' * 1024
    for path in ('/v1/wires', '/v1/migrations',
                 '/v1/migrations/%s/released' % uuid.uuid4()):
        _err(api.req('POST', path, data=nested), 400, 'nested too deeply')
    # An id with a space in front was taken as the number after it.
    for wid in ('%205', '5%20', '+5', '5_0', '0x_5'):
        _err(api.req('GET', '/v1/wires/' + wid), 422, 'connector id')
    # Releasing a migration nobody announced answered 200.
    _err(api.req('POST', '/v1/migrations/%s/released' % uuid.uuid4(),
                 json={'host': 'h1'}), 404, 'no migration')
    _err(api.req('POST', '/v1/migrations/not-a-uuid/released',
                 json={'host': 'h1'}), 422, 'uuid')
    assert _state(api) == before
    # A chunked body was ignored ("body must be a JSON object"): it is read.
    def chunks():
        yield b'{"a": "chunk-a", '
        yield b'"b": "chunk-b"}'
    r = api.req('POST', '/v1/wires', data=chunks())
    assert r.request.headers.get('Transfer-Encoding') == 'chunked'
    assert r.status_code == 201, r.text
    assert (r.json()['a'], r.json()['b']) == ('chunk-a', 'chunk-b')
    api.req('DELETE', '/v1/wires/%d' % r.json()['id'])
    # ... and a chunked body over the limit is refused like any other.
    def big():
        yield b'{"a": "'
        for _ in range(40):
            yield b'x' * 2048
        yield b'"}'
    _err(api.req('POST', '/v1/wires', data=big()), 413, 'over')
    assert _state(api) == before


def test_connect_show_list_disconnect(api):
    w = api.connect('life-a', 'life-b')
    assert 1 <= w['id'] <= 0xFFFFFFFF
    assert w['connector_id'] == '0x%08x' % w['id']
    assert api.wire(w['connector_id'])['id'] == w['id']       # hex works too
    assert any(x['id'] == w['id'] for x in _state(api))
    r = api.req('DELETE', '/v1/wires/%d' % w['id'])
    assert r.status_code == 204
    _err(api.req('DELETE', '/v1/wires/%d' % w['id']), 404, 'no wire')
    # Both vNICs are free again.
    w2 = api.connect('life-b', 'life-a')
    api.req('DELETE', '/v1/wires/%d' % w2['id'])


def test_wires_survive_a_controller_restart(api, lab):
    from vwtest import wait_until
    w = api.connect('keep-a', 'keep-b')
    try:
        lab.stop_controller()
        lab.start_controller()
        wait_until(api.synced, 20, what='controller back')
        assert api.wire(w['id'])['a'] == 'keep-a'
        # Its figures come back once every host was read again (a few
        # seconds; 503 "no flow counters read yet" until then).
        wait_until(lambda: api.req('GET', '/v1/stats').status_code == 200,
                   15, what='flow counters read again')
    finally:
        api.req('DELETE', '/v1/wires/%d' % w['id'])


def vwctl(lab, *args):
    return subprocess.run([sys.executable, '-m', 'virtualwire.cli',
                           '--config', lab.vwctl_config] + list(args),
                          capture_output=True, text=True, timeout=30)


def test_vwctl_tables_json_and_errors(lab, api, tmp_path):
    p = vwctl(lab, 'connect', 'cli-a', 'cli-b')
    assert p.returncode == 0, p.stderr
    assert 'cli-a <-> cli-b' in p.stdout
    try:
        p = vwctl(lab, 'wires')
        assert p.returncode == 0
        header = p.stdout.splitlines()[0].split()
        assert header[:4] == ['connector_id', 'a', 'b', 'state']
        assert any('cli-a' in l and 'pending' in l for l in p.stdout.splitlines())
        p = vwctl(lab, '--json', 'wires')
        wid = [w for w in json.loads(p.stdout)['wires'] if w['a'] == 'cli-a'][0]
        p = vwctl(lab, 'hosts')
        assert p.returncode == 0 and 'h1' in p.stdout and 'True' in p.stdout
        p = vwctl(lab, 'stats', wid['connector_id'])
        assert p.returncode == 0 and 'a -> b' in p.stdout
        p = vwctl(lab, 'connect', 'cli-a', 'cli-c')
        assert p.returncode == 1
        assert 'already wired' in p.stderr and 'HTTP 409' in p.stderr
        p = vwctl(lab, 'disconnect', 'zzz')
        assert p.returncode == 1 and 'connector id' in p.stderr
    finally:
        assert vwctl(lab, 'disconnect', str(wid['id'])).returncode == 0
    wrong = tmp_path / 'wrong-token'
    wrong.write_text('wrong\n')
    p = subprocess.run([sys.executable, '-m', 'virtualwire.cli', '--url',
                        lab.url, '--token-file', str(wrong), '--ca-cert',
                        lab.verify, 'wires'],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and 'HTTP 401' in p.stderr
    # Without the controller CA the system's CAs do not vouch for it.
    p = subprocess.run([sys.executable, '-m', 'virtualwire.cli', '--url',
                        lab.url, '--token-file', lab.token_file, 'wires'],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, VWCTL_CONFIG='/nonexistent'))
    assert p.returncode == 1 and 'failed TLS verification' in p.stderr
    p = subprocess.run([sys.executable, '-m', 'virtualwire.cli', '--url',
                        'http://127.0.0.1:1', '--token-file', str(wrong),
                        'wires'],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and 'cannot reach the controller' in p.stderr
