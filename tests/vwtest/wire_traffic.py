"""What tests send over wires and how they see it arrive: TCP and UDP
between stand-in VMs, raw frames sniffed on a VM's NIC, the special
frames a wire must carry unchanged."""
import json
import os
import tempfile
import threading
import time

from scapy.all import ARP, LLC, STP, Dot1Q, Ether, Raw
from scapy.contrib.lldp import (LLDPDUChassisID, LLDPDUEndOfLLDPDU,
                                LLDPDUPortID, LLDPDUTimeToLive)

from vwtest import wait_until


def tcp_transfer(src, dst, dst_ip, nbytes, port=5001):
    ready = tempfile.mktemp(prefix='vwready')
    rx = dst.tool_bg('tcp-recv', '--port', port, '--ready-file', ready)
    wait_until(lambda: os.path.exists(ready), 10, what='tcp receiver')
    os.unlink(ready)
    sent = src.tool('tcp-send', '--dst', dst_ip, '--port', port,
                    '--bytes', nbytes)
    out, err = rx.communicate(timeout=60)
    got = json.loads(out.strip().splitlines()[-1])
    return sent, got


def udp_stream(src, dst, dst_ip, seconds=1.0, rate=1000, port=6001, size=64,
               marks=None):
    """`marks`: a dict given the time the sender ended ('sent_at')."""
    ready = tempfile.mktemp(prefix='vwready')
    rx = dst.tool_bg('udp-recv', '--port', port, '--seconds', seconds + 1.5,
                     '--ready-file', ready)
    wait_until(lambda: os.path.exists(ready), 10, what='udp receiver')
    os.unlink(ready)
    sent = src.tool('udp-send', '--dst', dst_ip, '--port', port, '--rate',
                    rate, '--seconds', seconds, '--size', size,
                    timeout=max(60, seconds + 30))
    if marks is not None:
        marks['sent_at'] = time.time()
    out, _ = rx.communicate(timeout=seconds + 30)
    return sent, json.loads(out.strip().splitlines()[-1])


def sniff_while(vms, action, seconds=2.0):
    """Sniff every vm's eth0 while action() runs; {vm.name: [bytes]}."""
    procs, readies = {}, []
    for vm in vms:
        ready = tempfile.mktemp(prefix='vwready')
        procs[vm.name] = vm.tool_bg('frames-sniff', 'eth0', '--seconds',
                                    seconds, '--ready-file', ready)
        readies.append(ready)
    wait_until(lambda: all(os.path.exists(r) for r in readies), 10,
               what='sniffers')
    for r in readies:
        os.unlink(r)
    action()
    seen = {}
    for name, p in procs.items():
        out, _ = p.communicate(timeout=seconds + 20)
        seen[name] = [bytes.fromhex(json.loads(l)['hex'])
                      for l in out.splitlines() if l.strip()]
    return seen


def special_frames(src_mac):
    lldp = Ether(dst='01:80:c2:00:00:0e', src=src_mac, type=0x88cc) / \
        LLDPDUChassisID(subtype=4, id=src_mac) / \
        LLDPDUPortID(subtype=5, id=b'eth0') / LLDPDUTimeToLive(ttl=120) / \
        LLDPDUEndOfLLDPDU()
    bpdu = Ether(dst='01:80:c2:00:00:00', src=src_mac) / \
        LLC(dsap=0x42, ssap=0x42, ctrl=3) / STP()
    return {
        'vlan-tagged': Ether(dst='ff:ff:ff:ff:ff:ff', src=src_mac) /
        Dot1Q(vlan=100, prio=5) / Raw(b'tagged-payload' * 4),
        'qinq': Ether(dst='02:00:00:00:00:99', src=src_mac, type=0x88a8) /
        Dot1Q(vlan=200, type=0x8100) / Dot1Q(vlan=300) / Raw(b'q-in-q' * 8),
        'lldp': lldp,
        'bpdu': bpdu,
        'non-ip-ethertype': Ether(dst='02:00:00:00:00:77', src=src_mac,
                                  type=0x88b5) / Raw(b'local-experimental'),
        'arp': Ether(dst='ff:ff:ff:ff:ff:ff', src=src_mac) /
        ARP(psrc='203.0.113.9', pdst='203.0.113.10', hwsrc=src_mac),
    }


def stream_across(src, dst, dst_ip, action, seconds=10.0, after=2.0,
                  rate=1000):
    """A udp_stream of `seconds` with action() run `after` seconds into
    it (a restart, an upgrade): (sender's report, receiver's report,
    action's result)."""
    out = {}
    t = threading.Thread(target=lambda: out.update(zip(
        ('sent', 'got'), udp_stream(src, dst, dst_ip, seconds=seconds,
                                    rate=rate))))
    t.start()
    time.sleep(after)
    try:
        result = action()
    finally:
        t.join(seconds + 60)
    return out['sent'], out['got'], result


class Stream:
    """A 1 kHz UDP stream from va to vb's `dst` for `seconds` (realtime
    sender), started at once; `lost()` the receiver's tally at the end."""

    def __init__(self, lab, va, vb, dst, port, seconds):
        ready = os.path.join(lab.dir, 'rx-ready-%d' % port)
        self.seconds = seconds
        self.rx = vb.tool_bg('udp-recv', '--port', port, '--seconds',
                             seconds + 4, '--ready-file', ready)
        wait_until(lambda: os.path.exists(ready), 10, what='udp receiver')
        self.tx = va.tool_bg('udp-send', '--dst', dst, '--port', port,
                             '--rate', 1000, '--seconds', seconds,
                             realtime=True)

    def running(self):
        return self.tx.poll() is None

    def tally(self):
        """(sent, received, missing, duplicates)."""
        sent = json.loads(self.tx.communicate(timeout=self.seconds + 30)[0]
                          .strip().splitlines()[-1])['sent']
        got = json.loads(self.rx.communicate(timeout=self.seconds + 30)[0]
                         .strip().splitlines()[-1])
        return sent, got['received'], got['missing'], got['duplicates']
