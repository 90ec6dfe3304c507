"""What tests send over wires and how they see it arrive: TCP and UDP
between stand-in VMs, raw frames sniffed on a VM's NIC, the special
frames a wire must carry unchanged."""
import json
import os
import signal
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


def sniff_while(vms, action, drain=1.0):
    """Sniff every vm's eth0 while action() runs, however long it takes,
    and for `drain` seconds after it (a frame in flight crosses a lab
    wire in milliseconds: what has not arrived a second later is not
    coming); {vm.name: [bytes]}. The sniffers print each frame as it
    arrives, so they are stopped, not waited out."""
    procs, readies = {}, []
    for vm in vms:
        ready = tempfile.mktemp(prefix='vwready')
        procs[vm.name] = vm.tool_bg('frames-sniff', 'eth0', '--seconds',
                                    600, '--ready-file', ready)
        readies.append(ready)
    wait_until(lambda: all(os.path.exists(r) for r in readies), 10,
               what='sniffers')
    for r in readies:
        os.unlink(r)
    action()
    time.sleep(drain)
    seen = {}
    for name, p in procs.items():
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
        seen[name] = [bytes.fromhex(json.loads(line)['hex'])
                      for line in out.splitlines() if line.strip()]
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
    """A UDP stream (1 kHz unless told) from va to vb's `dst` (realtime
    sender), started at once. `stop()` ends it when the test is done with
    it and tallies; `seconds` is only a cap (or, for `tally()`, a fixed
    length)."""

    def __init__(self, lab, va, vb, dst, port, seconds=300, rate=1000,
                 size=64):
        self.rate = rate
        ready = os.path.join(lab.dir, 'rx-ready-%d' % port)
        self.seconds = seconds
        self.rx = vb.tool_bg('udp-recv', '--port', port, '--seconds',
                             seconds + 4, '--ready-file', ready)
        wait_until(lambda: os.path.exists(ready), 10, what='udp receiver')
        os.unlink(ready)
        self.tx = va.tool_bg('udp-send', '--dst', dst, '--port', port,
                             '--rate', rate, '--seconds', seconds,
                             '--size', size, '--ready-file', ready,
                             realtime=True)
        wait_until(lambda: os.path.exists(ready), 10, what='udp sender')
        os.unlink(ready)
        self.started = time.time()
        self.report = None      # the receiver's, once stopped

    def running(self):
        return self.tx.poll() is None

    def stop(self):
        """End it now: the sender, then (what it sent landed) the
        receiver. (sent, received, missing, duplicates), once it is shown
        that the sender ran to now on its schedule (a probe that fell
        silent would judge nothing)."""
        assert self.running(), 'the stream ended before it was stopped'
        stopped = time.time()
        self.tx.send_signal(signal.SIGINT)
        sent = _last_json(self.tx.communicate(timeout=30)[0])
        time.sleep(0.5)
        self.rx.send_signal(signal.SIGINT)
        got = self.report = _last_json(self.rx.communicate(timeout=30)[0])
        # 1.5 s: the ready file is seen up to a poll late, and a
        # realtime sender may still be catching up its last sends.
        assert sent['stopped'] and sent['sent'] >= self.rate * (
            stopped - self.started - 1.5), (sent, stopped - self.started)
        return sent['sent'], got['received'], got['missing'], \
            got['duplicates']

    def tally(self):
        """(sent, received, missing, duplicates) once it ran its length."""
        sent = _last_json(self.tx.communicate(timeout=self.seconds + 30)[0])
        got = self.report = _last_json(
            self.rx.communicate(timeout=self.seconds + 30)[0])
        return sent['sent'], got['received'], got['missing'], \
            got['duplicates']

    def kill(self):
        """After a failed test: nothing left running into the next."""
        for p in (self.tx, self.rx):
            if p.poll() is None:
                p.kill()


def _last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def tunnelled_while(hosts, directory, action, tag=''):
    """Run action() with tcpdump on every lab host of `hosts`: (what it
    returned, every UDP datagram crossing them, tunnels opened: each with
    its host, interface, direction and tunnel key; vwlab.capture)."""
    from vwlab.capture import Capture
    caps = [Capture(h.ns, h.name, os.path.join(
        str(directory), '%s%s.pcap' % (h.name, tag)), 'udp or proto gre')
        for h in hosts]
    started = []
    try:
        for c in caps:
            started.append(c.__enter__())
        out = action()
    finally:
        for c in started:
            c.stop()
    return out, [d for c in caps for d in c.datagrams()]
