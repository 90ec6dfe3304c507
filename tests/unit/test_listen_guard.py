"""Listeners bounded before authentication (issue 39), on the real server
code under both os-ken hubs (guarded_servers.py, in a process of its own):
a TLS handshake or request head that trickles in is cut at its deadline
although every read is quick; when every place is taken a newcomer takes
the oldest unproven one's, so a real request is answered; an address over
its share is refused at once; running out of descriptors sheds
connections instead of stopping the listener."""
import json
import os
import socket
import ssl
import subprocess
import sys
import time

import pytest
import requests

from vwlab.pki import LabPki
from vwlab.preauth_flood import HEAD, client_hello

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope='module')
def pki(tmp_path_factory):
    p = LabPki(str(tmp_path_factory.mktemp('pki'))).init()
    key, cert = p.issue('controller', role='controller', ips=['127.0.0.1'])
    return key, cert, p.controller_ca, p.host_ca


@pytest.fixture(params=['eventlet', 'native'])
def servers(request, pki):
    key, cert, ca, host_ca = pki
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, 'guarded_servers.py'), key, cert,
         host_ca], stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, OSKEN_HUB_TYPE=request.param))
    try:
        ports = json.loads(proc.stdout.readline())
        yield ports, ca
    finally:
        proc.kill()
        proc.wait()


def _get(ports, ca, path='/refusals', timeout=5):
    return requests.get('https://127.0.0.1:%d%s' % (ports['rest'], path),
                        verify=ca, timeout=timeout)


def _get_when_served(ports, ca, path, within):
    """GET `path`, again while the server sheds the connection (an EOF
    in the handshake), until `within` s have passed; returns its JSON."""
    end = time.monotonic() + within
    while True:
        try:
            return _get(ports, ca, path).json()
        except requests.exceptions.SSLError:
            if time.monotonic() > end:
                raise
            time.sleep(0.2)


def _drip(sock, payload, every=0.2, limit=5.0):
    """Send one byte every `every` s until the peer closes; returns
    (seconds until closed, seconds since the last byte sent)."""
    t0, last = time.monotonic(), None
    sock.settimeout(every)
    for i in range(len(payload)):
        try:
            sock.send(payload[i:i + 1])
            last = time.monotonic()
            if sock.recv(1) == b'':
                break
        except socket.timeout:
            continue
        except (OSError, ssl.SSLError):
            break
        if time.monotonic() - t0 > limit:
            break
    now = time.monotonic()
    return now - t0, now - last


def test_a_trickled_request_head_is_cut_at_its_deadline(servers):
    ports, ca = servers
    ctx = ssl.create_default_context(cafile=ca)
    s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', ports['rest'])),
                        server_hostname='127.0.0.1')
    lived, idle = _drip(s, HEAD)
    s.close()
    # Each read took 0.2 s (under any per-read timeout): only a deadline
    # on the whole head ends it, at 1 s, while it was still sending.
    assert 0.9 <= lived < 2.0 and idle < 0.5, (lived, idle)
    assert _get(ports, ca).json().get('rest/deadline') == 1


def test_a_trickled_tls_handshake_is_cut_at_its_deadline(servers):
    ports, ca = servers
    s = socket.create_connection(('127.0.0.1', ports['openflow']))
    lived, idle = _drip(s, client_hello())
    s.close()
    assert 0.9 <= lived < 2.0 and idle < 0.5, (lived, idle)
    assert _get(ports, ca).json().get('openflow/deadline') == 1


def test_a_newcomer_takes_the_oldest_unproven_place(servers):
    ports, ca = servers
    # 8 places, 4 an address: two addresses fill them, saying nothing.
    idle = [socket.create_connection(('127.0.0.1', ports['rest']),
                                     source_address=(src, 0))
            for src in ('127.0.0.2',) * 4 + ('127.0.0.3',) * 4]
    time.sleep(0.2)
    t = time.monotonic()
    r = _get(ports, ca, timeout=1.0)
    assert r.status_code == 200 and time.monotonic() - t < 1.0
    counts = r.json()
    assert counts.get('rest/evicted', 0) >= 1, counts
    idle[0].settimeout(1.0)
    assert idle[0].recv(1) == b''       # the oldest was the one cut
    for s in idle:
        s.close()


def test_an_address_over_its_share_is_refused_at_once(servers):
    ports, ca = servers
    held = [socket.create_connection(('127.0.0.1', ports['openflow']),
                                     source_address=('127.0.0.4', 0))
            for _ in range(5)]
    held[4].settimeout(1.0)
    t = time.monotonic()
    assert held[4].recv(1) == b''
    assert time.monotonic() - t < 0.5
    for s in held[:4]:              # within its share: still open
        s.setblocking(False)
        with pytest.raises(BlockingIOError):
            s.recv(1)
        s.close()
    held[4].close()
    assert _get(ports, ca).json().get('openflow/over_cap') == 1


def test_out_of_descriptors_the_listeners_shed_and_keep_serving(servers):
    ports, ca = servers
    # Leave the server a few descriptors, then flood both ports.
    _get(ports, ca, '/nofile?n=3')
    flood = []
    for port in (ports['openflow'], ports['rest']):
        for _ in range(20):
            try:
                flood.append(socket.create_connection(('127.0.0.1', port),
                                                      timeout=2))
            except OSError:
                pass
    time.sleep(0.5)
    for s in flood:
        s.close()
    time.sleep(1.5)             # the deadline frees the rest
    # On a loaded machine the flood's last handshakes may still hold the
    # few descriptors left, so a request may yet be shed: as a client
    # would, try again for a while. The listener must come back.
    counts = _get_when_served(ports, ca, '/nofile?n=4096', within=10.0)
    assert counts.get('openflow/no_descriptor', 0) + \
        counts.get('rest/no_descriptor', 0) >= 1, counts
    # Both listeners still serve.
    assert _get(ports, ca, timeout=1.0).status_code == 200
    s = socket.create_connection(('127.0.0.1', ports['openflow']))
    lived, _ = _drip(s, client_hello(), limit=3.0)
    assert lived < 2.0


def test_a_deadline_counts_from_the_accept_not_from_its_handler():
    """Under a flood a connection's handler may first run seconds after
    its accept: its deadline is what is left of it then."""
    from virtualwire.listen_guard import Deadline
    delays = []

    class Hub:
        def spawn_after(self, seconds, fn):
            delays.append(seconds)

    Deadline(Hub(), 10.0, object(), since=time.monotonic() - 2.6)
    Deadline(Hub(), 10.0, object())
    Deadline(Hub(), 10.0, object(), since=time.monotonic() - 60)
    assert 7.3 < delays[0] <= 7.4 and delays[1:] == [10.0, 0.0], delays


def test_a_rest_request_head_counts_from_the_accept_then_from_now(
        monkeypatch):
    """The REST listener's first head deadline is what is left of it since
    the accept (as OpenFlow's); a kept-alive connection's next request
    gets the whole deadline from when it is awaited."""
    from virtualwire.api import server
    from virtualwire.listen_guard import stamp
    delays = []

    class Hub:
        def spawn_after(self, seconds, fn):
            delays.append(seconds)

            class Timer:
                def cancel(self):
                    pass
            return Timer()

    class Conn:
        pass

    monkeypatch.setattr(server, 'hub', Hub())
    handler = server._HeadDeadline()
    handler.connection = Conn()
    stamp(handler.connection)
    handler.connection._vw_accepted -= 2.6
    handler._arm()
    handler._arm()
    assert 7.3 < delays[0] <= 7.4 and delays[1] == 10.0, delays
