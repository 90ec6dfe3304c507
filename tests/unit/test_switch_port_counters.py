"""Provider switches' per-port counters (issue 41): read with the wires'
counters in one request, by the controller's own collector and by the
collector process (through its feed and the controller's mirror), shown
by `GET /v1/switches`, `vwctl switch list` and /metrics; a tenant's
/metrics shows its own switches only, and never where they run."""
import json

import pytest
import webob
from prometheus_client.parser import text_string_to_metric_families

from test_collector_fleet import LoopHere, World, stat
from virtualwire.api.rest import RestApi
from virtualwire.cli import switches as cli
from virtualwire.core import ids
from virtualwire.metrics import switch_ports
from virtualwire.metrics.remote import RemoteCollector
from switch_lan import BROADCAST, hosts, mac, send



def test_one_masked_request_reads_wires_and_switches_and_nothing_else():
    sw = ids.switch_cookie(3, 2, ids.SW_ENTERED)
    wire = ids.wire_cookie(0xDEADBEEF) | ids.ROLE_ENTERS_A
    for ours in (sw, wire):
        assert ours & switch_ports.READ_MASK == switch_ports.READ_MARK
    for theirs in (0, 0x1234 << 48, (0x5657 ^ 0x100) << 48):
        assert theirs & switch_ports.READ_MASK != switch_ports.READ_MARK
    assert switch_ports.is_switch_flow(sw)
    assert not switch_ports.is_switch_flow(wire)


def test_counts_per_port_from_the_cookies_alone():
    n = 5
    readings = [
        (ids.switch_cookie(n, 1, ids.SW_ENTERED), 7),
        (ids.switch_cookie(n, 1, ids.SW_FLOODED), 3),
        (ids.switch_cookie(n, 1, ids.SW_LEARNED), 40),    # one MAC each
        (ids.switch_cookie(n, 1, ids.SW_LEARNED), 2),
        (ids.switch_cookie(n, 2, ids.SW_ENTERED), 1),
        (ids.switch_cookie(n, 0, ids.SW_BAD_SOURCE), 9),  # not a port's
        (ids.switch_cookie(n, 2), 4),                     # a hairpin drop
        (ids.wire_cookie(9) | ids.ROLE_ENTERS_A, 100),    # a wire's
    ]
    assert switch_ports.host_counts(readings) == {
        n: {1: (7, 3, 2), 2: (1, 0, 0)}}


def test_a_feed_sends_what_changed_and_a_full_one_replaces_the_mirror():
    p = switch_ports.SwitchPorts()
    p.take('h1', [(ids.switch_cookie(1, 1, ids.SW_ENTERED), 4)], gen=3)
    p.take('h2', [(ids.switch_cookie(2, 1, ids.SW_ENTERED), 1)], gen=4)
    p.take('h1', [(ids.switch_cookie(1, 1, ids.SW_ENTERED), 4)], gen=5)
    assert set(p.feed(3)) == {'h2'}, 'h1 did not change after gen 3'
    m = switch_ports.SwitchPorts()
    m.hosts = {'gone': {9: {1: (1, 1, 1)}}}
    m.apply(json.loads(json.dumps(p.feed())), full=True)
    assert m.hosts == p.hosts
    assert m.of('h1', 1) == {1: (4, 0, 0)}
    assert m.of('h1', 7) == {} and m.of('h9', 1) is None


@pytest.fixture
def lab():
    h = hosts()
    h.host('h2', ('c', 3), ('x', 9))
    h.intent.ownership.assign('x', 'rival')
    tokens = {'t': 't'}
    for tenant in ('shop', 'rival'):
        tokens[tenant] = h.intent.credentials.issue('tenant', tenant)[0]
    rest = RestApi(h.loop, h.ctl, h.intent, h.runtime, 't')

    def call(method, path, body=None, as_='t', raw=False):
        req = webob.Request.blank(path, method=method)
        req.headers['Authorization'] = 'Bearer %s' % tokens[as_]
        if body is not None:
            req.body = json.dumps(body).encode()
        resp = req.get_response(rest)
        if not raw:
            h.settle()
        if raw:
            return resp.status_int, resp.body.decode()
        return resp.status_int, resp.json if resp.body else None
    call.h = h
    st, _ = call('POST', '/v1/switches', {'name': 'web', 'ports': 4,
                                          'tenant': 'shop', 'host': 'h1'})
    assert st == 201
    for i, v in enumerate('abcd', 1):
        assert call('POST', '/v1/wires',
                    {'a': v, 'b': 'sw:web/p%d' % i})[0] == 201
    st, _ = call('POST', '/v1/switches', {'name': 'den', 'ports': 1,
                                          'tenant': 'rival', 'host': 'h2'})
    assert st == 201
    return call


def ports_of(call, name, as_='t'):
    st, doc = call('GET', '/v1/switches', as_=as_)
    assert st == 200, doc
    sw = {s['name']: s for s in doc['switches']}[name]
    return {p['name']: p['counters'] for p in sw['ports']}


def samples(text):
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_the_collector_counts_each_port_and_the_list_shows_them(lab):
    h = lab.h
    h.collect()
    assert set(ports_of(lab, 'web')['p1'].values()) == {0}
    send(h, 'c', BROADCAST)        # entered on p3, flooded to p1 p2 p4
    send(h, 'a', mac('c'))         # c learned: straight to p3
    send(h, 'a', mac('c'))
    assert ports_of(lab, 'web')['p1']['entered_packets'] == 0, \
        'nothing is read between readings'
    h.collect()
    ports = ports_of(lab, 'web')
    assert ports['p3'] == {'entered_packets': 1, 'flooded_packets': 1,
                           'delivered_packets': 2, 'learned_macs': 1}
    assert ports['p1'] == {'entered_packets': 2, 'flooded_packets': 0,
                           'delivered_packets': 1, 'learned_macs': 1}
    assert ports['p2'] == {'entered_packets': 0, 'flooded_packets': 0,
                           'delivered_packets': 1, 'learned_macs': 0}
    st, doc = lab('GET', '/v1/switches')
    rows = cli._list_rows(doc['switches'])
    assert rows[1][:7] == ['web', 'shop', 'h1', '4/4', 3, 1, 2], rows


def test_metrics_export_each_port_and_a_tenant_sees_only_its_own(lab):
    h = lab.h
    send(h, 'c', BROADCAST)
    send(h, 'd', mac('c'))
    h.collect()
    stop = h.run_threads()          # /metrics asks the loop, as live
    try:
        st, text = lab('GET', '/metrics', raw=True)
        st2, mine = lab('GET', '/metrics', as_='shop', raw=True)
    finally:
        stop()
    assert st == 200, text
    s = samples(text)
    port = (('port', 'p3'), ('switch', 'web'))
    assert s[('virtualwire_provider_switch_port_entered_packets_total',
              port)] == 1
    assert s[('virtualwire_provider_switch_port_delivered_packets_total',
              port)] == 1
    assert s[('virtualwire_provider_switch_port_flooded_packets_total',
              port)] == 1
    assert s[('virtualwire_provider_switch_port_learned_macs', port)] == 1
    assert s[('virtualwire_provider_switch_info',
              (('host', 'h1'), ('switch', 'web'), ('tenant', 'shop')))] == 1
    assert st2 == 200 and 'switch="web"' in mine, mine
    assert 'switch="den"' not in mine and 'h1' not in mine, mine


def test_the_mirror_of_a_collector_process_shows_the_same_counts():
    w = World()
    f = w.fleet
    w.read_h1([stat(1, ids.switch_cookie(4, 2, ids.SW_ENTERED), 6),
               stat(1, ids.switch_cookie(4, 2, ids.SW_LEARNED), 1)])
    assert w.sent, 'one request per reading'
    f.ready = True
    f.sample()
    assert not f.counters.wires[7], 'a switch flow is no wire counter'
    m = RemoteCollector(LoopHere(), ['https://c'], 'tok', clock=lambda: w.t)
    m.apply('https://c', f.feed('', 0))
    assert m.switch_counts('h1', 4) == {2: (6, 0, 1)}
    gen = f.gen
    f.sample()
    assert f.feed(f.epoch, gen)['switch_ports'] == {}, 'nothing changed'
