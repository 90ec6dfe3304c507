"""Wires between clouds on real Open vSwitch: two sites that share nothing
but a public network, each behind a NAT, an extender per site and a relay
extender with a public address (vwlab.sites); the extenders' encrypted
links are real wireguard-go daemons run by the real extender agent."""
import json
import os
import signal
import subprocess
import sys
import time

import requests
from scapy.all import IP, UDP, Dot1Q, Ether, Raw

from vwtest import LINKS, Api, links_up, wait_until
from vwlab import extenders
from vwlab.pki import LabPki
from vwlab.shell import CONTROLLER_IP
from vwlab.capture import Capture, frames
from virtualwire.extender.wireguard import wg_name
from vwtest.wire_traffic import sniff_while, special_frames, tcp_transfer, udp_stream

MITM_PORT = 8799


def vwctl(lab, *args):
    return subprocess.run([sys.executable, '-m', 'virtualwire.cli',
                           '--config', lab.vwctl_config] + list(args),
                          capture_output=True, text=True, timeout=30)


def test_extenders_show_their_links_through_the_nats(clouds):
    # Each agent measures its links' RTT every few seconds.
    wait_until(lambda: extenders.link_view(clouds, 'xa', 'xb')['sides'][
        'xa'].get('rtt_ms') is not None, 15, what='a measured RTT')
    p = vwctl(clouds, 'extenders')
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    row = next(l for l in lines if l.startswith('xa <-> xb'))
    # Both behind port-preserving NATs: public addresses are the NATs'.
    assert ' up ' in row and '203.0.113.11:' in row and '203.0.113.12:' in row
    assert 'endpoint-independent' in row and ' ms ' in row, row
    assert any(l.startswith('cloud-a - cloud-b') and 'direct' in l and
               'xa > xb' in l for l in lines), p.stdout
    doc = json.loads(vwctl(clouds, '--json', 'extenders').stdout)
    k = next(x for x in doc['links'] if (x['a'], x['b']) == ('xa', 'xb'))
    assert k['sides']['xa']['nat'] == 'endpoint-independent'
    xr = next(x for x in doc['links'] if (x['a'], x['b']) == ('xa', 'xr'))
    assert xr['sides']['xr']['nat'] == 'public'
    assert xr['sides']['xr']['public'] == '203.0.113.13:%d' % \
        xr['sides']['xr']['port']
    assert k['sides']['xa']['rx_bytes'] > 0 and k['sides']['xb']['tx_bytes'] > 0
    # Each agent reports with a token of its own (vwlab.extenders): good
    # for its own reports (the links above are up on them), nothing else.
    x = next(x for x in clouds.extenders if x.name == 'xa')
    with open(x.token_file) as f:
        own = {'Authorization': 'Bearer ' + f.read().strip()}
    r = requests.post(clouds.url + '/v1/extenders/xb/report', headers=own,
                      json={'public_key': 'A' * 43 + '='}, timeout=15,
                      verify=clouds.verify)
    assert r.status_code == 403 and "extender xa's" in r.text, r.text
    assert requests.get(clouds.url + '/v1/wires', headers=own,
                        timeout=15, verify=clouds.verify).status_code == 403
    assert {(c['role'], c['name']) for c in json.loads(vwctl(
        clouds, '--json', 'credentials').stdout)['credentials']} >= {
            ('extender', 'xa'), ('extender', 'xb'), ('extender', 'xr')}
    # Bad requests say what is wrong and change nothing.
    p = vwctl(clouds, 'extenders', 'connect', 'xa', 'h1')
    assert p.returncode == 1 and 'h1 is not an extender' in p.stderr
    p = vwctl(clouds, 'extenders', 'connect', 'xa')
    assert p.returncode == 2 and 'two extender names' in p.stderr
    assert len(json.loads(vwctl(clouds, '--json', 'extenders').stdout)[
        'links']) == len(LINKS)


def test_a_stolen_extender_token_cannot_change_its_key(clouds):
    """Issue 39, point 2: xa's token alone (a thief's reports carrying
    the thief's WireGuard key) used to give xa's peers the thief's key.
    A key is taken only when xa's own OVSDB shows it too: the peers keep
    xa's key, the refusal is listed, audited, and the link stays up."""
    x = next(x for x in clouds.extenders if x.name == 'xa')
    with open(x.token_file) as f:
        own = {'Authorization': 'Bearer ' + f.read().strip()}
    real = extenders.link_view(clouds, 'xa', 'xb')['sides']['xa'][
        'public_key']
    thief = 'VGhpZWYncyBrZXkgaXMgbm90IHhhJ3Mga2V5ISEhIT0='
    t0 = time.time()
    for _ in range(5):              # a report a second, past the grace
        r = requests.post(clouds.url + '/v1/extenders/xa/report',
                          headers=own, json={'public_key': thief},
                          timeout=15, verify=clouds.verify)
        assert r.status_code == 200, r.text
        assert extenders.link_view(clouds, 'xa', 'xb')['sides']['xa'][
            'public_key'] == real
        time.sleep(1.0)
    refusals = [e for e in json.loads(vwctl(clouds, '--json', 'status')
                                      .stdout)['admission']['recent_refusals']
                if e['kind'] == 'extender key' and e['at'] >= t0]
    assert refusals and thief in refusals[0]['why'] and \
        'its own OVSDB' in refusals[0]['why'], refusals
    audit = json.loads(vwctl(clouds, '--json', 'audit').stdout)['entries']
    assert any(e.get('action') == 'extender_key_change' and
               e['status'] == 403 and e['request']['new'] == thief
               for e in audit), audit[-5:]
    wait_until(lambda: extenders.link_view(clouds, 'xa', 'xb')['state'] ==
               'up', 20, what='the link up with the real key')


def test_a_wire_across_two_nated_clouds_carries_everything(cross):
    va, vb, w = cross(1)
    # Host -> its site's extender -> encrypted link -> the other's -> host.
    assert w['path'] == ['h1', 'xa', 'xb', 'h2'] and not w['relayed'], w
    assert va.ping('192.0.2.2', count=5) == (5, 5)
    sent, got = udp_stream(va, vb, '192.0.2.2', seconds=1.0)
    assert got['received'] == sent['sent'] and got['duplicates'] == 0, got
    sent, got = tcp_transfer(vb, va, '192.0.2.1', 4 << 20)
    assert got['sha256'] == sent['sha256']
    # Every kind of frame crosses unchanged, full-size ones too.
    src = next(iter(va.nics.values()))['mac']
    kinds = {k: bytes(f) for k, f in special_frames(src).items()}
    kinds['full-size tagged'] = bytes(
        Ether(dst='02:00:00:00:00:42', src=src) / Dot1Q(vlan=7) /
        Raw(b'x' * 1500))
    assert va.ping('192.0.2.2', count=3, size=1472, df=True) == (3, 3)
    seen = sniff_while([vb], lambda: va.tool(
        'frames-send', 'eth0', *[f.hex() for f in kinds.values()]))
    for kind, f in kinds.items():
        assert f in seen[vb.name], '%s frame did not cross unchanged' % kind


def test_two_cross_cloud_wires_never_leak(cross):
    v1a, v1b, _ = cross(2)
    v2a, v2b, _ = cross(3)
    raw = bytes(Ether(dst='ff:ff:ff:ff:ff:ff', src='02:00:00:00:00:01',
                      type=0x88b5) / Raw(b'only-for-wire-2'))
    seen = sniff_while([v1b, v2a, v2b],
                       lambda: v1a.tool('frames-send', 'eth0', raw.hex()))
    assert raw in seen[v1b.name]
    assert raw not in seen[v2a.name] and raw not in seen[v2b.name]


def _replay(ns, pcap, src, dst, dst_mac, forge=False):
    """From namespace ns on the public segment, send again every UDP
    datagram src -> dst in pcap (spoofing src), or random bytes of the same
    length with the same WireGuard header (type and receiver index: the
    forgery reaches the session's decryption). First waits until dst's
    NAT answers ARP through the public segment (a new port can drop what
    it gets before its carrier is raised). Returns (how many, their bytes,
    the first 16 bytes of each payload, hex)."""
    code = '''
import os, sys
from scapy.all import ARP, IP, UDP, Ether, Raw, rdpcap, sendp, srp1
src, dst, mac, forge = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == '1'
for _ in range(20):
    if srp1(Ether(dst='ff:ff:ff:ff:ff:ff') / ARP(pdst=dst.split(':')[0]),
            iface='eth0', timeout=0.5, verbose=False) is not None:
        break
else:
    sys.exit('no ARP answer from ' + dst)
pkts = [p[IP] for p in rdpcap(sys.argv[1]) if IP in p and UDP in p
        and p[IP].src == src.split(':')[0] and p[UDP].sport == int(src.split(':')[1])
        and p[IP].dst == dst.split(':')[0] and p[UDP].dport == int(dst.split(':')[1])]
out = []
for p in pkts:
    data = bytes(p[UDP].payload)
    if forge:
        data = data[:8] + os.urandom(len(data) - 8)
    out.append(Ether(dst=mac) / IP(src=p[IP].src, dst=p[IP].dst) /
               UDP(sport=p[UDP].sport, dport=p[UDP].dport) / Raw(data))
sendp(out, iface='eth0', verbose=False)
print(len(out), sum(len(p[Raw].load) for p in out),
      ' '.join(p[Raw].load[:16].hex() for p in out))
'''
    p = subprocess.run(['ip', 'netns', 'exec', ns, sys.executable, '-c', code,
                        pcap, src, dst, dst_mac, '1' if forge else '0'],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    n, size, *heads = p.stdout.split()
    return int(n), int(size), heads


def _udp_heads(pcap):
    """The first 16 bytes (hex) of every IPv4 UDP payload in an SLL2
    capture."""
    from scapy.utils import RawPcapReader
    heads = []
    with RawPcapReader(pcap) as r:
        for raw, _meta in r:
            ip = IP(raw[20:])                   # past the SLL2 header
            if UDP in ip:
                heads.append(bytes(ip[UDP].payload)[:16].hex())
    return heads


def _link_bytes(x, peer, field):
    """x's WireGuard byte counter for `peer` (wg show dump): 5, the
    authentic bytes it took from it; 6, the bytes it sent it."""
    out = subprocess.run(['ip', 'netns', 'exec', x.ns, 'wg', 'show',
                          wg_name(x.name, peer), 'dump'], capture_output=True,
                         text=True, check=True).stdout.strip().split('\n')
    return sum(int(line.split('\t')[field]) for line in out[1:])


def _link_rx(x, peer):
    return _link_bytes(x, peer, 5)


def _link_tx(x, peer):
    return _link_bytes(x, peer, 6)


def test_the_public_network_sees_only_ciphertext_and_drops_replays(
        clouds, cross, tmp_path):
    va, vb, _ = cross(4)
    marker = b'VW-PLAINTEXT-MARKER-' * 10
    frame = bytes(Ether(dst='02:00:00:00:00:55', src='02:00:00:00:00:44',
                        type=0x88b5) / Raw(marker))
    pcap = str(tmp_path / 'public.pcap')
    with Capture(clouds.clouds.pub_ns, 'public', pcap, 'udp', snaplen=2000):
        seen = sniff_while([vb], lambda: va.tool('frames-send', 'eth0',
                                                 frame.hex()))
        assert va.ping('192.0.2.2', count=3) == (3, 3)
    assert frame in seen[vb.name]                    # it did cross ...
    with open(pcap, 'rb') as f:
        raw = f.read()
    # ... as encrypted UDP between the two NATs' public addresses ...
    assert sum(1 for _ in frames(pcap)) >= 6
    # ... and neither the marker nor the inner frame's addresses show.
    assert marker[:20] not in raw and bytes.fromhex('020000000055') not in raw
    # An attacker on the public network replays what it captured, spoofing
    # cloud-a's NAT, then forges datagrams: cloud-b's NAT lets them in (the
    # mapping exists, and a capture on xb's leg shows they arrived), its
    # extender's WireGuard drops them all: nothing is delivered, and the
    # link's authentic-bytes counter grows by no more than its keepalives.
    sides = extenders.link_view(clouds, 'xa', 'xb')['sides']
    a_pub, b_pub = sides['xa']['public'], sides['xb']['public']
    nat_b = clouds.clouds.nat_ns('cloud-b')
    mac = subprocess.run(['ip', 'netns', 'exec', nat_b, 'cat',
                          '/sys/class/net/wan/address'], capture_output=True,
                         text=True, check=True).stdout.strip()
    evil = clouds.clouds.add_public_host('evil', '203.0.113.66')
    xa, xb = clouds.host('xa'), clouds.host('xb')
    sent = {}
    arrived = str(tmp_path / 'xb-wan.pcap')
    tx0 = _link_tx(xa, 'xb')
    rx0 = _link_rx(xb, 'xa')

    def missing():
        heads = sent['replayed'][2] + sent['forged'][2]
        got = _udp_heads(arrived)
        return [(i, h) for i, h in enumerate(heads) if h not in got]

    def attack():
        sent.update(replayed=_replay(evil, pcap, a_pub, b_pub, mac),
                    forged=_replay(evil, pcap, a_pub, b_pub, mac, forge=True))
        # sendp returns once the frames are queued; on a loaded machine the
        # kernel forwards the last ones through the NAT later. The guest is
        # watched until every one has reached xb's leg.
        wait_until(lambda: not missing(), 15, 0.2,
                   what='the attack reaching xb')

    with Capture(xb.ns, 'wan0', arrived, 'udp and src host %s'
                 % a_pub.split(':')[0], snaplen=64):
        seen = sniff_while([vb], attack)
    rx = _link_rx(xb, 'xa') - rx0
    tx = _link_tx(xa, 'xb') - tx0
    (replayed, replayed_bytes, _), (forged, _, _) = (sent['replayed'],
                                                     sent['forged'])
    assert replayed >= 3 and forged >= 3, sent
    assert not missing(), ('sent but not seen on xb', missing())
    assert frame not in seen[vb.name], 'a replayed frame was delivered'
    assert all(f == frame or Ether(f).src != '02:00:00:00:00:44'
               for f in seen[vb.name])
    # What xb took as authentic meanwhile is what xa really sent it
    # (keepalives, a handshake, a guest's odd ARP: read before xb's counter
    # and after it, less at most one datagram in flight at the start), not
    # the replayed datagrams.
    assert rx < replayed_bytes and rx <= tx + 148, (rx, tx, sent)
    # The link is still up and the wire still works.
    assert va.ping('192.0.2.2', count=3) == (3, 3)


def test_an_extender_behind_a_man_in_the_middle_takes_no_keys(
        clouds, cross, tmp_path):
    """xa's connections to the controller are redirected (DNAT in its
    namespace, as a hijacked route would) to an HTTPS server whose
    certificate names the controller's address but comes from another CA,
    offering a link to xb with an attacker's key and endpoint. The agent
    refuses every handshake: the impostor gets no request (no token), xa's
    link to xb keeps xb's real key, the wire keeps working; once the path
    is clean the agent reports again."""
    va, _vb, _w = cross(8)
    xa = clouds.host('xa')
    real_key = extenders.link_view(clouds, 'xa', 'xb')['sides']['xb'][
        'public_key']
    with open(os.path.join(xa.dir, 'extender', 'links.json')) as f:
        offer = json.load(f)
    evil_key = 'E' * 43 + '='
    for k in offer['links']:
        k.update(peer_key=evil_key, remote='203.0.113.66', pinned=True)
    offer['hurry'] = True
    evil = LabPki(str(tmp_path / 'evil')).init()
    key, cert = evil.issue('controller', role='controller',
                           ips=[CONTROLLER_IP])
    log = str(tmp_path / 'mitm.jsonl')
    mitm = subprocess.Popen(
        ['ip', 'netns', 'exec', clouds.mgmt_ns, sys.executable, '-m',
         'vwlab.mitm', '--listen', '%s:%d' % (CONTROLLER_IP, MITM_PORT),
         '--key', key, '--cert', cert, '--offer', json.dumps(offer),
         '--log', log])
    redirect = ['-p', 'tcp', '-d', CONTROLLER_IP, '--dport',
                str(extenders.SOUTHBOUND_PORT), '-j', 'DNAT',
                '--to-destination', '%s:%d' % (CONTROLLER_IP, MITM_PORT)]
    agent_log = os.path.join(xa.dir, 'extender', 'agent.log')
    seen_before = os.path.getsize(agent_log)
    try:
        time.sleep(1.0)                       # the impostor listening
        subprocess.run(['ip', 'netns', 'exec', xa.ns, 'iptables', '-t', 'nat',
                        '-I', 'OUTPUT'] + redirect, check=True)
        time.sleep(6.0)                       # ~12 report cycles
        with open(log) as f:
            events = [json.loads(x) for x in f]
        kinds = [e['event'] for e in events]
        # It was dialled (the redirect works) and refused every time.
        assert kinds.count('connection') >= 5, kinds
        assert kinds.count('handshake failed') == kinds.count('connection')
        assert 'request' not in kinds                 # no token reached it
        with open(agent_log) as f:
            f.seek(seen_before)
            assert 'CERTIFICATE_VERIFY_FAILED' in f.read()
        peers = subprocess.run(['ip', 'netns', 'exec', xa.ns, 'wg', 'show',
                                wg_name('xa', 'xb'), 'peers'],
                               capture_output=True, text=True, check=True)
        assert peers.stdout.split() == [real_key]
        assert va.ping('192.0.2.2', count=3) == (3, 3)
    finally:
        subprocess.run(['ip', 'netns', 'exec', xa.ns, 'iptables', '-t', 'nat',
                        '-D', 'OUTPUT'] + redirect)
        mitm.terminate()
        mitm.wait(10)
    wait_until(lambda: extenders.link_view(clouds, 'xa', 'xb')['sides'][
        'xa']['reported_s_ago'] < 2, 15, what='xa reporting again')
    assert extenders.link_view(clouds, 'xa', 'xb')['state'] == 'up'


def _set_links(lab, want, timeout=40):
    wait_until(lambda: links_up(lab, want), timeout,
               what='links %s' % want)


def test_symmetric_nats_on_both_sides_go_through_a_relay_that_cannot_read(
        clouds, cross, tmp_path):
    va, vb, w = cross(5)
    api = Api(clouds)
    xr = clouds.host('xr')
    try:
        for site in ('cloud-a', 'cloud-b'):
            clouds.clouds.set_nat(site, 'symmetric')
        # The direct endpoints cannot be punched through two symmetric
        # NATs; once both agents have re-probed (15 s down), the controller
        # hands each the relay's port for its side instead, and the same
        # xa <-> xb WireGuard link comes up through xr.
        link = wait_until(lambda: (lambda k: k if k['relay'] == 'xr' and
                                   k['state'] == 'up' else None)(
            extenders.link_view(clouds, 'xa', 'xb')), 90,
            what='link xa-xb up through relay xr')
        assert link['sides']['xa']['nat'] == 'symmetric'
        wire = wait_until(lambda: (lambda x: x if x['relayed'] else None)(
            api.wire(w['id'])), 20, what='wire relayed')
        # The wire's path is the direct link's: xr is no hop of it.
        assert wire['path'] == ['h1', 'xa', 'xb', 'h2'], wire
        assert wire['state'] == 'extended'
        wait_until(lambda: va.ping('192.0.2.2', count=1)[1] == 1, 15,
                   what='ping through the relay')
        # A capture on the relay's public leg while a marker crosses: the
        # datagrams are there (the relay forwarded them) and the marker is
        # not (it holds no key of the link).
        marker = b'VW-RELAY-MUST-NOT-READ-' * 8
        frame = bytes(Ether(dst='02:00:00:00:00:57', src='02:00:00:00:00:47',
                            type=0x88b5) / Raw(marker))
        pcap = str(tmp_path / 'relay.pcap')
        with Capture(xr.ns, 'wan0', pcap, 'udp portrange 53820-53899',
                     snaplen=2000):
            seen = sniff_while([vb], lambda: va.tool('frames-send', 'eth0',
                                                     frame.hex()))
            sent, got = udp_stream(va, vb, '192.0.2.2', seconds=1.0)
        assert frame in seen[vb.name]
        assert got['received'] == sent['sent'], got
        with open(pcap, 'rb') as f:
            raw = f.read()
        relayed = sum(1 for _ in frames(pcap))
        # In and out of the relay: at least twice the stream's datagrams.
        assert relayed >= 2 * sent['sent'], (relayed, sent)
        assert marker[:23] not in raw
        assert bytes.fromhex('020000000057') not in raw
        # The relay has no WireGuard device for xa-xb: no key of it.
        devs = subprocess.run(['ip', 'netns', 'exec', xr.ns, 'ip', '-o',
                               'link'], capture_output=True, text=True,
                              check=True).stdout
        assert wg_name('xr', 'xa') in devs          # its own links' only
        assert wg_name('xa', 'xb') not in devs and \
            wg_name('xb', 'xa') not in devs
        # The operator sees it: the link via relay xr, the sites relayed.
        out = vwctl(clouds, 'extenders').stdout
        assert any(l.startswith('xa <-> xb (via relay xr)') and ' up ' in l
                   for l in out.splitlines()), out
        assert any(l.startswith('cloud-a - cloud-b') and
                   'relayed via xr' in l and 'xa > xb' in l
                   for l in out.splitlines()), out
    finally:
        for site in ('cloud-a', 'cloud-b'):
            clouds.clouds.set_nat(site, 'nat')
    # Punchable NATs again: the agents find out (agent.RELAY_RECHECK) and
    # the link goes direct.
    wait_until(lambda: extenders.link_view(clouds, 'xa', 'xb')['relay']
               is None and links_up(clouds, {('xa', 'xb'): True,
                                             ('xb', 'xa'): True}), 120,
               what='link xa-xb direct again')
    wait_until(lambda: not api.wire(w['id'])['relayed'], 20,
               what='wire direct again')
    # Going direct, the side whose NAT was re-probed last may still find
    # the link down for 15 s and re-probe its port once more (a few
    # seconds without the link: CI saw 3 pings lost there). Wait until
    # both sides have re-learned a punchable NAT, then judge.
    wait_until(lambda: all(
        s['nat'] != 'symmetric' for s in extenders.link_view(
            clouds, 'xa', 'xb')['sides'].values()), 90,
        what='both sides re-probed')
    wait_until(lambda: va.ping('192.0.2.2', count=3) == (3, 3), 40,
               what='3 of 3 pings direct again')
    assert not api.wire(w['id'])['relayed']


def _outage(va, vb, fault, seconds=60.0, rate=100, heal=12.0, tail=2.0):
    """Run a rate-Hz sequenced echo stream va -> vb while fault() runs,
    until the wire carries again (at most `heal` s) and `tail` s more;
    (datagrams lost, longest hole in s, the stream's report)."""
    server = vb.tool_bg('echo-server', '--port', 7000)
    time.sleep(0.3)
    stream = va.tool_bg('udp-echo', '--dst', '192.0.2.2', '--rate', rate,
                        '--seconds', seconds)
    try:
        time.sleep(1.0)
        fault()
        wait_until(lambda: va.ping('192.0.2.2', count=1, wait=1)[1] == 1,
                   heal, what='the wire carrying again')
        time.sleep(tail)
        stream.send_signal(signal.SIGINT)
        r = json.loads(stream.communicate(timeout=60)[0]
                       .strip().splitlines()[-1])
    finally:
        for p in (stream, server):
            if p.poll() is None:
                p.kill()
            p.wait()
    sent = r['sent_times']
    # The sender kept sending through the fault (else "no loss" proves
    # nothing): no gap over 0.5 s between sends.
    assert max(b - a for a, b in zip(sent, sent[1:])) < 0.5, 'sender stalled'
    longest = max((x['to'] - x['from'] + 1.0 / rate for x in r['lost_runs']),
                  default=0.0)
    return r['lost'], longest, r


def test_a_killed_link_daemon_and_a_flushed_nat_heal_by_themselves(cross,
                                                                   clouds):
    va, vb, _ = cross(6)
    xb = clouds.host('xb')

    def kill_daemon():
        pids = [int(p) for p in subprocess.run(
            ['ip', 'netns', 'pids', xb.ns], capture_output=True,
            text=True).stdout.split()]
        dev = wg_name('xb', 'xa')
        mine = [p for p in pids if dev in open(
            '/proc/%d/cmdline' % p, 'rb').read().decode(errors='replace')]
        assert mine, 'no wireguard-go %s in %s' % (dev, xb.ns)
        for p in mine:
            os.kill(p, 9)

    lost, hole, r = _outage(va, vb, kill_daemon)
    assert r['lost_tail'] == 0 and r['duplicates'] == 0, r
    print('daemon killed: %d lost, longest hole %.2f s' % (lost, hole))
    assert hole < 10, r['lost_runs']
    lost, hole, r = _outage(va, vb, lambda: [
        clouds.clouds.flush_nat(s) for s in ('cloud-a', 'cloud-b')])
    assert r['lost_tail'] == 0 and r['duplicates'] == 0, r
    print('NAT mappings flushed: %d lost, longest hole %.2f s' % (lost, hole))
    assert hole < 10, r['lost_runs']


def test_a_gateway_joins_wires_to_a_physical_network(clouds):
    """gw1 (cloud-b) has a trunk to a machine with VLANs 100 and 200 and a
    whole port to another machine. Two VMs in cloud-b are wired to the two
    VLANs, one VM in cloud-a to the whole port (across the clouds)."""
    api = Api(clouds)
    h1, h2 = clouds.host('h1'), clouds.host('h2')
    gw = clouds.host('gw1')
    trunk, plain = gw.machines['trunk'], gw.machines['plain']
    v100 = h2.add_vm('g100', [('g100-nic', '10.70.0.1/24')])
    v200 = h2.add_vm('g200', [('g200-nic', '10.71.0.1/24')])
    vfar = h1.add_vm('gfar', [('gfar-nic', '10.72.0.1/24')])
    made = [api.connect('g100-nic', 'gw1/p1/100')['id'],
            api.connect('g200-nic', 'gw1/p1/200')['id'],
            api.connect('gfar-nic', 'gw1/p2')['id']]
    try:
        assert api.wire(made[0])['path'] == ['h2', 'gw1']
        assert api.wire(made[2])['path'] == ['h1', 'xa', 'xb', 'gw1']
        # ARP and IP both ways, each VM with its machine.
        for vm, ip in ((v100, '10.70.0.2'), (v200, '10.71.0.2'),
                       (vfar, '10.72.0.2')):
            wait_until(lambda: vm.ping(ip, count=1)[1] == 1, 20,
                       what='%s reaching %s' % (vm.name, ip))
            assert vm.ping(ip, count=3) == (3, 3)
        assert trunk.ping('10.70.0.1', count=3) == (3, 3)
        # A broadcast into VLAN 100's wire leaves the trunk tagged 100,
        # never 200, and never reaches VLAN 200's VM.
        marker = bytes(Ether(dst='ff:ff:ff:ff:ff:ff', src='02:00:00:00:01:00',
                             type=0x88b5) / Raw(b'vlan-100-only'))
        seen = sniff_while([trunk, v200], lambda: v100.tool(
            'frames-send', 'eth0', marker.hex()))
        tagged = bytes(Ether(dst='ff:ff:ff:ff:ff:ff', src='02:00:00:00:01:00')
                       / Dot1Q(vlan=100) / Raw(marker[12:]))
        tagged = tagged[:16] + marker[12:]
        assert tagged in seen[trunk.name], seen[trunk.name][:5]
        assert not any(marker[14:] in f for f in seen[v200.name])
        assert not any(f[12:16] == bytes.fromhex('810000c8') and
                       marker[14:] in f for f in seen[trunk.name])
        # The whole port carries tagged frames unchanged, across clouds.
        q = bytes(Ether(dst='02:00:00:00:02:02', src='02:00:00:00:02:01') /
                  Dot1Q(vlan=7) / Raw(b'tagged-across-clouds'))
        seen = sniff_while([plain], lambda: vfar.tool('frames-send', 'eth0',
                                                      q.hex()))
        assert q in seen[plain.name]
        # Bad gateway ends: refused, nothing changes.
        for body, status, words in (
                ({'a': 'g100b', 'b': 'gw1/p1/100'}, 409, 'already wired'),
                ({'a': 'g100b', 'b': 'gw1/p1'}, 409, 'by VLAN'),
                ({'a': 'g100b', 'b': 'gw1/p9/5'}, 404, 'no port p9'),
                ({'a': 'g100b', 'b': 'gw9/p1/5'}, 404, 'no gateway'),
                ({'a': 'g100b', 'b': 'gw1/p1/4095'}, 422, 'VLAN must be')):
            r = api.req('POST', '/v1/wires', json=body)
            assert r.status_code == status and words in r.text, r.text
        assert len(api.ok('GET', '/v1/wires')['wires']) == len(made)
    finally:
        for wid in made:
            api.req('DELETE', '/v1/wires/%d' % wid)


def test_a_key_rotated_while_traffic_runs_costs_a_moment(cross, clouds):
    va, vb, _ = cross(7)
    old = extenders.link_view(clouds, 'xa', 'xb')['sides']['xb'][
        'public_key']

    def rotate():
        p = vwctl(clouds, 'extenders', 'rotate', 'xb')
        assert p.returncode == 0, p.stderr

    # A longer tail: the links switch keys just after vwctl returns.
    lost, hole, r = _outage(va, vb, rotate, tail=5.0)
    assert r['lost_tail'] == 0 and r['duplicates'] == 0, r
    print('key rotated: %d lost, longest hole %.2f s' % (lost, hole))
    # A new key, pinned by every peer of xb: its links are up with it.
    new = extenders.link_view(clouds, 'xa', 'xb')['sides']['xb']['public_key']
    assert new != old
    _set_links(clouds, {('xa', 'xb'): True, ('xb', 'xa'): True,
                        ('xb', 'xr'): True, ('xr', 'xb'): True})
    # "A moment": while the rotation is in flight xb and its peers report
    # ten times a second (`hurry`); measured in docs/benchmarks.rst.
    assert hole < 5, r['lost_runs']
    assert va.ping('192.0.2.2', count=3) == (3, 3)
