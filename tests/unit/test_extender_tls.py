"""An extender agent behind a man-in-the-middle: the agent's controller
client pins the controller CA, so a server with a certificate from another
CA gets no report (and no token) and nothing it answers is taken: no
keys, no ports, no links. The same server, trusted, is believed (the
control that shows the test can fail)."""
import http.server
import json
import ssl
import threading

from virtualwire.extender.agent import Agent
from virtualwire.extender.network_io import ControllerClient
from vwlab.pki import LabPki

OFFER = {'links': [], 'ports': [{'port': 51999, 'peer': 'evil'}],
         'rotate_key': False, 'hurry': True}


def _mitm(tmp_path):
    """An HTTPS server (certificate from its own CA) answering every
    report with OFFER; returns (url, its CA, the requests it saw)."""
    pki = LabPki(str(tmp_path / 'mitm')).init()
    key, cert = pki.issue('controller', role='controller', ips=['127.0.0.1'])
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(dict(self.headers))
            body = json.dumps(OFFER).encode()
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return 'https://127.0.0.1:%d' % srv.server_address[1], \
        pki.controller_ca, seen, srv


def test_an_agent_behind_a_mitm_takes_nothing_it_is_offered(tmp_path):
    url, mitm_ca, seen, srv = _mitm(tmp_path)
    real = LabPki(str(tmp_path / 'real')).init()
    try:
        agent = Agent('xa', str(tmp_path / 'xa'),
                      ControllerClient(url, 'secret', real.controller_ca),
                      ('127.0.0.1', 9), switch=None)
        agent.talk()
        assert seen == []                 # no report, no token reached it
        assert (agent.ports, agent.hurry) == ([], False)
        # Control: trusting the MITM's CA, the same offer is taken.
        fooled = Agent('xb', str(tmp_path / 'xb'),
                       ControllerClient(url, 'secret', mitm_ca),
                       ('127.0.0.1', 9), switch=None)
        fooled.talk()
        assert seen and seen[0]['Authorization'] == 'Bearer secret'
        assert fooled.ports == OFFER['ports'] and fooled.hurry
    finally:
        srv.shutdown()
