"""Extender links through the REST layer on an in-process controller: an
operator links two extenders, each agent reports itself and gets back the
links it should keep (the peer's public key and public endpoint, the
tunnel's addresses);
bad requests say what is wrong and change nothing."""
import base64
import json

import pytest
import webob

from virtualwire.api.rest import RestApi
from virtualwire.core import links
from virtualwire.core.model import EXTENDER, Encap, Host, Link
from virtualwire.testing.harness import Harness

TOKEN = 'secret'
FP = {n: base64.b64encode(bytes([i]) * 32).decode() for i, n in enumerate(
    ('xa', 'xb', 'xr', 'xz'), 1)}
SITES = {'xa': 'cloud-a', 'xb': 'cloud-b', 'xr': 'relay', 'xz': 'cloud-a'}


DPID = {'xa': 11, 'xb': 12, 'xr': 13, 'xz': 14}


def extender(name, dpid, links_up=(), public_key=None):
    """`public_key`: what its agent wrote in its OVSDB (default FP)."""
    return Host(name, dpid, (Encap('gre', '198.19.%d.2' % dpid, 65000),
                             Encap('xl', '100.64.0.%d' % dpid, 65001)),
                SITES[name], role=EXTENDER,
                links=tuple(Link(p, True) for p in links_up),
                public_key=FP[name] if public_key is None else public_key)


def publish(rest, name, key):
    """The extender's agent writes `key` in its own OVSDB."""
    rest.h.loop.post(rest.h.ctl.on_hosts, 'tcp:%s' % name,
                     [extender(name, DPID[name], public_key=key)])
    rest.h.settle()


@pytest.fixture
def rest():
    h = Harness()
    h.host('h1', ('a', 1))
    for i, n in enumerate(('xa', 'xb', 'xr', 'xz'), 11):
        h.loop.post(h.ctl.on_hosts, 'tcp:%s' % n, [extender(n, i)])
    h.settle()
    api = RestApi(h.loop, h.ctl, h.intent, h.runtime, TOKEN)

    def call(method, path, body=None):
        req = webob.Request.blank(path, method=method)
        req.headers['Authorization'] = 'Bearer ' + TOKEN
        if body is not None:
            req.body = json.dumps(body).encode()
        resp = req.get_response(api)
        h.settle()
        return resp.status_int, (resp.json if resp.body else None)
    call.h, call.api = h, api
    return call


def report(rest, name, port, public_ip, nat='endpoint-independent',
           uses=None):
    """`uses`: {peer: the key of it this extender's link uses}."""
    return rest('POST', '/v1/extenders/%s/report' % name, {
        'public_key': FP[name], 'nat': nat,
        'endpoints': {str(port): '%s:%d' % (public_ip, port)},
        'links': {p: {'state': 'up', 'peer_key': k}
                  for p, k in (uses or {}).items()}})


def test_linked_extenders_learn_each_others_key_and_endpoint(rest):
    status, link = rest('POST', '/v1/extender-links', {'a': 'xb', 'b': 'xa'})
    assert status == 201 and (link['a'], link['b']) == ('xa', 'xb')
    assert link['state'] == 'down'
    assert {n: s['port'] for n, s in link['sides'].items()} == \
        {'xa': 51820, 'xb': 51820}
    # xa reports before xb: nothing to connect to yet.
    assert report(rest, 'xa', 51820, '203.0.113.11') == \
        (200, {'links': [], 'relays': [], 'ports': [51820],
               'rotate_key': False, 'hurry': False})
    status, got = report(rest, 'xb', 51820, '203.0.113.12')
    # Inside the tunnel: addresses from the link addresses' host parts
    # (.11 and .12), and a VXLAN id of the pair.
    assert got['links'] == [{
        'peer': 'xa', 'peer_key': FP['xa'], 'remote': '203.0.113.11',
        'remote_port': 51820, 'local_port': 51820,
        'peer_link_ip': '100.64.0.11', 'pinned': False,
        'inner': '169.254.16.12', 'peer_inner': '169.254.16.11',
        'vni': 11 << 12 | 12, 'via': ''}]
    _, got = report(rest, 'xa', 51820, '203.0.113.11')
    assert got['links'][0]['peer_key'] == FP['xb']
    assert (got['links'][0]['inner'], got['links'][0]['peer_inner'],
            got['links'][0]['vni']) == ('169.254.16.11', '169.254.16.12',
                                        11 << 12 | 12)
    # A second link of xa gets xa's next port.
    _, k2 = rest('POST', '/v1/extender-links', {'a': 'xa', 'b': 'xr'})
    assert k2['sides']['xa']['port'] == 51821 and \
        k2['sides']['xr']['port'] == 51820


def test_the_view_says_why_two_symmetric_nats_stay_down(rest):
    rest('POST', '/v1/extender-links', {'a': 'xa', 'b': 'xb'})
    report(rest, 'xa', 51820, '203.0.113.11', nat='symmetric')
    report(rest, 'xb', 51820, '203.0.113.12', nat='symmetric')
    _, view = rest('GET', '/v1/extender-links')
    [k] = view['links']
    assert k['state'] == 'down' and 'symmetric' in k['why_down']
    assert k['sides']['xa']['public'] == '203.0.113.11:51820'


def _relayed(rest):
    """xa and xb behind symmetric NATs, xr public and linked to both."""
    for a, b in (('xa', 'xb'), ('xa', 'xr'), ('xb', 'xr')):
        assert rest('POST', '/v1/extender-links', {'a': a, 'b': b})[0] == 201
    report(rest, 'xr', 51820, '198.51.100.3', nat='public')
    report(rest, 'xa', 51820, '203.0.113.11', nat='symmetric')
    report(rest, 'xb', 51820, '203.0.113.12', nat='symmetric')


def test_two_symmetric_nats_link_through_a_relay_that_cannot_read(rest):
    _relayed(rest)
    # The relay is told its two ports for link xa-xb (the first link in
    # intent order) and whose public address may send to each ...
    _, got = report(rest, 'xr', 51820, '198.51.100.3', nat='public')
    assert got['relays'] == [{'a': 'xa', 'b': 'xb', 'port_a': 53820,
                              'port_b': 53821, 'allow_a': '203.0.113.11',
                              'allow_b': '203.0.113.12'}]
    assert {53820, 53821} <= set(got['ports'])
    # ... and each side is given the peer's key, but the relay's endpoint
    # for its side, once the relay has learned it at the rendezvous.
    _, got = report(rest, 'xa', 51820, '203.0.113.11', nat='symmetric')
    assert [k['peer'] for k in got['links']] == ['xr']
    rest('POST', '/v1/extenders/xr/report', {
        'public_key': FP['xr'], 'nat': 'public', 'endpoints': {
            '51820': '198.51.100.3:51820', '51821': '198.51.100.3:51821',
            '53820': '198.51.100.3:53820', '53821': '198.51.100.3:53821'}})
    _, got = report(rest, 'xa', 51820, '203.0.113.11', nat='symmetric')
    to_xb = next(k for k in got['links'] if k['peer'] == 'xb')
    assert (to_xb['peer_key'], to_xb['remote'], to_xb['remote_port'],
            to_xb['via']) == (FP['xb'], '198.51.100.3', 53820, 'xr')
    _, got = report(rest, 'xb', 51820, '203.0.113.12', nat='symmetric')
    to_xa = next(k for k in got['links'] if k['peer'] == 'xa')
    assert (to_xa['remote_port'], to_xa['via']) == (53821, 'xr')
    # The relay holds no key of the link it relays.
    _, got = report(rest, 'xr', 51820, '198.51.100.3', nat='public')
    assert FP['xa'] not in json.dumps(got['relays'])
    _, view = rest('GET', '/v1/extender-links')
    ab = next(k for k in view['links'] if (k['a'], k['b']) == ('xa', 'xb'))
    assert ab['relay'] == 'xr' and 'through relay xr' in ab['why_down']


def test_site_paths_show_direct_and_relayed(rest):
    _relayed(rest)
    h = rest.h
    for host in (extender('xa', 11, ['xb', 'xr']),
                 extender('xb', 12, ['xa', 'xr']),
                 extender('xr', 13, ['xa', 'xb'])):
        h.loop.post(h.ctl.on_hosts, 'tcp:%s' % host.name, [host])
    h.settle()
    _, view = rest('GET', '/v1/extender-links')
    ab = next(s for s in view['sites'] if s['sites'] == ['cloud-a',
                                                         'cloud-b'])
    # The path is the direct link's: the relay only forwards its
    # datagrams.
    assert ab['path'] == ['xa', 'xb'] and ab['relayed']
    assert ab['relays'] == ['xr']
    # Punchable NATs again: the link goes direct.
    report(rest, 'xa', 51820, '203.0.113.11')
    _, view = rest('GET', '/v1/extender-links')
    ab = next(s for s in view['sites'] if s['sites'] == ['cloud-a',
                                                         'cloud-b'])
    assert ab['path'] == ['xa', 'xb'] and not ab['relayed']


@pytest.mark.parametrize('body,status,words', [
    ({'a': 'xa', 'b': 'xa'}, 422, 'itself'),
    ({'a': 'xa', 'b': 'xz'}, 422, 'both in site cloud-a'),
    ({'a': 'xa', 'b': 'h1'}, 422, 'h1 is not an extender'),
    ({'a': 'xa', 'b': 'nope'}, 404, 'no host named nope'),
    ({'a': 'xa'}, 400, 'body must be'),
    ({'a': 'xa', 'b': 'xb', 'c': 1}, 400, 'body must be'),
    ({'a': 1, 'b': 'xb'}, 400, 'host names'),
])
def test_bad_links_are_refused_and_change_nothing(rest, body, status, words):
    got, err = rest('POST', '/v1/extender-links', body)
    assert got == status and words in err['error']['message'], err
    assert rest('GET', '/v1/extender-links')[1]['links'] == []


def test_a_second_identical_link_conflicts(rest):
    rest('POST', '/v1/extender-links', {'a': 'xa', 'b': 'xb'})
    status, err = rest('POST', '/v1/extender-links', {'a': 'xb', 'b': 'xa'})
    assert status == 409 and 'already linked' in err['error']['message']
    assert rest('DELETE', '/v1/extender-links/xb/xa')[0] == 204
    assert rest('DELETE', '/v1/extender-links/xb/xa')[0] == 404


@pytest.mark.parametrize('name,body,status,words', [
    ('h1', {'public_key': FP['xa']}, 422, 'not an extender'),
    ('nope', {'public_key': FP['xa']}, 404, 'no host'),
    ('xa', {'public_key': 'AB:CD'}, 400, 'WireGuard public key'),
    ('xa', {'public_key': FP['xa'][:-2] + '!='}, 400, 'WireGuard'),
    ('xa', {'public_key': FP['xa'], 'nat': 'cone'}, 400, 'nat must be'),
    ('xa', {'public_key': FP['xa'], 'endpoints': {'51820': '1.2.3:5'}},
     400, 'not IPv4:port'),
    ('xa', {'public_key': FP['xa'], 'endpoints': {'x': '1.2.3.4:5'}},
     400, 'not a port'),
    ('xa', {'public_key': FP['xa'], 'extra': 1}, 400, 'unknown field'),
])
def test_bad_reports_say_what_is_wrong(rest, name, body, status, words):
    got, err = rest('POST', '/v1/extenders/%s/report' % name, body)
    assert got == status and words in err['error']['message'], err
    assert rest.h.ctl.extenders.reports == {}


def test_punchable_unless_both_symmetric():
    r = {n: links.ExtenderReport(n, FP['xa'], nat) for n, nat in
         (('s1', 'symmetric'), ('s2', 'symmetric'),
          ('e', 'endpoint-independent'))}
    assert not links.punchable(r['s1'], r['s2'])
    assert links.punchable(r['s1'], r['e']) and links.punchable(None, None)


def test_a_key_rotation_is_asked_until_a_new_key_is_reported(rest):
    rest('POST', '/v1/extender-links', {'a': 'xa', 'b': 'xb'})
    assert rest('POST', '/v1/extenders/xb/rotate-key')[0] == 404  # no report
    report(rest, 'xb', 51820, '203.0.113.12')
    report(rest, 'xz', 51821, '203.0.113.13')
    assert not report(rest, 'xa', 51820, '203.0.113.11')[1]['hurry']
    status, doc = rest('POST', '/v1/extenders/xb/rotate-key')
    assert status == 202 and doc['replacing'] == FP['xb']
    got = report(rest, 'xb', 51820, '203.0.113.12')[1]
    assert got['rotate_key'] and got['hurry']
    # xb's peer reports often too (each step waits for a report); an
    # extender not linked with xb does not.
    assert report(rest, 'xa', 51820, '203.0.113.11')[1]['hurry']
    assert not report(rest, 'xz', 51821, '203.0.113.13')[1]['hurry']
    FP['xb'], old = base64.b64encode(b'\xab' * 32).decode(), FP['xb']
    try:
        publish(rest, 'xb', FP['xb'])
        rest.h.now += 1
        _, got = report(rest, 'xb', 51820, '203.0.113.12')
        assert not got['rotate_key']
        # xa still uses xb's old key: xb must not switch to its new one
        # yet (its handshakes would go unanswered) ...
        assert not got['links'][0]['pinned']
        rest.h.now += 1
        [k] = report(rest, 'xa', 51820, '203.0.113.11',
                     uses={'xb': old})[1]['links']
        assert k['peer_key'] == FP['xb']       # xa is given the new one
        _, got = report(rest, 'xb', 51820, '203.0.113.12')
        assert not got['links'][0]['pinned']
        # ... and may once xa says it uses the new key.
        rest.h.now += 0.1
        report(rest, 'xa', 51820, '203.0.113.11', uses={'xb': FP['xb']})
        [k] = report(rest, 'xb', 51820, '203.0.113.12')[1]['links']
        assert k['pinned']
        # The hurry ends by itself.
        rest.h.now += 10
        assert not report(rest, 'xb', 51820, '203.0.113.12')[1]['hurry']
        assert not report(rest, 'xa', 51820, '203.0.113.11')[1]['hurry']
    finally:
        FP['xb'] = old


def test_link_addresses_must_differ_in_their_host_parts(rest):
    """Tunnel addresses come from the link addresses' low 12 bits: two
    extenders that share them (a link network wider than /20) cannot be
    linked, and the error says why."""
    h = rest.h
    clash = Host('xq', 15, (Encap('gre', '198.19.9.2', 65000),
                            Encap('xl', '100.65.0.11', 65001)), 'cloud-q',
                 role=EXTENDER)
    h.loop.post(h.ctl.on_hosts, 'tcp:xq', [clash])
    h.settle()
    status, err = rest('POST', '/v1/extender-links', {'a': 'xq', 'b': 'xb'})
    assert status == 422 and 'same low 12 bits' in err['error']['message']
    assert 'xa' in err['error']['message'] and '/20' in \
        err['error']['message']
    assert rest('GET', '/v1/extender-links')[1]['links'] == []


def test_tunnel_addresses_agree_from_both_ends():
    a = links.tunnel_addresses('10.0.7.1', '10.0.9.200')
    b = links.tunnel_addresses('10.0.9.200', '10.0.7.1')
    assert (a[0], a[1]) == (b[1], b[0]) and a[2] == b[2]
    assert a[:2] == ('169.254.23.1', '169.254.25.200')


def _key_refusals(rest):
    return [r['why'] for r in rest('GET', '/v1/status')[1]['admission'][
        'recent_refusals'] if r['kind'] == 'extender key']


def test_a_token_alone_cannot_replace_an_extenders_key(rest):
    """Issue 39, point 2: a report with xb's token and the thief's key
    used to be given to xb's peers at once. The key must also be what
    xb's own OVSDB (read under its certificate) shows."""
    h = rest.h
    audit = []
    rest.api.audit_log.record = lambda *a: audit.append(a)
    rest('POST', '/v1/extender-links', {'a': 'xa', 'b': 'xb'})
    report(rest, 'xb', 51820, '203.0.113.12')
    thief = base64.b64encode(b'\x66' * 32).decode()

    def xas_view_of_xb():
        [k] = report(rest, 'xa', 51820, '203.0.113.11')[1]['links']
        return k['peer_key']
    assert xas_view_of_xb() == FP['xb']
    FP['xb'], real = thief, FP['xb']
    try:
        for _ in range(4):          # a report a second, past the grace
            assert report(rest, 'xb', 51820, '203.0.113.12')[0] == 200
            assert xas_view_of_xb() == real
            h.now += 1.0
    finally:
        FP['xb'] = real
    assert _key_refusals(rest) == [
        'extender xb reports public key %s, which its own OVSDB (read '
        'under its certificate) does not show (%s): not given to its '
        'peers' % (thief, real)]
    status = rest('GET', '/v1/status')[1]['counters']
    assert status['extender_keys_refused'] == 1
    assert status['extender_key_changes'] == 2          # xa's and xb's first
    [entry] = [a for a in audit if a[4] == 'extender_key_change' and
               a[6] == 403]
    assert entry[5]['new'] == thief and entry[5]['result'] == 'refused'


def test_a_key_change_not_asked_for_is_taken_once_a_minute(rest):
    h = rest.h
    rest('POST', '/v1/extender-links', {'a': 'xa', 'b': 'xb'})
    report(rest, 'xb', 51820, '203.0.113.12')
    keys = [base64.b64encode(bytes([0x70 + i]) * 32).decode()
            for i in range(2)]
    real = FP['xb']
    try:
        # xb's agent reinstalled: a new key in its OVSDB and its report.
        h.now += 120
        FP['xb'] = keys[0]
        publish(rest, 'xb', keys[0])
        report(rest, 'xb', 51820, '203.0.113.12')
        [k] = report(rest, 'xa', 51820, '203.0.113.11')[1]['links']
        assert k['peer_key'] == keys[0]
        # Again 10 s later: not taken (the peers keep keys[0]) and alarmed.
        h.now += 10
        FP['xb'] = keys[1]
        publish(rest, 'xb', keys[1])
        report(rest, 'xb', 51820, '203.0.113.12')
        [k] = report(rest, 'xa', 51820, '203.0.113.11')[1]['links']
        assert k['peer_key'] == keys[0]
        assert 'at most once per 60 s' in _key_refusals(rest)[-1]
        # A minute on it is taken.
        h.now += 60
        report(rest, 'xb', 51820, '203.0.113.12')
        [k] = report(rest, 'xa', 51820, '203.0.113.11')[1]['links']
        assert k['peer_key'] == keys[1]
    finally:
        FP['xb'] = real
