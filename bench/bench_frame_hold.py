"""How fast a destination host's ring (vw-frame-hold) hands its held
frames to the guest's port once the controller's release reaches it,
against the same switch carrying the same burst port to port, in the
same run (issue 42: the first held frame within 2 ms of RESUME; held in
the controller it came 17-19 ms after RESUME at p50).

One lab host (real OVS, netdev datapath; no controller: the bench owns
the flow table and installs what the controller is to). Each round:

  direct  a burst of --frames numbered frames from one namespace port to
          another (flow: in_port -> output): the switch's own latency for
          the first frame and the burst's spread at the receiver.
  ring    the same burst tagged with a slot into vw-hold, held; 0.3 s
          later the release (a packet-out of the JSON message, as the
          controller sends it) lets all of them go: from the message's
          arrival on vw-hold (kernel timestamp) to the first and the last
          frame at the receiver (kernel timestamps, one clock).

Every round proves it measured: the receiver got every frame of the
burst, in order, once, and none before the release.

    python bench/bench_frame_hold.py [--frames 500] [--rounds 10]
        [--out frame-hold-run1]
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import summary, write_result                    # noqa: E402

from vwlab import Lab, REPO                                 # noqa: E402
from virtualwire.host.hold_port import message_frame        # noqa: E402
from virtualwire.host.hold_ring import ANSWER_SLOT          # noqa: E402

KIND = 0x88B6           # the numbered frames' EtherType
# Kernel receive timestamps of one port's frames of one EtherType, as
# "ns number" lines (number -1: a message): SO_TIMESTAMPNS, so the
# figures are the kernel's, not this reader's scheduling.
STAMP = r'''
import socket, struct, sys
ifname, kind, way = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(socket.SOL_SOCKET, 35, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
s.bind((ifname, 0))
print("ready", flush=True)
while True:
    data, anc, _f, addr = s.recvmsg(65535, 256)
    if (addr[2] == socket.PACKET_OUTGOING) != (way == "out"):
        continue
    if struct.unpack("!H", data[12:14])[0] != kind:
        continue
    ns = 0
    for lvl, typ, raw in anc:
        if lvl == socket.SOL_SOCKET and typ == 35:
            sec, nsec = struct.unpack("qq", raw[:16])
            ns = sec * 10**9 + nsec
    n = struct.unpack("!I", data[14:18])[0] if kind == 0x88B6 else -1
    print(ns, n, flush=True)
'''
BURST = r'''
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
frames = [bytes.fromhex(h) for h in sys.stdin.read().split()]
for f in frames:
    s.send(f)
'''


class Stamps:
    def __init__(self, ns, ifname, kind, way='in'):
        self.p = subprocess.Popen(
            ['ip', 'netns', 'exec', ns, sys.executable, '-c', STAMP,
             ifname, str(kind), way], stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == 'ready'
        os.set_blocking(self.p.stdout.fileno(), False)
        self.got = []
        self.part = ''          # a line the reader has not finished

    def read(self):
        for line in iter(self.p.stdout.readline, ''):
            line, self.part = self.part + line, ''
            if not line.endswith('\n'):
                self.part = line
                break
            ns, n = line.split()
            self.got.append((int(ns), int(n)))
        return self.got

    def take(self):
        out, self.got = self.read(), []
        return out

    def close(self):
        self.p.kill()
        self.p.wait()


def frames(src, dst, n):
    mac = [bytes.fromhex(m.replace(':', '')) for m in (dst, src)]
    return [mac[0] + mac[1] + struct.pack('!HI', KIND, i) + bytes(60)
            for i in range(n)]


def wait_for(stamps, n, timeout=20):
    end = time.time() + timeout
    while len(stamps.read()) < n and time.time() < end:
        time.sleep(0.02)
    return stamps.take()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--frames', type=int, default=500)
    ap.add_argument('--rounds', type=int, default=10)
    ap.add_argument('--out', default='frame-hold')
    args = ap.parse_args()
    with Lab(1, tls=False, collector=False, hold_frames=False) as lab:
        h = lab.hosts[0]
        h.keep_frames(ring=False)      # the bench runs its own
        vms = [h.add_paused_vm(name, [(name + '-nic', mac)]) for name, mac in
               (('bs', '52:54:00:78:00:01'), ('bd', '52:54:00:78:00:02'),
                ('bc', '52:54:00:78:00:03'))]
        src, dst, ctl = vms
        port = {vm.name: vm.nics[vm.name + '-nic']['port'] for vm in vms}
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, 'controller'))
        hold = subprocess.Popen(
            ['ip', 'netns', 'exec', h.ns, sys.executable, '-m',
             'virtualwire.host.hold_port'], env=env,
            stderr=subprocess.DEVNULL)
        rx = Stamps(dst.ns, 'eth0', KIND)
        tx = Stamps(src.ns, 'eth0', KIND, way='out')
        msgs = Stamps(h.ns, 'vw-hold', 0x88B5)
        burst = frames(src.nics['bs-nic']['mac'], dst.nics['bd-nic']['mac'],
                       args.frames)
        text = ' '.join(f.hex() for f in burst)

        def send():
            tx.take()               # what an earlier phase sent
            subprocess.run(['ip', 'netns', 'exec', src.ns, sys.executable,
                            '-c', BURST], input=text, text=True, check=True)

        def flows(*fs):
            h.ofctl('del-flows')
            for f in fs:
                h.ofctl('add-flow', f)
        rounds = []
        try:
            time.sleep(0.5)
            for r in range(args.rounds):
                slot = r + 1
                flows('in_port=%s,actions=output:%s' % (port['bs'], port['bd']))
                send()
                got, sent = wait_for(rx, args.frames), wait_for(tx, 1)
                direct = check(got, args.frames, 'direct')
                direct['first_ms'] = (got[0][0] - sent[0][0]) / 1e6
                flows('in_port=%s,actions=push_vlan:0x88a8,set_field:%d->'
                      'vlan_vid,output:vw-hold' % (port['bs'], 0x1000 | slot),
                      'in_port=vw-hold,dl_vlan=%d,actions=pop_vlan,output:%s'
                      % (slot, port['bd']),
                      'in_port=vw-hold,dl_vlan=%d,actions=pop_vlan,output:%s'
                      % (ANSWER_SLOT, port['bc']))
                send()
                time.sleep(0.3)
                early = rx.take()
                if early:
                    raise SystemExit('round %d: %d frames reached the guest '
                                     'before the release' % (r, len(early)))
                h.ofctl('packet-out', 'in_port=controller,packet=%s,'
                        'actions=output:vw-hold' % message_frame(json.dumps(
                            {'op': 'release', 'slot': slot, 'id': r}
                        ).encode()).hex())
                got = wait_for(rx, args.frames)
                said = wait_for(msgs, 1)
                ring = check(got, args.frames, 'ring')
                ring['first_ms'] = (got[0][0] - said[0][0]) / 1e6
                rounds.append({'direct': direct, 'ring': ring})
                print('round %d: direct first %.3f ms spread %.2f ms; ring '
                      'first %.3f ms spread %.2f ms' % (
                          r, direct['first_ms'], direct['spread_ms'],
                          ring['first_ms'], ring['spread_ms']), flush=True)
        finally:
            for s in (rx, tx, msgs):
                s.close()
            hold.kill()
            hold.wait()
    out = {'frames': args.frames, 'rounds': rounds}
    for k in ('first_ms', 'spread_ms'):
        for way in ('direct', 'ring'):
            out['%s_%s' % (way, k)] = summary([x[way][k] for x in rounds],
                                              digits=3)
    out['ratio_first_p50'] = round(out['ring_first_ms']['p50'] /
                                   out['direct_first_ms']['p50'], 2)
    out['ratio_spread_p50'] = round(out['ring_spread_ms']['p50'] /
                                    out['direct_spread_ms']['p50'], 2)
    print(json.dumps({k: v for k, v in out.items() if k != 'rounds'},
                     indent=1))
    write_result(args.out, out)


def check(got, n, what):
    """The burst arrived whole, in order, once: else this round measured
    nothing and the run stops."""
    nums = [k for _t, k in got]
    if nums != list(range(n)):
        raise SystemExit('%s: the receiver got %d frames, not 0..%d in '
                         'order (first %s)' % (what, len(nums), n - 1,
                                               nums[:10]))
    return {'spread_ms': (got[-1][0] - got[0][0]) / 1e6}


if __name__ == '__main__':
    main()
