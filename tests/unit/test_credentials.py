"""Scoped credentials at the REST edge: the operator issues them; an
extender's token reports only for itself, a hypervisor's announces only
migrations to itself, a reader's only reads; revoked tokens are refused;
refusals say why and change nothing."""
import json
import uuid

import pytest
import webob

from virtualwire.api.rest import RestApi
from virtualwire.core import credentials
from virtualwire.testing.harness import Harness

ADMIN = 'operator-token'


@pytest.fixture
def api():
    h = Harness()
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 2))
    rest = RestApi(h.loop, h.ctl, h.intent, h.runtime, ADMIN)

    def call(method, path, body=None, token=ADMIN):
        req = webob.Request.blank(path, method=method)
        if token:
            req.headers['Authorization'] = 'Bearer ' + token
        if body is not None:
            req.body = json.dumps(body).encode()
        resp = req.get_response(rest)
        return resp.status_int, (resp.json if resp.content_type ==
                                 'application/json' else resp.body)
    call.h, call.rest = h, rest
    stop = h.run_threads()          # REST asks the loop, as live
    yield call
    stop()


def issue(api, role, name):
    status, doc = api('POST', '/v1/credentials', {'role': role, 'name': name})
    assert status == 201 and doc['role'] == role and doc['name'] == name
    return doc['token']


def test_an_extenders_token_reports_only_for_itself(api):
    tok = issue(api, 'extender', 'xa')
    status, doc = api('POST', '/v1/extenders/xb/report',
                      {'public_key': 'A' * 43 + '='}, token=tok)
    assert status == 403 and "extender xa's" in doc['error']['message']
    for method, path, body in (('GET', '/v1/wires', None),
                               ('POST', '/v1/wires', {'a': 'a', 'b': 'b'}),
                               ('GET', '/metrics', None),
                               ('POST', '/v1/credentials',
                                {'role': 'reader', 'name': 'x'})):
        assert api(method, path, body, token=tok)[0] == 403, path
    assert api('GET', '/v1/wires')[1] == {'wires': []}    # nothing made
    assert len(api('GET', '/v1/credentials')[1]['credentials']) == 1
    # Its own report passes the access check (and is then judged as any).
    status, _ = api('POST', '/v1/extenders/xa/report',
                    {'public_key': 'A' * 43 + '='}, token=tok)
    assert status != 403


def test_a_hypervisors_token_announces_only_migrations_to_itself(api):
    tok = issue(api, 'hypervisor', 'h2')
    vm = str(uuid.uuid4())
    to_h1 = {'vm': 'g', 'vm_uuid': vm, 'vnics': ['a'], 'destination': 'h1'}
    status, doc = api('POST', '/v1/migrations', to_h1, token=tok)
    assert status == 403 and 'only announce migrations to h2' in \
        doc['error']['message']
    status, doc = api('POST', '/v1/migrations', dict(to_h1, destination='h2'),
                      token=tok)
    assert status == 201 and doc['destination'] == 'h2'
    assert api('POST', '/v1/migrations/%s/released' % vm, {'host': 'h1'},
               token=tok)[0] == 403
    # Saying a guest stopped to leave: only for itself, and only as its
    # source (h2 is this guest's destination: 409, nothing changed).
    status, doc = api('POST', '/v1/migrations/%s/stopped' % vm,
                      {'host': 'h1'}, token=tok)
    assert status == 403 and 'stopped to leave' in doc['error']['message']
    status, doc = api('POST', '/v1/migrations/%s/stopped' % vm,
                      {'host': 'h2'}, token=tok)
    assert status == 409 and 'not migrating out of h2' in \
        doc['error']['message']
    assert api('POST', '/v1/migrations/%s/released' % vm, {'host': 'h2'},
               token=tok)[0] == 200
    assert api('DELETE', '/v1/wires/1', token=tok)[0] == 403


def test_a_readers_token_reads_and_changes_nothing(api):
    tok = issue(api, 'reader', 'prometheus')
    assert api('GET', '/v1/hosts', token=tok)[0] == 200
    assert api('GET', '/metrics', token=tok)[0] == 200
    assert api('GET', '/v1/credentials', token=tok)[0] == 403
    status, doc = api('POST', '/v1/wires', {'a': 'a', 'b': 'b'}, token=tok)
    assert status == 403 and 'may only read' in doc['error']['message']
    assert api('GET', '/v1/wires')[1] == {'wires': []}


def test_revoked_or_reissued_tokens_are_refused_and_only_digests_kept(api):
    old = issue(api, 'reader', 'grafana')
    new = issue(api, 'reader', 'grafana')                  # replaces it
    assert api('GET', '/v1/hosts', token=old)[0] == 401
    assert api('GET', '/v1/hosts', token=new)[0] == 200
    [(key, (dig, _at, _exp))] = api.h.intent.credentials.rows.items()
    assert key == ('reader', 'grafana') and dig == credentials.digest(new)
    assert new not in json.dumps(api('GET', '/v1/credentials')[1])
    assert api('DELETE', '/v1/credentials/reader/grafana')[0] == 204
    assert api('GET', '/v1/hosts', token=new)[0] == 401
    assert api('DELETE', '/v1/credentials/reader/grafana')[0] == 404


@pytest.mark.parametrize('body, words', [
    ({'role': 'root', 'name': 'x'}, 'role must be one of'),
    ({'role': 'reader', 'name': '../x'}, 'name must be a host or tenant name'),
    ({'role': 'reader'}, 'missing field: name'),
    ({'role': 'reader', 'name': 'x', 'scope': '*'}, 'unknown field'),
])
def test_bad_credential_requests_say_why_and_issue_nothing(api, body, words):
    status, doc = api('POST', '/v1/credentials', body)
    assert 400 <= status < 500 and words in doc['error']['message']
    assert api('GET', '/v1/credentials')[1] == {'credentials': []}


def test_only_the_operator_issues_credentials(api):
    tok = issue(api, 'hypervisor', 'h1')
    assert api('POST', '/v1/credentials', {'role': 'reader', 'name': 'x'},
               token=tok)[0] == 403
    assert api('DELETE', '/v1/credentials/hypervisor/h1', token=tok)[0] == 403


@pytest.mark.parametrize('raw, words', [
    (b'[' * 30000 + b']' * 30000, 'nested too deeply'),
    (b'{"destination": "h2",', 'not valid JSON'),
])
def test_a_hypervisors_malformed_body_is_a_400_that_says_why(api, raw,
                                                             words):
    tok = issue(api, 'hypervisor', 'h2')
    req = webob.Request.blank('/v1/migrations', method='POST')
    req.headers['Authorization'] = 'Bearer ' + tok
    req.body = raw
    resp = req.get_response(api.rest)
    assert resp.status_int == 400 and words in resp.json['error']['message']
    assert api('GET', '/v1/migrations')[1] == {'migrations': []}


def test_a_migration_the_database_did_not_save_is_a_503(api):
    """The hook must not take an unsaved announcement as recorded."""
    from virtualwire.future import Future

    def failing(rec, keep=()):
        f = Future()
        f.set(error=OSError('intent database unreachable'))
        return f
    api.h.runtime.save_migration = failing
    tok = issue(api, 'hypervisor', 'h2')
    status, doc = api('POST', '/v1/migrations', {
        'vm': 'g', 'vm_uuid': str(uuid.uuid4()), 'vnics': ['a'],
        'destination': 'h2'}, token=tok)
    assert status == 503 and 'not saved' in doc['error']['message'] and \
        'intent database unreachable' in doc['error']['message']


def _announce(api, tok, vnics, dest='h2', vm_uuid=None):
    return api('POST', '/v1/migrations', {
        'vm': 'g', 'vm_uuid': vm_uuid or str(uuid.uuid4()), 'vnics': vnics,
        'destination': dest}, token=tok)


def test_a_hypervisor_cannot_take_over_a_vnic_migrating_elsewhere(api):
    """h3's token announcing 'a' (moving h1 -> h2 under its own guest's
    migration) as arriving on h3 would block the real activation."""
    h = api.h
    h.host('h3', ('c', 3))
    real = issue(api, 'hypervisor', 'h2')
    rogue = issue(api, 'hypervisor', 'h3')
    vm = str(uuid.uuid4())
    assert _announce(api, real, ['a'], 'h2', vm)[0] == 201
    status, doc = _announce(api, rogue, ['a'], 'h3')
    assert status == 409 and 'already being migrated' in \
        doc['error']['message']
    assert 'h1' not in doc['error']['message']      # names no other host
    [m] = api('GET', '/v1/migrations')[1]['migrations']
    assert (m['vm_uuid'], m['destination'], m['state']) == (vm, 'h2',
                                                          'prepared')


def test_a_hypervisor_learns_nothing_about_other_hosts(api):
    tok = issue(api, 'hypervisor', 'h2')
    status, doc = _announce(api, tok, ['a'])
    assert status == 201
    assert 'sources' not in doc and 'h1' not in json.dumps(doc), doc
    # The operator sees where it came from.
    [m] = api('GET', '/v1/migrations')[1]['migrations']
    assert m['sources'] == {'a': 'h1'}


def test_announcements_are_bounded_per_destination_and_expire(api):
    from virtualwire.control.migrations import MAX_PER_DESTINATION
    h = api.h
    n = MAX_PER_DESTINATION + 8
    h.host('h1', ('a', 1), *[('v%d' % i, 10 + i) for i in range(n)])
    tok = issue(api, 'hypervisor', 'h2')
    answers = [_announce(api, tok, ['v%d' % i]) for i in range(n)]
    assert [s for s, _ in answers] == [201] * MAX_PER_DESTINATION + \
        [409] * 8
    assert 'the most one host may have' in answers[-1][1]['error']['message']
    assert _announce(api, tok, [])[0] == 422        # nothing to follow
    # Nothing arrives: past the move timeout every record has ended.
    h.loop.call(h.ctl.tick)                  # the timer sees the moves
    h.now += h.ctl.moves.move_timeout + 1
    h.loop.call(h.ctl.tick)
    states = [m['state'] for m in api('GET', '/v1/migrations')[1][
        'migrations']]
    assert len(states) == MAX_PER_DESTINATION and \
        set(states) == {'timed-out'}, set(states)


def test_a_vnic_of_another_guest_cannot_be_announced(api):
    h = api.h
    owner = str(uuid.uuid4())
    h.host('h1', ('a', 1), vm=owner)
    tok = issue(api, 'hypervisor', 'h2')
    status, doc = _announce(api, tok, ['a'])
    assert status == 409 and "is not guest" in doc['error']['message']
    assert api('GET', '/v1/migrations')[1] == {'migrations': []}
    assert _announce(api, tok, ['a'], vm_uuid=owner)[0] == 201


def test_a_hypervisor_reports_only_its_own_guests_leaving(api):
    """POST /v1/migrations/departures (vw-host-agent): h2's token speaks
    for h2 alone; a bad report is a 4xx that says why."""
    tok = issue(api, 'hypervisor', 'h2')
    vm = str(uuid.uuid4())
    doc = {'host': 'h1', 'vm_uuid': vm, 'vnics': ['a']}
    status, out = api('POST', '/v1/migrations/departures', doc, token=tok)
    assert status == 403 and 'h2' in out['error']['message']
    status, out = api('POST', '/v1/migrations/departures',
                      dict(doc, host='h2', vm_uuid='x'), token=tok)
    assert status == 422 and 'vm_uuid' in out['error']['message'], out
    status, out = api('POST', '/v1/migrations/departures',
                      dict(doc, host='h2', vnics=['b']), token=tok)
    assert status == 200 and out == {'vm_uuid': vm, 'moved': [],
                                     'settled': False}, out
