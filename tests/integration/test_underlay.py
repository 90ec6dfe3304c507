"""The underlay as OVS's userspace tunnels need it."""
import json
import subprocess
import sys

WHO_HAS = r'''
import json, sys
from scapy.all import ARP, Ether, conf, srp
conf.verb = 0
ans, _ = srp(Ether(dst='ff:ff:ff:ff:ff:ff') / ARP(pdst=sys.argv[2]),
             iface=sys.argv[1], timeout=1.0, multi=True)
print(json.dumps(sorted({r.hwsrc for _, r in ans})))
'''


def test_a_tunnel_address_is_answered_by_one_mac_only(lab):
    """With the userspace datapath the host's IP stack also sees frames on
    the underlay NIC; if it answered ARP there, peers would learn the NIC's
    MAC half the time and their tunnelled traffic would go nowhere (seen
    as seconds-long losses during migrations)."""
    h1, h2 = lab.hosts[0], lab.hosts[1]
    out = subprocess.run(['ip', 'netns', 'exec', h1.ns, sys.executable, '-c',
                          WHO_HAS, 'br-phy', h2.tunnel_ip],
                         capture_output=True, text=True, timeout=30,
                         check=True).stdout
    assert json.loads(out) == [h2.underlay_mac()]


GRE_INJECT = r'''
import sys
from scapy.all import GRE, IP, Ether, Raw, sendp
iface, src, dst, mac, key, payload = sys.argv[1:7]
inner = Ether(dst='ff:ff:ff:ff:ff:ff', src='02:66:66:66:66:66',
              type=0x88b5) / Raw(bytes.fromhex(payload))
sendp(Ether(dst=mac) / IP(src=src, dst=dst) /
      GRE(key_present=1, key=int(key), proto=0x6558) / inner,
      iface=iface, count=5, verbose=False)
'''


def test_a_host_spoofing_a_peers_tunnel_address_is_stopped_by_the_fabric(
        lab, pair):
    """A wire h1 <-> h2; h3, compromised, sends frames into it straight
    onto the underlay, with the wire's connector id: under its own address
    h2's tunnel-source match drops them; under h1's (spoofed) the
    underlay's source-address check does, as a data-center switch's would."""
    from scapy.all import Ether, Raw
    from vwlab import antispoof
    from vwtest.wire_traffic import sniff_while
    va, vb, w = pair('h1', 'h2')
    h1, h2, h3 = lab.hosts
    before = antispoof.dropped(lab.ul_ns).get(h3.name, 0)
    sent = {}

    def inject(src, tag):
        payload = (b'forged-' + tag).hex()
        subprocess.run(['ip', 'netns', 'exec', h3.ns, sys.executable, '-c',
                        GRE_INJECT, 'ul0', src, h2.tunnel_ip,
                        h2.underlay_mac(), str(w['id']), payload],
                       check=True, timeout=30)
        sent[tag] = bytes(Ether(dst='ff:ff:ff:ff:ff:ff',
                                src='02:66:66:66:66:66', type=0x88b5) /
                          Raw(b'forged-' + tag))
    genuine = bytes(Ether(dst='ff:ff:ff:ff:ff:ff', src='02:11:11:11:11:11',
                          type=0x88b5) / Raw(b'genuine'))

    def send():
        inject(h3.tunnel_ip, b'own')
        inject(h1.tunnel_ip, b'spoofed')
        va.tool('frames-send', 'eth0', genuine.hex())

    seen = sniff_while([vb], send)
    assert genuine in seen[vb.name]                 # the sniffer works
    assert sent[b'own'] not in seen[vb.name]
    assert sent[b'spoofed'] not in seen[vb.name]
    # The spoofed ones died on the underlay, counted there.
    assert antispoof.dropped(lab.ul_ns).get(h3.name, 0) - before >= 5
