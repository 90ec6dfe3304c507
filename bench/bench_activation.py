"""Activation alone: how soon a moving vNIC's destination delivers after the
guest's first frame, with the controller answering and with it frozen.

No QEMU, so no pause, no guest and no TCG load: what is left is the
switch and the controller. A far end on h3 streams sequenced UDP (4 kHz,
each datagram stamped with its send time) over a wire to a vNIC that
"moves" between h1 and h2: its port appears on the destination (a
namespace with the same MAC) while the source keeps its own, so the
controller infers the move and installs the move's flows (the far end
sends to both hosts; the destination holds until the guest's first frame,
whose learn action installs the delivering flow). Then the destination
sends QEMU's RARP and waits for the first datagram of the stream; the
source port is unplugged and the next move goes back. Modes alternate
move by move:

  immediate  the controller sends its cleanup bundles at once
             (--activation-settle-ms 0: what it did before)
  frozen     the controller is stopped (SIGSTOP) from just before the
             RARP until the first datagram arrived: the switch's learn
             alone
  settled    the controller waits 20 ms before its cleanup (the default)
  frozen-rt, settled-rt
             the same with every ovs-vswitchd SCHED_RR 1 during the move
             (nothing else on the machine can delay the switches); with
             --load N busy processes beside them, this tells the switches'
             own cost from the machine's contention

The controller is restarted (hitless) when the mode needs the other
setting. Where the first deliveries spent their time is read from
captures on the far host's and the destination's underlay devices: in
the far host's switch, on the underlay, in the destination's switch.

Per move: held = the first delivered datagram's send time minus the RARP's
(how long after the frame the switch still dropped the stream: the
receive path's latency is not in it), arrive = its receive time minus the
RARP's. A move is probed if the sender had no send gap over 2 ms within
5 ms of the RARP or before the first delivery.

    python bench/bench_activation.py [--moves 60] [--rate 4000] [--load N]
        [--modes immediate,frozen,settled] [--result activation]
"""
import argparse
import atexit
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Api, summary, write_result                 # noqa: E402

from vwlab import Lab                                          # noqa: E402
from vwlab.shell import sh                                     # noqa: E402

PORT = 9000
MAC = '52:54:00:aa:00:01'
VNIC = 'act-mv'
MODES = ('immediate', 'frozen', 'settled', 'frozen-rt', 'settled-rt')
# The controller's --activation-settle-ms in each mode (frozen: whichever
# controller runs; it is stopped).
SETTLE_MS = {'immediate': 0, 'settled': 20, 'settled-rt': 20}


def arrival_cmd(vm, *args):
    return ['ip', 'netns', 'exec', vm.ns, sys.executable, '-m',
            'vwlab.arrival'] + [str(a) for a in args]


def flows_with(host, priority):
    return [l for l in host.dump_flows().splitlines()
            if 'priority=%d,' % priority in l]


def wait(what, pred, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.05)
    raise RuntimeError('timed out waiting for %s' % what)


def one_move(lab, api, wid, src_vm, dst, far_host, n, mode):
    dst_vm = dst.add_paused_vm('mv%d' % n, [(VNIC, MAC)])
    wait('the move\'s flows on %s' % dst.name,
         lambda: flows_with(dst, 110) and flows_with(dst, 90))
    # Let the stream meet the held flow, so the destination's datapath
    # caches its drop (what a migration's destination has by RESUME).
    time.sleep(0.3)
    sniffers = {d: sniff(h, d) for h, d in ((far_host, 'out'), (dst, 'in'))}
    if mode.endswith('-rt'):
        switches_realtime(lab, True)
    if mode.startswith('frozen'):
        lab.controller.send_signal(signal.SIGSTOP)
    try:
        p = subprocess.run(arrival_cmd(dst_vm, 'arrive', 'eth0', '--port',
                                       PORT, '--timeout', 3, '--collect',
                                       0.05),
                           capture_output=True, text=True, timeout=30)
    finally:
        if mode.startswith('frozen'):
            lab.controller.send_signal(signal.SIGCONT)
        if mode.endswith('-rt'):
            switches_realtime(lab, False)
    r = json.loads(p.stdout.strip().splitlines()[-1])
    seen = {d: dict(json.loads(s.communicate(timeout=30)[0]
                               .strip().splitlines()[-1])['seen'])
            for d, s in sniffers.items()}
    r['path'] = path_of(r['delivered'], seen)
    # One-way latency of every delivery in the 50 ms after the first: a
    # switch busy with a bundle shows as a bump (when, how much).
    lat = [(at - r['sent_at'], at - sent) for _q, sent, at in r['delivered']]
    r['early_ms'] = round(max((l for t, l in lat if t < 0.005), default=0)
                          * 1e3, 3)
    r['late_ms'] = round(max((l for t, l in lat if t >= 0.005), default=0)
                         * 1e3, 3)
    src_vm.host.remove_vm(src_vm)
    wait('the move to %s to end' % dst.name,
         lambda: not flows_with(dst, 110) and
         {(w := api.call('GET', '/v1/wires/%d' % wid))['host_a'],
          w['host_b']} == {dst.name, 'h3'})
    return dst_vm, dict(r, mode=mode, src=src_vm.host.name, dst=dst.name)


def switches_realtime(lab, on):
    """Every host's ovs-vswitchd, all its threads, SCHED_RR 1 (or back to
    normal scheduling at its niceness): what the switch-over costs when
    nothing else on the machine can delay the switch."""
    for h in lab.hosts:
        with open(os.path.join(h.dir, 'vswitchd.pid')) as f:
            pid = f.read().strip()
        sh(['chrt', '-a', '-p'] + (['-r', '1'] if on else ['-o', '0']) +
           [pid])


def sniff(host, direction):
    """The stream on `host`'s underlay device, for a second from now."""
    p = subprocess.Popen(
        ['ip', 'netns', 'exec', host.ns, sys.executable, '-m',
         'vwlab.arrival', 'tunnel-sniff', 'ul0', '--port', str(PORT),
         '--seconds', '1.5', '--direction', direction],
        stdout=subprocess.PIPE, text=True)
    assert json.loads(p.stdout.readline())['ready']
    return p


def path_of(delivered, seen, first=8):
    """Where the first deliveries spent their time, ms: in the far host's
    switch (send -> leaving its underlay device), on the underlay (-> the
    destination's device), in the destination's switch (-> the port)."""
    out = []
    for seq, sent, at in delivered[:first]:
        left, came = seen['out'].get(seq), seen['in'].get(seq)
        if left is None or came is None:
            continue
        out.append({'seq': seq,
                    'far_switch': round((left - sent) * 1e3, 3),
                    'underlay': round((came - left) * 1e3, 3),
                    'dst_switch': round((at - came) * 1e3, 3)})
    return out


def judge(moves, gaps, modes):
    for m in moves:
        end = m['first_sent'] or m['sent_at'] + 3
        m['probed'] = not any(s < end and s + g > m['sent_at'] - 0.005
                              for s, g in gaps)
        if m['first_at'] is not None:
            m['held_ms'] = round((m['first_sent'] - m['sent_at']) * 1e3, 3)
            m['arrive_ms'] = round((m['first_at'] - m['sent_at']) * 1e3, 3)
    out = {}
    for mode in modes:
        ms = [m for m in moves if m['mode'] == mode and m['probed']]
        done = [m for m in ms if m['first_at'] is not None]
        out[mode] = {
            'moves': len(ms),
            'unprobed': sum(1 for m in moves
                            if m['mode'] == mode and not m['probed']),
            'never_delivered': len(ms) - len(done),
            'held_ms': summary([m['held_ms'] for m in done]) if done
            else None,
            'arrive_ms': summary([m['arrive_ms'] for m in done]) if done
            else None,
            'latency_first_5ms': summary([m['early_ms'] for m in done])
            if done else None,
            'latency_after_5ms': summary([m['late_ms'] for m in done])
            if done else None,
        }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--moves', type=int, default=60,
                    help='moves in all, the modes alternating')
    ap.add_argument('--rate', type=int, default=4000)
    ap.add_argument('--load', type=int, default=0,
                    help='busy processes at nice 0 throughout (a guest '
                         "vCPU under TCG is one; default: none)")
    ap.add_argument('--modes', default='immediate,frozen,settled',
                    help='comma-separated, in turn (default: %(default)s)')
    ap.add_argument('--result', default='activation',
                    help='bench/results/NAME.json (default: %(default)s)')
    args = ap.parse_args()
    modes = args.modes.split(',')
    if not set(modes) <= set(MODES):
        ap.error('modes are %s' % ', '.join(MODES))
    load = [subprocess.Popen([sys.executable, '-c', 'while True: pass'])
            for _ in range(args.load)]
    atexit.register(lambda: [p.kill() for p in load])
    moves = []
    with Lab(3) as lab:
        h1, h2, h3 = lab.hosts
        lab.start_controller(extra=('--activation-settle-ms', '0'))
        api = Api(lab)
        api.wait_hosts(3)
        far = h3.add_vm('actfar', [('act-far', '10.93.0.2/24')])
        vm = h1.add_paused_vm('mv0', [(VNIC, MAC)])
        sh(['ip', 'addr', 'add', '10.93.0.1/24', 'dev', 'eth0'], ns=vm.ns)
        wid = api.call('POST', '/v1/wires', {'a': VNIC, 'b': 'act-far'})['id']
        wait('the wire', lambda: api.call('GET', '/v1/wires/%d' % wid)
             ['state'] == 'tunnelled')
        sender = subprocess.Popen(
            arrival_cmd(far, 'stream', '--dst', '10.93.0.1', '--port', PORT,
                        '--rate', args.rate, '--mac', MAC),
            stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(1)
            running = 0
            for n in range(1, args.moves + 1):
                mode = modes[(n - 1) % len(modes)]
                want = SETTLE_MS.get(mode, running)
                if want != running:
                    lab.stop_controller()
                    lab.start_controller(extra=('--activation-settle-ms',
                                                str(want)))
                    api.wait_hosts(3)
                    running = want
                dst = h2 if vm.host is h1 else h1
                vm, m = one_move(lab, api, wid, vm, dst, h3, n, mode)
                moves.append(m)
                print('move %2d %-9s %s -> %s: held %s ms' % (
                    n, mode, m['src'], m['dst'],
                    '%.2f' % ((m['first_sent'] - m['sent_at']) * 1e3)
                    if m['first_sent'] else 'never'), flush=True)
        finally:
            sender.send_signal(signal.SIGINT)
            report = json.loads(sender.communicate(timeout=30)[0]
                                .strip().splitlines()[-1])
    for p in load:
        p.kill()
    result = judge(moves, report['gaps'], modes)
    print('\nms, p50 / p99 / max over probed moves:')
    print('%-10s %6s  %-20s %-20s %-20s %-20s' % (
        'mode', 'moves', 'held after frame', 'first arrival',
        'latency <5 ms', 'latency 5-50 ms'))
    for mode in modes:
        r = result[mode]

        def f(k):
            v = r[k]
            return '%.2f / %.2f / %.2f' % (v['p50'], v['p99'], v['max']) \
                if v else '-'
        print('%-10s %6d  %-20s %-20s %-20s %-20s' % (
            mode, r['moves'], f('held_ms'), f('arrive_ms'),
            f('latency_first_5ms'), f('latency_after_5ms')))
        if r['unprobed'] or r['never_delivered']:
            print('%10s %d unprobed, %d never delivered' % (
                '', r['unprobed'], r['never_delivered']))
    write_result(args.result, {'rate': args.rate, 'load': args.load,
                               'modes': result,
                                'sender': {'sent': report['sent'],
                                           'gaps': report['gaps']},
                                'moves': moves})


if __name__ == '__main__':
    main()
