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
