"""What a standby instance does with a write (api.standby): a 307 to the
leader's URL on the same network (REST or the southbound listener),
nothing changed here; 503 while no other leader is known; reads served.
And the clients (vwctl's, the extender agent's): they follow a 307 only
to a controller of their own list, never hand the token to another
address, and skip an instance that cannot be reached."""
import http.server
import json
import threading

import pytest
import webob

from virtualwire.api import standby
from virtualwire.api.rest import RestApi
from virtualwire.cli.client import CliError, Client
from virtualwire.extender.network_io import ControllerClient
from virtualwire.store.leadership import Leader, State
from virtualwire.testing.harness import Harness

TOKEN = 'secret'
OWN = {'rest': 'https://10.0.0.2:8780', 'southbound': 'https://198.18.0.2:8781'}
LEADER = Leader(4, 'ctl1', 'https://10.0.0.1:8780', 'then',
                'https://198.18.0.1:8781')


def api_of(leader=LEADER, southbound=False):
    h = Harness(active=False)
    h.host('h1', ('a', 1), ('b', 2))
    if leader is not None:
        h.call(h.ctl.on_leadership, State(False, leader.term, leader))
    api = RestApi(h.loop, h.ctl, h.intent, h.runtime, TOKEN, own_urls=OWN)
    app = standby.southbound(api) if southbound else api

    def call(method, path, body=None, token=TOKEN):
        req = webob.Request.blank(path, method=method)
        if token:
            req.headers['Authorization'] = 'Bearer ' + token
        if body is not None:
            req.body = json.dumps(body).encode()
        resp = req.get_response(app)
        h.settle()
        return resp
    call.h = h
    return call


def test_a_write_to_a_standby_is_redirected_to_the_leader_and_changes_nothing():
    call = api_of()
    r = call('POST', '/v1/wires?wait=programmed', {'a': 'a', 'b': 'b'})
    assert r.status_int == 307
    assert r.headers['Location'] == \
        'https://10.0.0.1:8780/v1/wires?wait=programmed'
    assert r.json['error']['leader'] == LEADER.rest_url
    assert 'standby' in r.json['error']['message']
    assert call.h.intent.wires() == {}
    # Reads are served here.
    r = call('GET', '/v1/wires')
    assert r.status_int == 200 and r.json['wires'] == []
    assert call('GET', '/v1/status').json['role']['leader']['holder'] == 'ctl1'


def test_a_hook_on_the_management_network_is_sent_to_the_leaders_address_there():
    call = api_of(southbound=True)
    r = call('POST', '/v1/migrations', {'vm': 'g'})
    assert r.status_int == 307
    assert r.headers['Location'] == 'https://198.18.0.1:8781/v1/migrations'


def test_no_token_is_refused_before_any_redirect():
    r = api_of()('POST', '/v1/wires', {'a': 'a', 'b': 'b'}, token=None)
    assert r.status_int == 401 and 'Location' not in r.headers


@pytest.mark.parametrize('leader', [None, LEADER._replace(
    rest_url=OWN['rest'])], ids=['none-known', 'the-record-names-us'])
def test_without_another_leader_a_write_waits_then_answers_503(
        leader, monkeypatch):
    monkeypatch.setattr(standby, 'WAIT', 0.2)
    call = api_of(leader)
    r = call('DELETE', '/v1/wires/0x1234')
    assert r.status_int == 503 and r.headers['Retry-After'] == '1'
    assert 'no leader' in r.json['error']['message']


# ---- clients ---------------------------------------------------------------
class _Server:
    """A local HTTP server answering every request with `answer(path)`:
    (status, headers, body). Records what it received."""

    def __init__(self, answer):
        self.seen = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def _any(self):
                n = int(self.headers.get('Content-Length') or 0)
                outer.seen.append((self.command, self.path,
                                   self.headers.get('Authorization'),
                                   self.rfile.read(n)))
                status, headers, body = answer(self.path)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                data = json.dumps(body).encode()
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            do_GET = do_POST = do_DELETE = _any

            def log_message(self, *a):
                pass
        self.httpd = http.server.HTTPServer(('127.0.0.1', 0), H)
        self.url = 'http://127.0.0.1:%d' % self.httpd.server_port
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    made = []

    def make(answer):
        s = _Server(answer)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


def _redirecting_to(url):
    return lambda path: (307, {'Location': url + path},
                         {'error': {'message': 'standby'}})


def test_vwctl_follows_a_standby_to_the_leader_and_stays_there(servers):
    leader = servers(lambda path: (201, {}, {'id': 1}))
    standby_ = servers(_redirecting_to(leader.url))
    c = Client('%s,%s' % (standby_.url, leader.url), 'tok')
    assert c.call('POST', '/v1/wires', {'a': 'x', 'b': 'y'}) == {'id': 1}
    assert leader.seen[0][:3] == ('POST', '/v1/wires', 'Bearer tok')
    assert json.loads(leader.seen[0][3]) == {'a': 'x', 'b': 'y'}
    c.call('POST', '/v1/wires', {'a': 'p', 'b': 'q'})
    assert len(standby_.seen) == 1 and len(leader.seen) == 2


def test_vwctl_never_takes_its_token_to_an_address_not_in_its_list(servers):
    evil = servers(lambda path: (201, {}, {}))
    standby_ = servers(_redirecting_to(evil.url))
    c = Client(standby_.url, 'tok')
    with pytest.raises(CliError, match='not one of the configured'):
        c.call('POST', '/v1/wires', {'a': 'x', 'b': 'y'})
    assert evil.seen == []


def test_vwctl_skips_a_dead_instance(servers):
    live = servers(lambda path: (200, {}, {'wires': []}))
    dead = _Server(lambda path: (200, {}, {}))
    dead.close()
    c = Client('%s,%s' % (dead.url, live.url), 'tok')
    assert c.call('GET', '/v1/wires') == {'wires': []}
    with pytest.raises(CliError, match='cannot reach the controller at'):
        Client(dead.url, 'tok').call('GET', '/v1/wires')


def test_the_agent_follows_only_to_its_own_controllers(servers):
    leader = servers(lambda path: (200, {}, {'links': []}))
    standby_ = servers(_redirecting_to(leader.url))
    agent = ControllerClient('%s,%s' % (standby_.url, leader.url), 'tok')
    assert agent.report('xa', {'links': {}}) == {'links': []}
    assert leader.seen[0][1] == '/v1/extenders/xa/report'
    evil = servers(lambda path: (200, {}, {}))
    lone = ControllerClient(servers(_redirecting_to(evil.url)).url, 'tok')
    with pytest.raises(OSError, match='not one of our controllers'):
        lone.report('xa', {})
    assert evil.seen == []
