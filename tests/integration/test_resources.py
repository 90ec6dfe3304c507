"""Bounded resources on the real controller: a client holding 1,100 idle
or half-sent connections to the southbound REST (where hooks and extender
agents call) does not stop the API for anyone else. The flood runs from a
rogue namespace on the management network (vwlab.flood); a hypervisor's
request is timed from h1's namespace while the flood holds its
connections."""
import json
import os
import subprocess
import sys

from vwtest import wait_until
from vwlab import rogue as rogue_mod
from vwlab.libvirt_host import HOOK_PORT
from vwlab.preauth_flood import TIMED_GET, kept_out
from vwlab.shell import CONTROLLER_IP

N = 1100    # over eventlet's default pool of 1,024
HOLD = 16.0     # past the server's 10 s socket timeout



def test_the_api_answers_within_1s_while_1100_idle_connections_are_open(
        lab, api, tmp_path):
    flooder = rogue_mod.impostor(lab, 'flooder', index=81)
    ready = str(tmp_path / 'flood-ready')
    target = '%s:%d' % (CONTROLLER_IP, HOOK_PORT)
    flood = subprocess.Popen(
        ['ip', 'netns', 'exec', flooder.ns, sys.executable, '-m',
         'vwlab.flood', target, '--n', str(N), '--hold', str(HOLD),
         '--half-tls', '300', '--ready-file', ready],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: os.path.exists(ready) or flood.poll() is not None,
               60, what='the flood to open its connections')
    with open(lab.token_file) as f:
        token = f.read().strip()
    # A hypervisor (h1's namespace) asks the same listener meanwhile.
    p = subprocess.run(
        ['ip', 'netns', 'exec', lab.host('h1').ns, sys.executable, '-c',
         TIMED_GET, 'https://%s/v1/status' % target, token, lab.verify, '6'],
        capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    answers = json.loads(p.stdout)
    out, err = flood.communicate(timeout=HOLD + 60)
    assert flood.returncode == 0, err
    got = json.loads(out)
    assert not kept_out(answers), answers
    # The flood was real and held while we asked: every connection opened
    # before the first request, and the server still held some (those
    # under the per-client limit) when the first answer came.
    assert got['opened'] == N and got['connect_errors'] == 0, got
    assert answers[0]['at'] >= got['t0'] + got['connect_seconds'], \
        (got, answers)
    assert got['t0'] + (got['last_closed_at'] or HOLD) > \
        answers[0]['at'] + answers[0]['seconds'], (got, answers)
    # Over the per-client limit: closed at once, not queued; the rest
    # closed by the socket timeout; none left open.
    assert got['closed_within_1s'] >= N - 64, got
    assert got['still_open'] == 0 and got['last_closed_at'] < HOLD, got
    # And after the flood the API answers as before.
    assert api.ok('GET', '/v1/status')['hosts'] == len(lab.hosts)
