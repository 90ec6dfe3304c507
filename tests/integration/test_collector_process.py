"""The collector in its own process (`virtualwire-collector`), on the real
lab: every switch connected to it as a SLAVE (the switch refuses its
writes), its API closed to anyone without its own token, and counters
that go on through the collector killed (-9) under a stream: the
controller says the figures are unavailable, and why, while it is gone;
after the restart they continue from the saved base and include what the
switches counted meanwhile."""
import json
import signal
import time

import requests

from vwtest import wait_until


def _roles(host):
    out = host.vsctl('--format=json', '--columns=target,role,is_connected',
                     'list', 'controller')
    return {int(t.rsplit(':', 1)[1]): (r if isinstance(r, str) else '', c)
            for t, r, c in json.loads(out)['data']}


def test_every_switch_is_read_by_the_collector_as_a_slave(lab, api):
    # (ovs-vswitchd writes a connection's status a few seconds late.)
    want = {lab.collector_of_port: ('slave', True),
            lab.of_port: ('master', True)}
    for h in lab.hosts:
        wait_until(lambda h=h: _roles(h) == want, 20,
                   what='%s: the collector SLAVE, the controller MASTER'
                   % h.name)
    st = lab.collector_get('/v1/status')
    assert st['switches'] == len(lab.hosts) and st['switches_unnamed'] == 0
    before = st['readings']
    wait_until(lambda: lab.collector_get('/v1/status')['readings'] >=
               before + 2 * len(lab.hosts), 10,
               what='every switch read twice more')
    # The controller's figures come from that process, not its own loop.
    mine = api.ok('GET', '/v1/status')['collector']
    assert mine['process'] == lab.collector_url and mine['error'] is None


def test_the_collector_api_needs_its_own_token(lab):
    url = lab.collector_url + '/v1/counters'
    with open(lab.token_file) as f:
        operator = f.read().strip()
    for headers in ({}, {'Authorization': 'Bearer ' + operator},
                    {'Authorization': 'Bearer x'}):
        r = requests.get(url, headers=headers, timeout=10,
                         verify=lab.verify)
        assert r.status_code == 401 and 'token' in r.json()['error']
    with open(lab.collector_token_file) as f:
        r = requests.post(url, timeout=10, verify=lab.verify, headers={
            'Authorization': 'Bearer ' + f.read().strip()})
    assert r.status_code == 405, 'nothing there changes anything'


def test_counters_go_on_through_the_collector_killed(lab, api, pair,
                                                     streams):
    va, vb, w = pair('h1', 'h2')
    wid = w['id']
    stats = '/v1/wires/%d/stats' % wid
    stream = streams(va, vb, '192.0.2.2', 6300, rate=500)
    time.sleep(3.0)
    counted = wait_until(
        lambda: api.ok('GET', stats)['a_to_b']['entered_packets'] or None,
        10, what='counts while the stream runs')
    lab.collector_proc.send_signal(signal.SIGKILL)
    lab.collector_proc.wait(10)
    lab.collector_proc = None

    def refused():
        r = api.req('GET', stats)      # (a 503 Response is falsy)
        return [r.json()['error']['message']] if r.status_code == 503 \
            else None
    [why] = wait_until(refused, 15, what='the controller saying figures '
                       'are unavailable')
    assert 'collector' in why and lab.collector_url in why, why
    # Wires themselves are not the collector's: they carry on.
    assert api.ok('GET', '/v1/wires/%d' % wid)['state'] == 'tunnelled'
    time.sleep(3.0)         # the switches count on, unread
    lab.start_collector()
    time.sleep(1.0)         # counted on while it starts
    sent, got, missing, dups = stream.stop()
    assert (got, missing, dups) == (sent, 0, 0), (sent, got, missing, dups)

    def whole():
        r = api.req('GET', stats)
        if r.status_code != 200:
            return None
        n = r.json()['a_to_b']['entered_packets']
        return n if n >= sent else None
    total = wait_until(whole, 30, what='the restarted collector counting '
                       'the whole stream')
    # Never backwards, nothing counted twice: the stream, plus at most
    # the guests' own background frames (ARP, IPv6 ND).
    assert counted <= total <= sent + 20, (counted, total, sent)
