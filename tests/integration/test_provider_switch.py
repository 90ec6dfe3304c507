"""A provider switch on real Open vSwitch (issue 41): the operator makes
switch `lan` on h1 with vwctl, four VMs on three hosts (two on h1, one
each on h2 and h3) are wired to its ports, and what a user of a switch
checks holds on the real thing:
- every VM reaches every other (ARP broadcast, then unicast);
- one broadcast reaches every other VM exactly once, and never comes
  back to its sender;
- once a MAC has been seen, unicast to it reaches only its port;
- the frame kinds a wire carries unchanged (VLAN tags, QinQ, LLDP, BPDU,
  an unknown ethertype, ARP) cross the switch unchanged;
- a port learns no more MACs than its limit (OVS's learn limit);
- each port's counters (entered, delivered, flooded, learned MACs) move
  with what was sent, in `vwctl switch list`, /metrics and the dashboard
  in a real browser;
- a vNIC of another tenant is refused a port, and nothing changes;
- the switch moves under 1 kHz streams through it, losing nothing;
- split into a part per host, a broadcast crosses once to each other
  part, unicast only to its MAC's part."""
import json
import time
import subprocess
import sys

import pytest
from prometheus_client.parser import text_string_to_metric_families
from scapy.all import IP, UDP, Ether, Raw

from vwlab.browser import Browser
from vwtest import seq, wait_until
from vwtest.wire_traffic import sniff_while, special_frames, tunnelled_while

SUBNET = '10.77.%d.%d/24'
SWITCH_MAC_TABLE = 2         # pipeline.tables.SWITCH_MAC: the learned MACs


def vwctl(lab, *args, ok=True):
    r = subprocess.run([sys.executable, '-m', 'virtualwire.cli', '--config',
                        lab.vwctl_config, *args], capture_output=True,
                       text=True, timeout=60)
    assert (r.returncode == 0) == ok, (r.returncode, r.stdout, r.stderr)
    return r.stdout + r.stderr


@pytest.fixture(scope='module')
def lan(lab, api):
    """(switch name, [vm1..vm4]): four VMs of tenant `t<n>` on h1, h1,
    h2, h3, each wired to port i of the tenant's switch on h1, every VM
    having pinged every other (so every MAC is learned). One for the
    module: a test that changes it puts it back."""
    n = next(seq)
    name, tenant = 'lan%d' % n, 't%d' % n
    vms = []
    for i, host in enumerate(('h1', 'h1', 'h2', 'h3'), 1):
        vm = lab.host(host).add_vm('s%dv%d' % (n, i), [
            ('s%dv%d-nic' % (n, i), SUBNET % (n % 250, i))])
        # No IPv6 chatter (solicitations, MLD): what the ports count is
        # what the tests send, and ARP.
        vm.sh(['sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1'])
        vms.append(vm)
        api.ok('PUT', '/v1/vnics/s%dv%d-nic/tenant' % (n, i),
               json={'tenant': tenant})
    out = vwctl(lab, 'switch', 'create', name, '--ports', '4', '--tenant',
                tenant, '--host', 'h1', '--mac-limit', '8')
    assert 'created switch %s with 4 ports' % name in out, out
    wires = [api.connect('s%dv%d-nic' % (n, i), 'sw:%s/p%d' % (name, i))
             for i in range(1, 5)]
    for w, state in zip(wires, ('collapsed', 'collapsed', 'tunnelled',
                                'tunnelled')):
        api.wait_state(w['id'], state)
    for vm in vms:
        for i in range(1, 5):
            ip = (SUBNET % (n % 250, i)).split('/')[0]
            if vm is not vms[i - 1]:
                wait_until(lambda: vm.ping(ip, count=1)[1] == 1, 15,
                           what='%s reaches %s through the switch'
                           % (vm.name, ip))
    yield name, vms
    for w in api.ok('GET', '/v1/wires')['wires']:
        if w['b'].startswith('sw:%s/' % name):
            api.req('DELETE', '/v1/wires/%d' % w['id'])
    api.req('DELETE', '/v1/switches/%s' % name)


def mac_of(vm):
    return next(iter(vm.nics.values()))['mac']


def send_and_count(sender, vms, frame):
    """{vm name: how many times `frame` arrived} while sender sends it."""
    raw = bytes(frame)
    seen = sniff_while(vms, lambda: sender.tool('frames-send', 'eth0',
                                                raw.hex()))
    return {vm.name: seen[vm.name].count(raw) for vm in vms}


def test_a_broadcast_reaches_every_other_port_exactly_once(lan):
    _, vms = lan
    frame = Ether(dst='ff:ff:ff:ff:ff:ff', src=mac_of(vms[0]),
                  type=0x88b5) / Raw(b'one broadcast')
    got = send_and_count(vms[0], vms, frame)
    assert got == {vms[0].name: 0, vms[1].name: 1, vms[2].name: 1,
                   vms[3].name: 1}, got


def test_unicast_reaches_only_its_port_once_learned(lab, lan):
    name, vms = lan
    # vm3 (on h2) to vm4 (on h3): the switch on h1 sends it to h3 only.
    frame = Ether(dst=mac_of(vms[3]), src=mac_of(vms[2]), type=0x88b5) / \
        Raw(b'for vm4 only')
    got = send_and_count(vms[2], vms, frame)
    assert got == {vms[0].name: 0, vms[1].name: 0, vms[2].name: 0,
                   vms[3].name: 1}, got
    # A MAC never seen floods, to every other port.
    frame = Ether(dst='02:00:5e:00:00:99', src=mac_of(vms[2]),
                  type=0x88b5) / Raw(b'unknown destination')
    got = send_and_count(vms[2], vms, frame)
    assert got == {vms[0].name: 1, vms[1].name: 1, vms[2].name: 0,
                   vms[3].name: 1}, got
    # What the switch learned, and what it counted, as vwctl shows it.
    doc = json.loads(vwctl(lab, '--json', 'switch', 'show', name))
    for port, vm in zip(doc['ports'], vms):
        assert mac_of(vm) in port['macs'], (port, vm.name)
        assert port['entered_packets'] > 0, port
    assert doc['ports'][2]['flooded_packets'] >= 1, doc['ports'][2]


def test_every_frame_kind_crosses_the_switch_unchanged(lan):
    _, vms = lan
    frames = {k: bytes(f) for k, f in special_frames(mac_of(vms[0])).items()}
    seen = sniff_while([vms[3]], lambda: vms[0].tool(
        'frames-send', 'eth0', *[f.hex() for f in frames.values()]))
    for kind, f in frames.items():
        assert f in seen[vms[3].name], \
            '%s frame did not cross the switch unchanged' % kind


def test_a_port_learns_no_more_macs_than_its_limit(lab, lan):
    name, vms = lan
    h1 = lab.host('h1')

    def learned_on_port_1():
        out = h1.ofctl('dump-flows', 'table=%d' % SWITCH_MAC_TABLE)
        return [l for l in out.splitlines() if 'load:0x1->NXM_NX_REG6' in l]
    # vm1 sends from 20 source MACs; its port's limit is 8.
    forged = [bytes(Ether(dst='ff:ff:ff:ff:ff:ff',
                          src='02:aa:00:00:00:%02x' % i, type=0x88b5) /
                    Raw(b'from many MACs')) for i in range(20)]
    vms[0].tool('frames-send', 'eth0', *[f.hex() for f in forged])
    wait_until(lambda: len(learned_on_port_1()) >= 8, 10,
               what='port 1 learned up to its limit')
    assert len(learned_on_port_1()) == 8, learned_on_port_1()
    # A MAC beyond the limit is unknown: frames to it flood, and vm1's
    # own MAC (learned before) still goes only to vm1.
    got = send_and_count(vms[2], vms, Ether(
        dst='02:aa:00:00:00:13', src=mac_of(vms[2]), type=0x88b5) /
        Raw(b'to an unlearned MAC'))
    assert got[vms[1].name] == 1 and got[vms[3].name] == 1, got
    shown = vwctl(lab, 'switch', 'show', name)
    assert 'learns at most 8 MACs per port' in shown, shown


def port_counters(lab, name):
    """{port: counters} of switch `name` as `vwctl switch list` has them."""
    doc = json.loads(vwctl(lab, '--json', 'switch', 'list'))
    sw = next(s for s in doc['switches'] if s['name'] == name)
    return {p['name']: p['counters'] for p in sw['ports']}


def test_each_ports_counters_reach_vwctl_metrics_and_the_dashboard(
        lab, api, lan):
    name, vms = lan
    sent = 25
    wait_until(lambda: port_counters(lab, name)['p1'] is not None, 15,
               what='the collector to read h1')
    # New stand-in VMs chatter for a while (IPv6 solicitations, ARP): a
    # port is counted once it has been quiet for two readings.
    last = [None]

    def quiet():
        now = port_counters(lab, name)
        same, last[0] = now == last[0], now
        time.sleep(1.2)
        return now if same else None
    before = wait_until(quiet, 30, what="vm1's port to fall quiet")
    # vm1 broadcasts `sent` frames: each enters at p1, is flooded, and
    # leaves by p2, p3 and p4.
    frame = bytes(Ether(dst='ff:ff:ff:ff:ff:ff', src=mac_of(vms[0]),
                        type=0x88b5) / Raw(b'counted'))
    vms[0].tool('frames-send', 'eth0', *[frame.hex()] * sent)

    def moved():
        now = port_counters(lab, name)
        d = {p: {k: now[p][k] - before[p][k] for k in now[p]}
             for p in now}
        return d if d['p1']['entered_packets'] >= sent and all(
            d[p]['delivered_packets'] >= sent for p in ('p2', 'p3',
                                                        'p4')) else None
    d = wait_until(moved, 20, what="the ports' counters to move")
    # The guests may say a little themselves meanwhile (ARP), not more.
    assert sent <= d['p1']['entered_packets'] <= sent + 5, d
    assert sent <= d['p1']['flooded_packets'] <= sent + 5, d
    assert d['p1']['delivered_packets'] <= 5, d
    now = port_counters(lab, name)
    assert [now[p]['learned_macs'] >= 1 for p in now] == [True] * 4, now

    text = api.req('GET', '/metrics').text
    got = {(s.name, s.labels.get('port')): s.value
           for f in text_string_to_metric_families(text)
           for s in f.samples if s.labels.get('switch') == name}
    assert got[('virtualwire_provider_switch_port_entered_packets_total',
                'p1')] >= now['p1']['entered_packets'], got
    assert got[('virtualwire_provider_switch_port_delivered_packets_total',
                'p4')] >= now['p4']['delivered_packets'], got
    assert got[('virtualwire_provider_switch_port_learned_macs', 'p3')] \
        >= 1, got

    row = '#switches tr[data-switch="%s"][data-port="p1"] ' % name
    with Browser(trust_cert=lab.pki.files('controller')[1]) as b:
        b.open(lab.url + '/')
        with open(lab.credential('reader', 'noc')) as f:
            b.sign_in(f.read().strip())
        shown = b.wait(lambda: b.text(row + 'td.entered'), 15,
                       what='the switch in the dashboard')
        assert int(shown.replace(',', '')) >= now['p1']['entered_packets']
        assert b.text(row + 'td:nth-child(4)') == next(iter(vms[0].nics))


def test_another_tenants_vnic_is_refused_a_port(lab, api, lan):
    name, vms = lan
    n = next(seq)
    lab.host('h2').add_vm('s%dx' % n, [('s%dx-nic' % n, None)])
    vwctl(lab, 'tenants', 'assign', 's%dx-nic' % n, 'rival%d' % n)
    p4 = next(w for w in api.ok('GET', '/v1/wires')['wires']
              if w['b'] == 'sw:%s/p4' % name)
    api.req('DELETE', '/v1/wires/%d' % p4['id'])
    before = api.ok('GET', '/v1/wires')
    r = api.req('POST', '/v1/wires', json={'a': 's%dx-nic' % n,
                                           'b': 'sw:%s/p4' % name})
    assert r.status_code == 403, r.text
    assert 'not a vNIC of tenant' in r.json()['error']['message'], r.text
    assert api.ok('GET', '/v1/wires') == before
    out = vwctl(lab, 'connect', 's%dx-nic' % n, 'sw:%s/p4' % name, ok=False)
    assert 'not a vNIC of tenant' in out, out
    api.connect(p4['a'], p4['b'])           # as it was, for the others


def test_the_switch_moves_under_a_1khz_stream_through_it(lab, api, lan,
                                                         streams):
    """The operator moves the switch to h3 (vwctl), then, under two 1 kHz
    streams through it (vm3 on h2 to vm4 on h3, vm1 on h1 to vm3),
    h3 -> h2 -> h1: nothing is lost or doubled (make-before-break,
    control.switch_moves), and the MACs it learned go with it. A failure
    names each stream's gaps with their times, to set against the
    controller's log of the move's stages."""
    name, vms = lan
    n = int(name[3:])
    ip = {i: (SUBNET % (n % 250, i)).split('/')[0] for i in (1, 3, 4)}
    out = vwctl(lab, 'switch', 'move', name, '--to', 'h3')
    assert 'now on h3' in out, out
    a = streams(vms[2], vms[3], ip[4], 6401)
    b = streams(vms[0], vms[2], ip[3], 6402)
    time.sleep(0.5)
    for to in ('h2', 'h1'):
        assert api.ok('PUT', '/v1/switches/%s/host' % name,
                      json={'host': to})['host'] == to
        time.sleep(0.7)
        if to == 'h2':
            learned = lab.host('h2').ofctl('dump-flows', 'table=%d' %
                                           SWITCH_MAC_TABLE)
            assert all(mac_of(vm) in learned for vm in vms), learned
    results = [s.stop() for s in (a, b)]
    print('switch moves h3 -> h2 -> h1 under 1 kHz: (sent, got, missing, '
          'dups) %s' % (results,))
    for sent, got, missing, dups in results:
        assert (missing, dups) == (0, 0), (results, [s.report['gaps']
                                                     for s in (a, b)])
    number = api.ok('GET', '/v1/switches/%s' % name)['number']
    wait_until(lambda: 'reg4=0x%x,' % number not in lab.host('h2').ofctl(
        'dump-flows', 'table=%d' % SWITCH_MAC_TABLE), 5,
        what='the MACs learned on h2 gone with the switch')


def test_advice_follows_the_ports_traffic_and_move_advised_goes(
        lab, api, lan, streams):
    """vm3 (on h2) streams to vm4 (on h3) through the switch on h1: their
    ports carry all its traffic, so `advise` says move to h2 or h3 (the
    underlay then carries it once, not twice); `move --advised` goes
    there under the stream, losing nothing, and then advises staying."""
    name, vms = lan
    n = int(name[3:])
    out = vwctl(lab, 'switch', 'advise', name)
    assert 'switch %s on h1' % name in out, out
    s = streams(vms[2], vms[3], (SUBNET % (n % 250, 4)).split('/')[0], 6403)

    def advised():
        # Hosts are read one by one: both ports' wires counted first.
        doc = json.loads(vwctl(lab, '--json', 'switch', 'advise', name))
        by = doc['by_host_bps']
        # (And the window past an earlier test's streams from vm1.)
        return doc if doc['move'] and min(by.get('h2', 0), by.get(
            'h3', 0)) > 0.3e6 and by.get('h1', 0) < 0.05 * by['h2'] \
            else None
    doc = wait_until(advised, 30, what='advice to move')
    assert doc['host'] == 'h1' and doc['advised'] in ('h2', 'h3'), doc
    by = doc['by_host_bps']
    # 1 kHz of 106-byte frames is 0.85 Mbit/s, on both ports, over the
    # collector's 10 s window (which may still hold time before the
    # stream, or a count read late: measured up to 1.13 then exact).
    assert by['h2'] < 1.5e6 and by['h3'] < 1.5e6, doc
    assert doc['crossing_bps']['advised'] < 0.6 * doc['crossing_bps']['now']
    out = vwctl(lab, 'switch', 'move', name, '--advised')
    assert 'now on %s' % doc['advised'] in out, out
    again = json.loads(vwctl(lab, '--json', 'switch', 'advise', name))
    assert again['host'] == doc['advised'] and not again['move'], again
    out = vwctl(lab, 'switch', 'move', name, '--advised')
    assert 'stays on %s' % doc['advised'] in out, out
    sent, got, missing, dups = s.stop()
    assert (missing, dups) == (0, 0), (sent, got, s.report['gaps'])
    api.ok('PUT', '/v1/switches/%s/host' % name, json={'host': 'h1'})


def test_a_split_switch_sends_one_copy_to_each_other_part(lab, lan,
                                                          tmp_path):
    """Split with vwctl so each port lives on its VM's host: a broadcast
    from vm1 reaches every other VM once and crosses the underlay once
    to each other part (h2, h3), on the mesh's reserved connector ids;
    unicast from vm3 to vm4 crosses only h2 -> h3. Joined again after."""
    name, vms = lan
    out = vwctl(lab, 'switch', 'split', name, '--auto')
    assert 'parts on h1, h2, h3' in out, out
    marker = b'split-switch-%d' % next(seq)

    def udp(src, dst_mac, dst_ip):
        return bytes(Ether(dst=dst_mac, src=mac_of(src)) /
                     IP(src='10.77.0.9', dst=dst_ip) /
                     UDP(sport=7, dport=7) / Raw(marker))

    def crossings(frame, sender):
        """{(from host, key)} of the frame's copies leaving a host on the
        underlay, and what each VM got."""
        seen, grams = tunnelled_while(lab.hosts, tmp_path, lambda: sniff_while(
            vms, lambda: sender.tool('frames-send', 'eth0', frame.hex())))
        out = [(d.host, d.key) for d in grams
               if d.outgoing and d.payload == marker and d.key is not None]
        return sorted(out), {vm.name: seen[vm.name].count(frame)
                             for vm in vms}

    for vm in vms:                  # every MAC learned on every part
        vm.tool('frames-send', 'eth0', udp(vm, 'ff:ff:ff:ff:ff:ff',
                                           '10.77.0.255').hex())
    sent, got = crossings(udp(vms[0], 'ff:ff:ff:ff:ff:ff', '10.77.0.255'),
                          vms[0])
    assert got == {vms[0].name: 0, vms[1].name: 1, vms[2].name: 1,
                   vms[3].name: 1}, got
    assert [h for h, _k in sent] == ['h1', 'h1'], sent
    assert all(k >= 0xF0000000 for _h, k in sent), sent
    sent, got = crossings(udp(vms[2], mac_of(vms[3]), '10.77.0.4'), vms[2])
    assert got == {vms[0].name: 0, vms[1].name: 0, vms[2].name: 0,
                   vms[3].name: 1}, got
    assert [h for h, _k in sent] == ['h2'], sent
    out = vwctl(lab, 'switch', 'split', name, '--join')
    assert 'parts on h1\n' in out, out
