"""/metrics: the Prometheus text format, parsed back with the library's own
parser; behind the API's bearer token; what the collector counted."""
import pytest
import webob
from prometheus_client.parser import text_string_to_metric_families

from virtualwire.api.rest import RestApi
from virtualwire.testing.harness import Harness

TOKEN = 'secret'


@pytest.fixture
def lab():
    h = Harness()
    h.host('h1', ('a', 1), ('u', 4))
    h.host('h2', ('b', 3))
    api = RestApi(h.loop, h.ctl, h.intent, h.runtime, TOKEN)
    return h, api


def get(api, path, token=TOKEN):
    req = webob.Request.blank(path)
    if token:
        req.headers['Authorization'] = 'Bearer ' + token
    return req.get_response(api)


def scrape(h, api, token=TOKEN):
    stop = h.run_threads()          # the exporter asks the loop, as live
    try:
        resp = get(api, '/metrics', token)
        _ = resp.body               # streamed: read while the loop runs
        return resp
    finally:
        stop()


def samples(resp):
    out = {}
    for fam in text_string_to_metric_families(resp.body.decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_need_the_token(lab):
    h, api = lab
    resp = scrape(h, api, token=None)
    assert resp.status_int == 401
    assert b'bearer token' in resp.body


def test_a_wires_counters_and_the_hosts_drops_are_exported(lab):
    h, api = lab
    w = h.connect('a', 'b')
    for _ in range(3):
        h.send('h1', 1)
    h.send('h1', 4)                                   # unwired: dropped
    h.collect()
    resp = scrape(h, api)
    assert resp.status_int == 200
    assert resp.headers['Content-Type'].startswith('text/plain; version=0.0.4')
    s = samples(resp)
    wid = w['connector_id']
    key = (('direction', 'a_to_b'), ('wire', wid))
    assert s[('virtualwire_wire_entered_packets_total', key)] == 3
    assert s[('virtualwire_wire_delivered_packets_total', key)] == 3
    assert s[('virtualwire_wire_lost_packets_total', key)] == 0
    assert s[('virtualwire_wire_unsettled_packets', key)] == 0
    info = [k for k in s if k[0] == 'virtualwire_wire_info']
    assert dict(info[0][1]) == {'wire': wid, 'end_a': 'a', 'end_b': 'b',
                                'state': 'tunnelled', 'site_a': 'default',
                                'site_b': 'default'}
    assert s[('virtualwire_host_dropped_packets_total',
              (('host', 'h1'), ('reason', 'unwired')))] == 1
    assert s[('virtualwire_host_connected',
              (('host', 'h2'), ('role', 'hypervisor'),
               ('site', 'default')))] == 1
    # The controller's own timings are there too.
    assert s[('virtualwire_event_loop_lag_seconds_count', ())] > 0


def test_rest_requests_are_timed_by_route_and_status(lab):
    h, api = lab
    stop = h.run_threads()
    try:
        for path in ('/v1/wires', '/v1/wires/99', '/nope'):
            get(api, path)
        s = samples(get(api, '/metrics'))
    finally:
        stop()
    count = 'virtualwire_rest_request_duration_seconds_count'
    assert s[(count, (('code', '200'), ('method', 'GET'),
                      ('route', 'list_wires')))] == 1
    assert s[(count, (('code', '404'), ('method', 'GET'),
                      ('route', 'show_wire')))] == 1
    assert s[(count, (('code', '404'), ('method', 'GET'),
                      ('route', 'unmatched')))] == 1


def test_the_grafana_dashboard_queries_only_metrics_we_export(lab):
    """ops/grafana/virtualwire-dashboard.json: every metric its PromQL
    names is one /metrics declares (a renamed metric breaks this, not an
    operator's dashboard)."""
    import json
    import os
    import re
    h, api = lab
    path = os.path.join(os.path.dirname(__file__), '..', '..', 'ops',
                        'grafana', 'virtualwire-dashboard.json')
    with open(path) as f:
        doc = json.load(f)
    exprs = [t['expr'] for p in doc['panels'] for t in p['targets']]
    exprs += [v['definition'] for v in doc['templating']['list']
              if 'definition' in v]
    used = {re.sub(r'_(total|bucket|count|sum)$', '', m)
            for e in exprs for m in re.findall(r'virtualwire_[a-z_]+', e)}
    text = scrape(h, api).body.decode()
    declared = set(re.findall(r'^# TYPE (virtualwire_[a-z_]+) ', text, re.M))
    declared |= {re.sub(r'_total$', '', n) for n in declared}
    assert used and used <= declared, sorted(used - declared)


def test_all_stats_and_vwctl_top_show_the_busiest_wire_first(lab):
    from virtualwire.cli.top import render, top_rows
    h, api = lab
    h.host('h2', ('b', 3), ('c', 5))
    w = h.connect('a', 'b')
    busy = h.connect('u', 'c')
    for _ in range(4):
        h.send('h1', 1)
    h.collect()
    for _ in range(6):
        h.send('h1', 1)
    for _ in range(9):
        h.send('h1', 4)
    h.collect()
    stop = h.run_threads()
    try:
        resp = get(api, '/v1/stats')
    finally:
        stop()
    assert resp.status_int == 200
    doc = resp.json
    [wire] = [x for x in doc['wires'] if x['id'] == w['id']]
    assert wire['a'] == 'a'
    assert wire['a_to_b']['entered_packets'] == 10
    assert wire['a_to_b']['window']['entered_packets'] == 6
    rows = top_rows(doc, 5)
    assert [r[0] for r in rows] == [busy['connector_id'], w['connector_id']]
    assert rows[1][7] == 0                         # nothing lost a->b
    assert 'busiest 2' in render(doc, 5)
    assert top_rows(doc, 1) == rows[:1]


def test_the_build_and_the_process_are_exported(lab):
    """After an upgrade an operator checks which build each process runs
    and on which hub: virtualwire_build_info says, as setup.py's version."""
    from importlib import metadata
    h, api = lab
    s = samples(scrape(h, api))
    info = [dict(k[1]) for k in s if k[0] == 'virtualwire_build_info']
    assert len(info) == 1
    assert info[0]['version'] == metadata.version('virtualwire')
    assert info[0]['os_ken'] == metadata.version('os-ken')
    assert info[0]['hub'] in ('eventlet', 'native')
    assert s[('process_resident_memory_bytes', ())] > 10 * 2**20
    assert s[('process_open_fds', ())] > 0


def test_probes_answer_without_a_token_and_say_only_what_fails(lab):
    """Load balancers and systemd probe /healthz and /readyz without a
    token: they learn alive or ready and the failing checks' names, no
    wire, host or count."""
    h, api = lab
    stop = h.run_threads()
    try:
        r = get(api, '/healthz', token=None)
        assert (r.status_int, r.json) == (200, {'status': 'alive'})
        r = get(api, '/readyz', token=None)
        # h1 and h2 are known and their switches in session.
        assert (r.status_int, r.json) == (200, {'status': 'ready'})
        h.intent.up = False
        r = get(api, '/readyz', token=None)
        assert (r.status_int, r.json) == (
            503, {'status': 'not ready', 'failing': ['intent-db']})
        h.intent.up = True
        h.ctl.roles.active, h.ctl.roles.leader = False, None  # neither role
        r = get(api, '/readyz', token=None)
        assert r.json['failing'] == ['role'] and r.status_int == 503
        h.ctl.roles.active = True
        h.host('h3', ('c', 5), connect=False)    # its switch never came
        r = get(api, '/readyz', token=None)
        assert (r.status_int, r.json) == (
            503, {'status': 'not ready', 'failing': ['hosts']})
    finally:
        stop()


def _wire(n, counted=True):
    c = {k: n for k in ('entered_packets', 'entered_bytes',
                        'delivered_packets', 'delivered_bytes',
                        'held_packets', 'lost_packets', 'unsettled_packets')}
    return {'connector_id': '0x%08x' % n, 'end_a': 'a%d' % n,
            'end_b': 'b%d' % n, 'state': 'tunnelled', 'site_a': 's',
            'site_b': None,
            'counters': {'a_to_b': c, 'b_to_a': c} if counted else None}


def test_the_wires_written_a_page_at_a_time_say_what_one_piece_said():
    """Pages (the hub runs between two) give the same families and
    samples as the whole list at once, each family's HELP and TYPE once."""
    from prometheus_client import generate_latest
    from virtualwire.metrics.exporter import (Fixed, wire_exposition,
                                              wire_families)
    wires = [_wire(n, counted=n % 3 != 0) for n in range(1, 12)]
    pauses = []
    paged = b''.join(wire_exposition(
        [wires[i:i + 4] for i in range(0, len(wires), 4)],
        pause=lambda: pauses.append(1))).decode()
    whole = generate_latest(Fixed(list(wire_families(wires)))).decode()
    assert len(pauses) == 3

    def families(text):
        return {f.name: sorted((s.name, tuple(sorted(s.labels.items())),
                                s.value) for s in f.samples)
                for f in text_string_to_metric_families(text)}
    assert families(paged) == families(whole)
    assert len(families(paged)['virtualwire_wire_info']) == 11
    assert paged.count('# TYPE ') == whole.count('# TYPE ') == 8
    assert b''.join(wire_exposition([])) == generate_latest(
        Fixed(list(wire_families([]))))


def test_a_scrape_reads_the_wires_in_pages_from_the_loop(lab, monkeypatch):
    """Many wires: each page is its own call on the loop, so switches'
    messages are handled between pages rather than after the lot."""
    from virtualwire.metrics import exporter
    h, api = lab
    monkeypatch.setattr(exporter, 'PAGE', 2)
    calls = []
    real = h.ctl.views.wire_metrics
    monkeypatch.setattr(h.ctl.views, 'wire_metrics',
                        lambda cids: calls.append(list(cids)) or real(cids))
    h.host('h3', ('c', 1), ('d', 2), ('e', 3))
    wires = [h.connect(x, y) for x, y in (('a', 'b'), ('u', 'c'),
                                          ('d', 'e'))]
    s = samples(scrape(h, api))
    assert {dict(k[1])['wire'] for k in s if k[0] == 'virtualwire_wire_info'
            } == {w['connector_id'] for w in wires}
    assert [len(c) for c in calls] == [2, 1]
