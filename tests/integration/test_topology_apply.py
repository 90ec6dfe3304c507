"""Topologies applied to the running lab with `vwctl topology`, as a tenant
would: a three-tier network (client, a firewall VM with two vNICs, a switch
VM, two web servers, a database) carries traffic end to end through the
firewall; an edited file changes only the links edited while a 1 kHz stream
on untouched wires loses nothing; a second apply changes no flow; bad
files are refused naming the line and change nothing; the graph has the
file's nodes and links; destroy removes exactly the topology's wires."""
import json
from collections import Counter
import re
import threading
import time
import xml.etree.ElementTree as ET

import pytest

from vwtest import flows_of, wait_until
from virtualwire.cli import vwctl
from virtualwire.core import ids
from virtualwire.core.topology_file import parse
from vwlab import topology as lab_topology
from vwtest.wire_traffic import udp_stream

SHOP = """\
# A three-tier shop: the client reaches the web and database tier only
# through the firewall; a switch VM joins the tier.
name: shop
nodes:
  client: {vm: shop-client, nics: {eth0: 10.61.1.2/24}}
  fw:
    vm: shop-fw
    kind: firewall
    nics: {eth0: 10.61.1.1/24, eth1: 10.61.2.1/24}
  sw:
    vm: shop-sw
    kind: switch
    nics: {eth0: null, eth1: null, eth2: null, eth3: null}
  web1: {vm: shop-web1, nics: {eth0: 10.61.2.11/24, eth1: 10.61.3.1/24}}
  web2: {vm: shop-web2, nics: {eth0: 10.61.2.12/24}}
  db: {vm: shop-db, nics: {eth0: 10.61.2.20/24}}
links:
  - endpoints: ["client:eth0", "fw:eth0"]
  - endpoints: ["fw:eth1", "sw:eth0"]
  - endpoints: ["sw:eth1", "web1:eth0"]
  - endpoints: ["sw:eth2", "web2:eth0"]
  - endpoints: ["sw:eth3", "db:eth0"]
"""
# The edit: sw:eth2 - web2:eth0 removed, the database re-pointed from the
# switch's eth3 to its eth2, web2 added behind web1.
EDITED = SHOP.replace(
    '  - endpoints: ["sw:eth2", "web2:eth0"]\n'
    '  - endpoints: ["sw:eth3", "db:eth0"]\n',
    '  - endpoints: ["sw:eth2", "db:eth0"]\n'
    '  - endpoints: ["web1:eth1", "web2:eth0"]\n')
PLACES = {'client': 'h1', 'fw': 'h2', 'sw': 'h2', 'web1': 'h3',
          'web2': 'h1', 'db': 'h3'}
UNTOUCHED = ['client:eth0|fw:eth0', 'fw:eth1|sw:eth0', 'sw:eth1|web1:eth0']


def configure(vms):
    """Inside the VMs: the firewall routes, the switch bridges, the tier
    routes back to the client's subnet through the firewall."""
    fw, sw = vms['fw'], vms['sw']
    fw.sh(['sysctl', '-qw', 'net.ipv4.ip_forward=1'])
    sw.sh('ip link add br0 type bridge && ip link set br0 up && '
          'for i in 0 1 2 3; do ip link set eth$i master br0; done')
    vms['client'].sh(['ip', 'route', 'add', 'default', 'via', '10.61.1.1'])
    for n in ('web1', 'web2', 'db'):
        vms[n].sh(['ip', 'route', 'add', '10.61.1.0/24', 'via', '10.61.2.1'])


CONFIG = {}


def ctl(capsys, *args, token_file=None):
    """vwctl as a user runs it, with the lab's config: (exit code, stdout,
    stderr)."""
    argv = ['--config', CONFIG['path']] + list(args)
    if token_file:
        argv = ['--token-file', token_file] + argv
    code = vwctl.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def table(host, cookie=None):
    """The host's flows as the switch holds them (of one wire, given its
    connector id), without counters: what a change of flows changes."""
    return sorted(re.sub(r'(duration|n_packets|n_bytes|idle_age|hard_age)'
                         r'=[^,]*, ?', '', line)
                  for line in flows_of(host, cookie and hex(
                      ids.wire_cookie(cookie))))


def untouched_flows(lab, links):
    return {h.name: [f for k in UNTOUCHED for f in table(h, links[k]['id'])]
            for h in lab.hosts}


@pytest.fixture(scope='module')
def shop(lab, api, tmp_path_factory):
    d = tmp_path_factory.mktemp('shop')
    files = {}
    for name, text in (('shop', SHOP), ('edited', EDITED)):
        files[name] = str(d / ('%s.yaml' % name))
        with open(files[name], 'w') as f:
            f.write(text)
    topo = parse(SHOP, 'shop.yaml')
    vms = lab_topology.create_vms(lab, topo, PLACES)
    configure(vms)
    # The shop is a tenant: its vNICs are its own, and so is its token.
    for vm in vms.values():
        for vnic in vm.nics:
            api.ok('PUT', '/v1/vnics/%s/tenant' % vnic,
                   json={'tenant': 'shop'})
    CONFIG['path'] = lab.vwctl_config
    yield {'vms': vms, 'files': files, 'dir': d,
           'token': lab.credential('tenant', 'shop')}
    api.req('DELETE', '/v1/topologies/shop?tenant=shop')
    for vm in vms.values():
        vm.host.remove_vm(vm)


def connectors(links):
    return {k: w['connector_id'] for k, w in links.items()}


def wires_by_link(api):
    view = api.ok('GET', '/v1/topologies/shop?tenant=shop')
    return {k['link']: k for k in view['links']}, view


def test_apply_edit_idempotence_graph_destroy(lab, api, shop, capsys):
    vms, files, token = shop['vms'], shop['files'], shop['token']
    wait_until(lambda: {v for vm in vms.values() for v in vm.nics} <= {
        v['id'] for v in api.ok('GET', '/v1/vnics')['vnics']}, 30,
        what='every vNIC plugged')

    # Apply: the plan, then the wires.
    code, out, err = ctl(capsys, 'topology', 'apply', files['shop'],
                         '--wait', token_file=token)
    assert code == 0, err
    assert 'applied shop: created 5, deleted 0, kept 0 wires' in out
    links, view = wires_by_link(api)
    assert {k: w['state'] for k, w in links.items()} == {
        'client:eth0|fw:eth0': 'tunnelled', 'fw:eth1|sw:eth0': 'collapsed',
        'sw:eth1|web1:eth0': 'tunnelled', 'sw:eth2|web2:eth0': 'tunnelled',
        'db:eth0|sw:eth3': 'tunnelled'}
    c = vms['client']
    for ip in ('10.61.1.1', '10.61.2.11', '10.61.2.12', '10.61.2.20'):
        wait_until(lambda: c.ping(ip, count=1)[1] == 1, 15,
                   what='client reaches %s through the firewall' % ip)
    sent, got = udp_stream(c, vms['db'], '10.61.2.20', seconds=1, port=6601)
    assert got['received'] == sent['sent'] == 1000, got

    # A second apply is a no-op: the same answer, not one flow changed.
    before = {h.name: table(h) for h in lab.hosts}
    code, out, err = ctl(capsys, 'topology', 'apply', files['shop'],
                         token_file=token)
    assert code == 0 and 'nothing to do' in out, (out, err)
    assert {h.name: table(h) for h in lab.hosts} == before

    # The edit, with a 1 kHz stream client -> web1 on untouched wires.
    code, out, _ = ctl(capsys, 'topology', 'apply', files['edited'],
                       '--dry-run', token_file=token)
    assert code == 0 and 'would create 2, delete 2, keep 3' in out, out
    assert connectors(wires_by_link(api)[0]) == connectors(links)  # dry
    flows_untouched = untouched_flows(lab, links)
    assert sum(map(len, flows_untouched.values())) >= 6
    result = {}
    stream = threading.Thread(target=lambda: result.update(zip(
        ('sent', 'got'), udp_stream(c, vms['web1'], '10.61.2.11', seconds=6,
                                    port=6602))))
    stream.start()
    time.sleep(2.0)
    t0 = time.time()
    code, out, err = ctl(capsys, 'topology', 'apply', files['edited'],
                         '--wait', token_file=token)
    t1 = time.time()
    stream.join(30)
    assert code == 0, err
    assert 'created 2, deleted 2, kept 3' in out, out
    got = result['got']
    # The sender was sending before and after the apply, and nothing was
    # lost or doubled on the untouched wires.
    assert got['first_at'] < t0 and got['last_at'] > t1, (got, t0, t1)
    assert got['missing'] == 0 and got['duplicates'] == 0, got
    assert got['received'] == result['sent']['sent'] == 6000
    now, view = wires_by_link(api)
    for k in UNTOUCHED:
        assert now[k]['connector_id'] == links[k]['connector_id']
    assert set(now) == set(UNTOUCHED) | {'db:eth0|sw:eth2',
                                         'web1:eth1|web2:eth0'}
    assert untouched_flows(lab, links) == flows_untouched
    # The database is on the switch's eth2 now; web2 is off the switch.
    wait_until(lambda: c.ping('10.61.2.20', count=1)[1] == 1, 15,
               what='the database through its re-pointed wire')
    assert c.ping('10.61.2.12', count=3)[1] == 0

    # The picture: the file's nodes and links, each wire's state.
    svg = str(shop['dir'] / 'shop.svg')
    code, out, _ = ctl(capsys, 'topology', 'graph', 'shop', '-o', svg,
                       token_file=token)
    assert code == 0 and 'wrote %s: 6 nodes, 5 links' % svg in out
    root = ET.parse(svg).getroot()
    g = [e for e in root.iter() if e.get('data-node')]
    assert sorted(e.get('data-node') for e in g) == sorted(PLACES)
    drawn = {e.get('data-link'): e.get('data-state') for e in root.iter()
             if e.get('data-link')}
    assert drawn == {k: w['state'] for k, w in now.items()}

    # inspect, for people and for scripts.
    code, out, _ = ctl(capsys, 'topology', 'inspect', 'shop',
                       token_file=token)
    assert code == 0 and 'shop (tenant shop)' in out
    assert re.search(r'fw\s+firewall\s+\S+\s+eth1\s+shop-fw-eth1\s+h2', out)
    code, out, _ = ctl(capsys, '--json', 'topology', 'inspect', 'shop',
                       token_file=token)
    assert [n['name'] for n in json.loads(out)['nodes']] == list(PLACES)


BAD = [
    ('unknown VM', ('{vm: shop-db,', '{vm: shop-nosuch,'), 16,
     "no VM 'shop-nosuch' is known"),
    ('unknown vNIC', ('web2: {vm: shop-web2, nics: {eth0: 10.61.2.12/24}}',
                      'web2: {vm: shop-web2, nics: {eth0: {vnic: nope}}}'),
     15, 'no vNIC nope is plugged'),
    ('a vNIC twice', ('web2: {vm: shop-web2, nics: {eth0: 10.61.2.12/24}}',
                      'web2: {vm: shop-web2, nics: {eth0: {vnic: '
                      'shop-db-eth0}}}'), 16, 'is vNIC shop-db-eth0, as'),
    ('schema', ('kind: switch', 'kind: hub'), 12, "'hub' is not one of"),
]


@pytest.mark.parametrize('what,edit,line,words', BAD,
                         ids=[b[0] for b in BAD])
def test_a_bad_file_is_refused_naming_the_line(lab, api, shop, capsys, what,
                                               edit, line, words):
    """Against the applied topology: refused (FILE:LINE: why, exit 1), no
    wire and no flow changed."""
    ctl(capsys, 'topology', 'apply', shop['files']['shop'],
        token_file=shop['token'])
    path = str(shop['dir'] / 'bad.yaml')
    assert edit[0] in SHOP
    with open(path, 'w') as f:
        f.write(SHOP.replace(*edit))
    wires = api.ok('GET', '/v1/wires')
    flows = {h.name: table(h) for h in lab.hosts}
    code, out, err = ctl(capsys, 'topology', 'apply', path,
                         token_file=shop['token'])
    assert code == 1 and out == ''
    assert err.startswith('vwctl: error: %s:%d: ' % (path, line)), err
    assert words in err and '(HTTP 422)' in err
    assert api.ok('GET', '/v1/wires') == wires
    assert {h.name: table(h) for h in lab.hosts} == flows


def test_another_tenants_vnic_is_refused_as_unknown(lab, api, shop, pair,
                                                    capsys):
    va, _vb, w = pair('h1', 'h3', '10.62.0.1/24', '10.62.0.2/24')
    rival = list(va.nics)[0]
    api.ok('PUT', '/v1/vnics/%s/tenant' % rival, json={'tenant': 'rival'})
    path = str(shop['dir'] / 'rival.yaml')
    with open(path, 'w') as f:
        f.write(SHOP.replace('{vm: shop-web2, nics: {eth0: 10.61.2.12/24}}',
                             '{vm: shop-web2, nics: {eth0: {vnic: %s}}}'
                             % rival))
    code, _out, err = ctl(capsys, 'topology', 'apply', path,
                          token_file=shop['token'])
    assert code == 1 and ':15: ' in err
    assert 'no vNIC %s is plugged or reported on any host' % rival in err
    assert api.wire(w['id'])['state'] == 'tunnelled'


def test_destroy_removes_exactly_the_topologys_wires(lab, api, shop, pair,
                                                     capsys):
    va, vb, w = pair('h2', 'h3', '10.63.0.1/24', '10.63.0.2/24')
    ctl(capsys, 'topology', 'apply', shop['files']['shop'],
        token_file=shop['token'])
    mine = {k['connector_id'] for k in wires_by_link(api)[1]['links']}
    assert len(mine) == 5
    code, out, err = ctl(capsys, 'topology', 'destroy', 'shop', '--wait',
                         token_file=shop['token'])
    assert code == 0 and 'deleted 5 wires' in out, err
    left = {x['connector_id'] for x in api.ok('GET', '/v1/wires')['wires']}
    assert not mine & left and w['connector_id'] in left
    assert va.ping('10.63.0.2', count=2)[1] == 2
    assert vms_unreachable(shop['vms']['client'])
    assert api.req('GET', '/v1/topologies/shop?tenant=shop').status_code \
        == 404


def vms_unreachable(client):
    return client.ping('10.61.1.1', count=2)[1] == 0


def test_the_dashboard_draws_the_logical_view(lab, api, shop, capsys):
    """The tenant's dashboard (a tenant-reader credential, in the real
    browser): its topology in the list, drawn with the file's nodes, the
    wires between them coloured by state, over the physical view."""
    from vwlab.browser import Browser
    ctl(capsys, 'topology', 'apply', shop['files']['shop'], '--wait',
        token_file=shop['token'])
    links, _view = wires_by_link(api)
    with open(lab.credential('tenant-reader', 'shop')) as f:
        reader = f.read().strip()
    with Browser(trust_cert=lab.pki.files('controller')[1]) as b:
        b.open(lab.url + '/ui/')
        b.sign_in(reader)
        b.wait(lambda: b.find('#app').is_displayed(), 10, what='signed in')
        b.wait(lambda: len(b.all('#logical g.vw-wire')) == 5, 15,
               what='the logical view drawn')
        assert b.find('#logical-select').get_attribute('value') == \
            'shop/shop'
        assert sorted(e.get_attribute('data-node') for e in b.all(
            '#logical g.vw-node')) == sorted(PLACES)
        drawn = {e.get_attribute('data-link'): e.get_attribute('data-state')
                 for e in b.all('#logical g.vw-wire')}
        assert drawn == {k: w['state'] for k, w in links.items()}
        # The firewall's two vNICs, each where its wire leaves.
        assert sorted(e.get_attribute('data-vnic') for e in b.all(
            '#logical g.vw-node[data-node="fw"] g.vw-nic')) == [
            'shop-fw-eth0', 'shop-fw-eth1']
        # Edited, the picture follows without a reload.
        b.d.execute_script('window.vwNotReloaded = true')
        ctl(capsys, 'topology', 'apply', shop['files']['edited'], '--wait',
            token_file=shop['token'])
        b.wait(lambda: 'web1:eth1|web2:eth0' in {
            e.get_attribute('data-link') for e in b.all(
                '#logical g.vw-wire')}, 15, what='the edit drawn')
        assert b.d.execute_script('return window.vwNotReloaded') is True
        # The physical view is still there, below it.
        assert b.all('#topology g.host')


def test_placement_advises_moves_that_collapse_the_busy_path(lab, api, shop,
                                                             streams, capsys):
    """8.3 Mbit/s from the client to web1 crosses client-fw (h1-h2) and
    sw-web1 (h2-h3): the advice is to move the client or web1 beside the
    switch, each taking that rate off the tunnels; not the firewall (it
    would split its wire to the switch instead). (web1: its wire is one
    the edits never moved; the switch VM's bridge still remembers where
    the database was before.)"""
    ctl(capsys, 'topology', 'apply', shop['files']['shop'], '--wait',
        token_file=shop['token'])
    vms = shop['vms']
    c = vms['client']
    wait_until(lambda: c.ping('10.61.2.11', count=1)[1] == 1, 15,
               what='web1 through the firewall')
    stream = streams(c, vms['web1'], '10.61.2.11', 6603, size=1000)
    links = wires_by_link(api)[0]
    path = ('client:eth0|fw:eth0', 'fw:eth1|sw:eth0', 'sw:eth1|web1:eth0')

    def rates():
        """The collector's rate of the stream's three wires, both ways."""
        by = {s['connector_id']: s for s in
              api.ok('GET', '/v1/stats')['wires']}
        return [sum((by[links[k]['connector_id']][d].get('window') or {})
                    .get('bits_per_second', 0) for d in ('a_to_b', 'b_to_a'))
                for k in path]
    # Once the collector's 10 s window is full and its three readings of
    # the one stream agree: its window has read one wire of a steady
    # stream 31 % and 55 % high here (2 of 9 runs) for as long as a jump
    # stays in the window. That is the collector's to explain (noted in
    # issue 24), not the advice's.
    started = time.time()
    time.sleep(13)
    seen = []
    while time.time() - started < 34:
        before = rates()
        seen.append(before)
        if min(before) > 0 and max(before) / min(before) < 1.1:
            break
        time.sleep(2)
    else:
        raise AssertionError('the collector never read the stream alike on '
                             'its three wires: %s' % seen)
    code, out, err = ctl(capsys, '--json', 'placement', '--topology', 'shop',
                         '--tenant', 'shop')
    after = rates()
    code2, text, _ = ctl(capsys, 'placement', '--topology', 'shop',
                         '--tenant', 'shop')
    result = stream.stop()
    print('collector readings of the three wires until alike: %s' % seen)
    assert code == 0 and code2 == 0, err
    assert result[1] >= 0.975 * result[0], result
    moves = json.loads(out)['moves']
    top = {(m['name'], m['from'], m['to']) for m in moves[:2]}
    assert top == {('client', 'h1', 'h2'), ('web1', 'h3', 'h2')}, moves
    # Each takes its wire's rate off the tunnels: what the collector read
    # (between its figures just before and just after), at least what was
    # sent one way. (Some runs read 12.8-13.4 Mbit/s on all three wires
    # for the 8.3 Mbit/s stream, alike: traffic or counting this test does
    # not explain; noted in issue 24.)
    rate = 1000 * (1000 + 8 + 20 + 14) * 8
    for m in moves[:2]:
        i = 0 if m['name'] == 'client' else 2
        lo, hi = sorted((before[i], after[i]))
        assert 0.99 * lo <= m['off_tunnels_bps'] <= 1.01 * hi, (m, lo, hi)
        assert m['off_tunnels_bps'] > 0.85 * rate, (
            m, result, [(h.name, [l for l in flows_of(h) if 'n_packets=0,'
                                  not in l]) for h in lab.hosts],
            api.ok('GET', '/v1/stats'))
        assert m['off_extenders_bps'] == 0 and len(m['collapses']) == 1
    assert not any(m['name'] == 'fw' and m['to'] == 'h1' for m in moves)
    assert 'advice only: nothing is moved' in text and 'client' in text


# The shop with its switch VM replaced by a switch the provider runs.
PROVIDED = SHOP.replace('name: shop', 'name: shoplan').replace(
    '''  sw:
    vm: shop-sw
    kind: switch
    nics: {eth0: null, eth1: null, eth2: null, eth3: null}''', '''  tier:
    kind: provider-switch
    switch: shoplan-tier
    nics: {p0: null, p1: null, p2: null, p3: null}''').replace(
    '["fw:eth1", "sw:eth0"]', '["fw:eth1", "tier:p0"]').replace(
    '["sw:eth1", "web1:eth0"]', '["tier:p1", "web1:eth0"]').replace(
    '["sw:eth2", "web2:eth0"]', '["tier:p2", "web2:eth0"]').replace(
    '["sw:eth3", "db:eth0"]', '["tier:p3", "db:eth0"]')


def drawn_parts(lab, parts):
    """The tenant's dashboard draws the split switch's ports by part:
    p0 alone in one, p1-p3 together in another, named as inspect names
    them (never a host)."""
    from selenium.webdriver.support.ui import Select
    from vwlab.browser import Browser
    with open(lab.credential('tenant-reader', 'shop')) as f:
        reader = f.read().strip()
    nics = '#logical g.vw-node[data-node="tier"] g.vw-nic[data-part]'
    with Browser(trust_cert=lab.pki.files('controller')[1]) as b:
        b.open(lab.url + '/ui/')
        b.sign_in(reader)
        b.wait(lambda: 'shop/shoplan' in [o.get_attribute('value') for o in
                                          b.all('#logical-select option')],
               15, what='the topology listed')
        Select(b.find('#logical-select')).select_by_value('shop/shoplan')
        b.wait(lambda: len(b.all(nics)) == 4, 15, what='the parts drawn')
        got = {e.get_attribute('data-nic'): e.get_attribute('data-part')
               for e in b.all(nics)}
        assert got['tier:p1'] == got['tier:p2'] == got['tier:p3'] != \
            got['tier:p0'], got
        assert set(got.values()) == set(parts), (got, parts)
        b.wait(lambda: 'split: %d parts' % len(parts) in (b.text(
            '#logical g.vw-node[data-node="tier"]') or ''), 5,
            what='the node saying it is split')


def test_a_provider_switch_in_the_file_is_made_used_and_removed(
        lab, api, shop, capsys):
    """The tenant's file names a provider switch instead of the switch
    VM: apply makes it (the tenant's, on a host of the tier), the client
    reaches the database through the firewall and it, inspect shows it,
    and destroy takes it away with the wires."""
    api.req('DELETE', '/v1/topologies/shop?tenant=shop')
    path = str(shop['dir'] / 'shoplan.yaml')
    with open(path, 'w') as f:
        f.write(PROVIDED)
    code, out, err = ctl(capsys, 'topology', 'apply', path, '--wait',
                         token_file=shop['token'])
    assert code == 0 and 'create switch' in out and \
        'created 5' in out, (out, err)
    sw = api.ok('GET', '/v1/switches/shoplan-tier')
    assert sw['tenant'] == 'shop' and sw['host'] in ('h1', 'h2', 'h3')
    assert [p['peer'] for p in sw['ports']] == [
        'shop-fw-eth1', 'shop-web1-eth0', 'shop-web2-eth0', 'shop-db-eth0']
    client = shop['vms']['client']
    wait_until(lambda: client.ping('10.61.2.20', count=1)[1] == 1, 15,
               what='the database through the firewall and the switch')
    code, out, err = ctl(capsys, '--json', 'topology', 'inspect', 'shoplan',
                         token_file=shop['token'])
    tier = next(n for n in json.loads(out)['nodes'] if n['name'] == 'tier')
    assert tier['kind'] == 'provider-switch' and tier['hosts'] == [], tier
    # Named parts: the firewall's port alone, the other three together,
    # each where most of its ports' VMs run.
    with open(path, 'w') as f:
        f.write(PROVIDED.replace('    switch: shoplan-tier\n',
                                 '    switch: shoplan-tier\n    split: '
                                 '{front: [p0], rest: [p1, p2, p3]}\n'))
    code, out, err = ctl(capsys, 'topology', 'apply', path, '--wait',
                         token_file=shop['token'])
    assert code == 0, (out, err)
    sw = api.ok('GET', '/v1/switches/shoplan-tier')
    peer = {p['name']: p['peer_host'] for p in sw['ports']}
    part = {p['name']: p['part'] for p in sw['ports']}
    most = Counter(peer[p] for p in ('p1', 'p2', 'p3'))
    assert part['p0'] == peer['p0'], sw
    assert {part[p] for p in ('p1', 'p2', 'p3')} == {
        min(most, key=lambda h: (-most[h], h))}, sw
    wait_until(lambda: client.ping('10.61.2.20', count=1)[1] == 1, 15,
               what='the database through the split switch')
    code, out, err = ctl(capsys, '--json', 'topology', 'inspect', 'shoplan',
                         token_file=shop['token'])
    tier = next(n for n in json.loads(out)['nodes'] if n['name'] == 'tier')
    hosts = len(set(part.values()))
    assert len(tier['parts']) == (hosts if hosts > 1 else 0), tier
    if hosts > 1:
        drawn_parts(lab, tier['parts'])
    assert all(p.startswith('part ') for p in tier['parts']), tier
    code, out, err = ctl(capsys, 'topology', 'destroy', 'shoplan', '--wait',
                         token_file=shop['token'])
    assert code == 0 and 'deleted 5 wires' in out, err
    assert api.req('GET', '/v1/switches/shoplan-tier').status_code == 404
    assert client.ping('10.61.2.20', count=2)[1] == 0
