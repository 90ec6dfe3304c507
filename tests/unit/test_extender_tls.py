"""An extender agent behind a man-in-the-middle: the agent's controller
client pins the controller CA, so a server with a certificate from another
CA gets no report (and no token) and nothing it answers is taken: no
keys, no ports, no links. The same server, trusted, is believed (the
control that shows the test can fail)."""
import threading

from virtualwire.extender.agent import Agent
from virtualwire.extender.network_io import ControllerClient
from vwlab import mitm
from vwlab.pki import LabPki

OFFER = {'links': [], 'ports': [{'port': 51999, 'peer': 'evil'}],
         'rotate_key': False, 'hurry': True}


def _mitm(tmp_path):
    """An HTTPS server (certificate from its own CA) answering every
    report with OFFER (vwlab.mitm); returns (url, its CA, its log, it)."""
    pki = LabPki(str(tmp_path / 'mitm')).init()
    key, cert = pki.issue('controller', role='controller', ips=['127.0.0.1'])
    log = str(tmp_path / 'mitm.jsonl')
    srv = mitm.make_server('127.0.0.1:0', key, cert, OFFER, log)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return 'https://127.0.0.1:%d' % srv.server_address[1], \
        pki.controller_ca, log, srv


def test_an_agent_behind_a_mitm_takes_nothing_it_is_offered(tmp_path):
    url, mitm_ca, log, srv = _mitm(tmp_path)
    real = LabPki(str(tmp_path / 'real')).init()
    try:
        agent = Agent('xa', str(tmp_path / 'xa'),
                      ControllerClient(url, 'secret', real.controller_ca),
                      ('127.0.0.1', 9), switch=None)
        agent.talk()
        seen = [e['event'] for e in mitm.events(log)]
        assert 'connection' in seen       # it was dialled ...
        assert 'request' not in seen      # ... and no report, no token
        assert (agent.ports, agent.hurry) == ([], False)
        # Control: trusting the MITM's CA, the same offer is taken.
        fooled = Agent('xb', str(tmp_path / 'xb'),
                       ControllerClient(url, 'secret', mitm_ca),
                       ('127.0.0.1', 9), switch=None)
        fooled.talk()
        [req] = [e for e in mitm.events(log) if e['event'] == 'request']
        assert req['authorization'] == 'Bearer secret'
        assert fooled.ports == OFFER['ports'] and fooled.hurry
    finally:
        srv.shutdown()
