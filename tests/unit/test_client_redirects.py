"""Clients that carry a token never hand it on: a controller (or anyone
on the path) answering 301/302/303 to a POST is not followed, to http://
or anywhere; an 'HTTP://' URL is plain HTTP; every URL of an HA set is
checked, not just the first. The hook (run as libvirt runs it) and the
extender agent's client (also `vw-host-setup enroll`'s)."""
import http.server
import importlib.machinery
import threading
import urllib.error

import pytest

from virtualwire.extender.network_io import ControllerClient, check_urls

from test_hook import HOOK


class Recorder(http.server.BaseHTTPRequestHandler):
    seen: list = []
    target = ''

    def _answer(self):
        length = int(self.headers.get('Content-Length') or 0)
        self.rfile.read(length)
        self.seen.append((self.server.server_port, self.command,
                          self.headers.get('Authorization')))
        if self.target:
            self.send_response(self.status)
            self.send_header('Location', self.target + self.path)
            self.end_headers()
        else:
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.end_headers()
            self.wfile.write(b'{}')

    do_POST = do_GET = do_PUT = _answer

    def log_message(self, *args):
        pass


def serve(target='', status=302):
    handler = type('H', (Recorder,), {'target': target, 'status': status})
    srv = http.server.HTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, 'http://127.0.0.1:%d' % srv.server_port


@pytest.fixture
def thief():
    Recorder.seen = []
    srv, url = serve()
    yield url, srv.server_port
    srv.shutdown()


@pytest.mark.parametrize('status', [301, 302, 303, 307])
def test_the_agents_client_never_follows_a_redirect_elsewhere(thief, status):
    url, port = thief
    srv, ours = serve(url, status)
    try:
        c = ControllerClient(ours, 'secret-token')
        with pytest.raises(urllib.error.URLError):
            c.post('/v1/extenders/x1/report', {'a': 1})
    finally:
        srv.shutdown()
    assert [s for s in Recorder.seen if s[0] == port] == []


def test_every_url_of_a_set_is_checked_in_any_case():
    check_urls(['https://a:1', 'HTTPS://b:1'], False)
    for bad in (['https://a:1', 'http://b:1'], ['HTTP://a:1'],
                ['ftp://a:1']):
        with pytest.raises(ValueError):
            check_urls(bad, False)
    check_urls(['https://a:1', 'http://b:1'], True)


def hook_call(tmp_path, url, plain=True):
    mod = importlib.machinery.SourceFileLoader('vwhook_r', HOOK).load_module()
    tok = tmp_path / 'token'
    tok.write_text('secret-token\n')
    cfg = {'url': url, 'plain': plain, 'ca_cert': '', 'token_file': str(tok),
           'timeout': 2}
    return mod, cfg


@pytest.mark.parametrize('status', [301, 302, 303])
def test_the_hook_never_follows_a_redirect(thief, status, tmp_path):
    url, port = thief
    srv, ours = serve(url, status)
    try:
        mod, cfg = hook_call(tmp_path, ours)
        code, _body = mod.call(cfg, '/v1/migrations', {'vm': 'g'})
    finally:
        srv.shutdown()
    assert code == status
    assert [s for s in Recorder.seen if s[0] == port] == []


def test_the_hooks_scheme_check_ignores_case_and_checks_every_url(
        tmp_path):
    for url in ('HTTP://127.0.0.1:1', 'https://127.0.0.1:1,http://x:1'):
        mod, cfg = hook_call(tmp_path, url, plain=False)
        with pytest.raises(mod.Unreachable, match='https://'):
            mod.call(cfg, '/v1/migrations', {})
