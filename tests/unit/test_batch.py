"""Many wires at once (POST /v1/wires/batch) on the fake fabric: one
transaction, all or nothing, every wrong item named with why; waiting
until a change is on every switch (?wait=programmed); paging through
wires."""
import json
import time

import pytest
import webob

from virtualwire.api.audit import AuditLog
from virtualwire.api.rest import RestApi
from virtualwire.core.batch import MAX_ITEMS
from virtualwire.testing.harness import Harness

TOKEN = 'operator'
N = 20


@pytest.fixture
def api():
    h = Harness()
    h.host('h1', *[('a%d' % i, i + 1) for i in range(N)])
    h.host('h2', *[('b%d' % i, i + 1) for i in range(N)])
    log = AuditLog('')
    rest = RestApi(h.loop, h.ctl, h.intent, h.runtime, TOKEN, log)

    def call(method, path, body=None, token=TOKEN, raw=None):
        req = webob.Request.blank(path, method=method)
        req.headers['Authorization'] = 'Bearer ' + token
        if raw is not None:
            req.body = raw
        elif body is not None:
            req.body = json.dumps(body).encode()
        resp = req.get_response(rest)
        return resp.status_int, (resp.json if resp.body else None)
    call.h, call.log = h, log
    stop = h.run_threads()
    yield call
    stop()


def pairs(rng):
    return [{'a': 'a%d' % i, 'b': 'b%d' % i} for i in rng]


def test_a_batch_is_one_call_and_waits_until_every_switch_has_it(api):
    status, doc = api('POST', '/v1/wires/batch?wait=programmed',
                      {'create': pairs(range(N))})
    assert status == 200, doc
    assert len(doc['created']) == N
    assert doc['programmed']['programmed'] is True
    assert doc['programmed']['switches_confirmed'] == 2
    # Programmed means on the switches: each wire's flows are there now.
    for sw in api.h.fabric.switches.values():
        assert len([f for f in sw.flows() if f.connector_id]) == 2 * N
    assert len(api('GET', '/v1/wires')[1]['wires']) == N
    # Remove half and rewire a vNIC in the same batch.
    gone = [w['id'] for w in doc['created'][:10]]
    status, doc2 = api('POST', '/v1/wires/batch?wait=programmed',
                       {'delete': gone, 'create': [{'a': 'a0', 'b': 'b1'}]})
    assert status == 200, doc2
    assert doc2['deleted'] == gone and doc2['generation'] > doc['generation']
    assert len(api('GET', '/v1/wires')[1]['wires']) == N - 10 + 1
    assert api.log.recent[-1]['request'] == {'create': 1, 'delete': 10}


@pytest.mark.parametrize('body, status, words, where', [
    ({'create': pairs(range(3)) + [{'a': 'a5', 'b': 'a5'}]}, 422,
     'two different ends', ('create', 3)),
    ({'create': pairs(range(3)) + [{'a': 'a1', 'b': 'b9'}]}, 409,
     'a1 is also an end of create item 1', ('create', 3)),
    ({'create': pairs(range(3)) + [{'a': 'a7', 'c': 'b9'}]}, 400,
     '{"a": end, "b": end}', ('create', 3)),
    ({'create': pairs(range(3)), 'delete': [0x7A11ED00]}, 404,
     'no wire with connector id 0x7a11ed00', ('delete', 0)),
    ({'create': pairs(range(3)), 'delete': ['x']}, 422,
     'connector id must be', ('delete', 0)),
])
def test_a_wrong_item_refuses_the_batch_and_says_which(api, body, status,
                                                       words, where):
    before = api.h.flow_mods()
    got, doc = api('POST', '/v1/wires/batch', body)
    assert got == status, doc
    assert doc['error']['message'].endswith('nothing was changed')
    [item] = doc['error']['items']
    assert (item['op'], item['index']) == where
    assert words in item['message'], item
    assert api('GET', '/v1/wires')[1]['wires'] == []
    assert api.h.flow_mods() == before


def test_a_vnic_already_wired_is_named_and_nothing_is_written(api):
    api('POST', '/v1/wires', {'a': 'a2', 'b': 'b2'})
    status, doc = api('POST', '/v1/wires/batch', {'create': pairs(range(5))})
    assert status == 409
    assert [(i['index'], i['message'].split(' (')[0]) for i in
            doc['error']['items']] == [(2, 'vNIC a2 is already wired')]
    assert len(api('GET', '/v1/wires')[1]['wires']) == 1


def test_a_batch_too_large_is_413_and_an_empty_one_400(api):
    many = [{'a': 'x%d' % i, 'b': 'y%d' % i} for i in range(MAX_ITEMS + 1)]
    status, doc = api('POST', '/v1/wires/batch', {'create': many})
    assert status == 413 and 'at most %d' % MAX_ITEMS in \
        doc['error']['message']
    status, doc = api('POST', '/v1/wires/batch',
                      raw=b'{"create": [' + b' ' * (5 << 20) + b']}')
    assert status == 413
    assert api('POST', '/v1/wires/batch', {})[0] == 400
    assert api('GET', '/v1/wires')[1]['wires'] == []


def test_a_tenant_batches_only_its_own(api):
    for i in range(3):
        api.h.intent.ownership.assign('a%d' % i, 'acme')
        api.h.intent.ownership.assign('b%d' % i, 'acme')
    _, cred = api('POST', '/v1/credentials', {'role': 'tenant',
                                              'name': 'acme'})
    tok = cred['token']
    status, doc = api('POST', '/v1/wires/batch',
                      {'create': pairs(range(4))}, token=tok)
    assert status == 404
    assert [i['message'] for i in doc['error']['items']] == [
        'no vNIC a3 in tenant acme']
    assert api('POST', '/v1/wires/batch', {'create': pairs(range(3))},
               token=tok)[0] == 200


def test_wires_come_in_pages(api):
    api('POST', '/v1/wires/batch', {'create': pairs(range(N))})
    seen, path = [], '/v1/wires?limit=7'
    while path:
        status, doc = api('GET', path)
        assert status == 200
        seen += [w['id'] for w in doc['wires']]
        path = doc.get('next')
    assert seen == sorted(seen) and len(seen) == len(set(seen)) == N
    assert api('GET', '/v1/wires?limit=0')[0] == 422
    assert api('GET', '/v1/wires?page=2')[0] == 422


def test_a_single_connect_can_wait_and_names_a_missing_switch(api):
    status, doc = api('POST', '/v1/wires?wait=programmed&timeout=5',
                      {'a': 'a1', 'b': 'b1'})
    assert status == 201 and doc['programmed']['programmed']
    assert doc['programmed']['not_connected'] == []
    api.h.loop.post(api.h.ctl.on_switch_down,
                    api.h.ctl.sessions[api.h.ctl.tables.hosts['h2'].dpid].dp)
    status, doc = api('DELETE', '/v1/wires/%d?wait=programmed' % doc['id'])
    assert status == 200 and doc['programmed']['not_connected'] == ['h2']
    assert api('POST', '/v1/wires?wait=yes', {'a': 'a3', 'b': 'b3'})[0] \
        == 422
    assert api('POST', '/v1/wires?timeout=3', {'a': 'a3', 'b': 'b3'})[0] \
        == 422


def test_a_switch_that_ignores_barriers_holds_up_no_wait_for_long(
        api, monkeypatch):
    """Review point 8: a wait that times out is forgotten; a switch that
    leaves its barriers unanswered is named as not answering and waited
    for no longer; a tenant is told counts, never the hosts' names."""
    from virtualwire.control import programming
    h = api.h
    h.fabric.switches['h2'].stall()     # takes nothing, answers nothing
    status, doc = api('POST', '/v1/wires?wait=programmed&timeout=0.3',
                      {'a': 'a1', 'b': 'b1'})
    assert status == 504 and 'waiting for h2' in doc['error']['message']
    assert h.loop.call(lambda: len(h.ctl.programming.waiters)) == 0      # forgotten
    monkeypatch.setattr(programming, 'BARRIER_PATIENCE', 0.2)
    time.sleep(0.3)
    status, doc = api('POST', '/v1/wires?wait=programmed&timeout=2',
                      {'a': 'a2', 'b': 'b2'})
    assert status == 201, doc
    view = doc['programmed']
    assert view['programmed'] and view['not_answering'] == ['h2'], view
    # A tenant's wait: the same facts, no host named.
    for v in ('a3', 'b3'):
        h.intent.ownership.assign(v, 'acme')
    tok = h.intent.credentials.issue('tenant', 'acme')[0]
    status, doc = api('POST', '/v1/wires?wait=programmed&timeout=2',
                      {'a': 'a3', 'b': 'b3'}, token=tok)
    assert status == 201, doc
    view = doc['programmed']
    assert view['not_answering'] == [] and view['hosts_not_answering'] == 1
    assert 'h2' not in json.dumps(view)
    # And its 504 counts the switches it waits for, not their names.
    monkeypatch.setattr(programming, 'BARRIER_PATIENCE', 60.0)
    for v in ('a4', 'b4'):
        h.intent.ownership.assign(v, 'acme')
    status, doc = api('POST', '/v1/wires?wait=programmed&timeout=0.3',
                      {'a': 'a4', 'b': 'b4'}, token=tok)
    assert status == 504 and 'waiting for 1 switch' in \
        doc['error']['message'] and 'h2' not in doc['error']['message']
