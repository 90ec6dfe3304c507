"""Wires between clouds: what the extender path costs, side by side.

One lab: cloud-a (h1, h2, extender xa behind a port-preserving NAT) and
cloud-b (h3, extender xb behind one), a public segment between the NATs.
Interleaved, --runs times each, iperf3 TCP for --seconds (1500-byte
guests):

  in-site GRE wire     h1 <-> h2, one GRE hop (the baseline)
  cross-cloud wire     h1 <-> h3: h1 -> xa ==WireGuard==> xb -> h3
  bare link            iperf3 between xa and xb over their link addresses:
                       the encrypted link alone (br-xl, VXLAN, boringtun),
                       no wire, no GRE
  WireGuard tun        iperf3 between the link's two tunnel addresses: the
                       daemon alone (no br-xl, no VXLAN)
  OpenVPN tap 1600     the link daemon we ran before, edge to edge through
                       the same NATs, as the agent ran it (TLS with pinned
                       certificates, AES-256-GCM, --tun-mtu 1600 cut by
                       --fragment 1300; the kernel's tap stays at 1500:
                       --ifconfig-noexec): set against the WireGuard tun

Every case but the in-site wire must have its bytes sent by its carrier
(the tun or the tap, counted on xa over the window), or the run stops.

Latency: --pings ICMP echoes, 10 ms apart, over each wire; the extender
path's added RTT is the difference of medians.

Link bring-up through both NATs, --relinks times: DELETE the xa-xb link,
wait until both agents dropped it, POST it again; time until the
controller sees it up on both sides, and until a ping crosses the wire
again (the path fell back to waiting-host meanwhile).

    python bench/bench_extender.py [--runs 3] [--seconds 5] [--pings 200]
                                   [--relinks 20]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_throughput import iperf                        # noqa: E402
from common import Api, pct, summary, write_result        # noqa: E402
from cpu_stages import CpuWindow, capacity                # noqa: E402

from extender_links import (Bare, carriers, check_carrier,  # noqa: E402
                            openvpn, sent_bytes, wait, wireguard_tun)

from vwlab import Lab, extenders                          # noqa: E402


def rtts(vm, dst, n):
    p = subprocess.run(['ip', 'netns', 'exec', vm.ns, 'ping', '-n', '-c',
                        str(n), '-i', '0.01', dst], capture_output=True,
                       text=True, timeout=n + 30)
    got = [float(x) for x in re.findall(r'time=([\d.]+) ms', p.stdout)]
    if len(got) < n * 0.95:
        raise RuntimeError('only %d/%d pings answered' % (len(got), n))
    return got


def busiest(report, n=4):
    """The window's costliest stages, as 'name cores (busiest thread)'."""
    return ', '.join('%s %.2f (%.2f)' % (k, v['cores'],
                                        v['busiest_thread_cores'])
                     for k, v in list(report['stages'].items())[:n])


def own_cores(tput, cpu):
    """Per case and run: the rate its path could carry if each of its
    stages (every process but iperf3 and the root namespace's) had a core
    of its own, and which stage bounds it (bench/cpu_stages.py)."""
    out = {}
    for name, reports in cpu.items():
        rates, bound = [], []
        for mbit, rep in zip(tput[name], reports):
            caps = capacity(rep, mbit, [
                k for k in rep['stages'] if not k.startswith('root ')
                and not k.endswith(' iperf3')])
            stage = min(caps, key=caps.get) if caps else None
            rates.append(caps.get(stage))
            bound.append(stage)
        out[name] = {'mbit_s': rates, 'bound_by': bound}
    return out


def link_up(api, a, b):
    k = next((k for k in api.call('GET', '/v1/extender-links')['links']
              if (k['a'], k['b']) == (a, b)), None)
    return k is not None and k['state'] == 'up'


def relink(api, lab, va, dst):
    api.call('DELETE', '/v1/extender-links/xa/xb')
    wait(lambda: all(not h.get('links') or not any(
        k['peer'] in ('xa', 'xb') for k in h['links'])
        for h in api.call('GET', '/v1/hosts')['hosts']
        if h['name'] in ('xa', 'xb')), 30, 'link gone on both agents')
    t0 = time.time()
    api.call('POST', '/v1/extender-links', {'a': 'xa', 'b': 'xb'})
    wait(lambda: link_up(api, 'xa', 'xb'), 60, 'link up', every=0.01)
    t_up = time.time() - t0
    wait(lambda: subprocess.run(
        ['ip', 'netns', 'exec', va.ns, 'ping', '-n', '-c', '1', '-W', '0.2',
         dst], capture_output=True).returncode == 0, 60, 'ping across',
        every=0)
    return t_up, time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--seconds', type=int, default=5)
    ap.add_argument('--pings', type=int, default=200)
    ap.add_argument('--relinks', type=int, default=20)
    ap.add_argument('--link-rate', default='',
                    help="the agents' --link-rate (default: unshaped, to "
                         "measure the daemon; the agent's own default "
                         'shapes each link to 80mbit)')
    ap.add_argument('--wireguard', default=None,
                    help="the agents' --wireguard daemon (default: the "
                         "agent's own, boringtun-cli)")
    ap.add_argument('--result', default='extender',
                    help='bench/results/NAME.json and .txt (default: '
                         '%(default)s)')
    args = ap.parse_args()
    with Lab(3, sites=['cloud-a', 'cloud-a', 'cloud-b'],
             extenders='xa:cloud-a:nat,xb:cloud-b:nat') as lab:
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(5)
        extenders.connect(lab, [('xa', 'xb')], link_rate=args.link_rate,
                          wireguard=args.wireguard)
        wait(lambda: link_up(api, 'xa', 'xb'), 60, 'xa-xb up')
        h1, h2, h3 = lab.hosts[:3]
        a = h1.add_vm('ba', [('ba', '10.66.0.1/24'), ('bc', '10.67.0.1/24')])
        b = h2.add_vm('bb', [('bb', '10.66.0.2/24')])
        c = h3.add_vm('bc3', [('bc3', '10.67.0.2/24')])
        w_in = api.call('POST', '/v1/wires', {'a': 'ba', 'b': 'bb'})
        w_x = api.call('POST', '/v1/wires', {'a': 'bc', 'b': 'bc3'})
        wait(lambda: api.call('GET', '/v1/wires/%d' % w_x['id'])['state']
             == 'extended' and api.call('GET', '/v1/wires/%d' % w_in['id'])[
                 'state'] == 'tunnelled', 30, 'wires')
        wait(lambda: a.ping('10.67.0.2', count=1)[1] == 1, 30, 'ping x')
        wait(lambda: a.ping('10.66.0.2', count=1)[1] == 1, 30, 'ping in')
        xa, xb = lab.host('xa'), lab.host('xb')
        cases = [('in-site GRE wire', a, b, '10.66.0.2'),
                 ('cross-cloud wire', a, c, '10.67.0.2'),
                 ('bare link', Bare(xa), Bare(xb), xb.link_ip),
                 wireguard_tun(xa, xb)] + openvpn(lab)
        # The carrier that must take each case's bytes.
        must = {'cross-cloud wire': 'wireguard', 'bare link': 'wireguard',
                'WireGuard tun': 'wireguard', 'OpenVPN tap 1600': 'openvpn'}
        devs = carriers(xa, xb)
        tput = {name: [] for name, *_ in cases}
        retr = {name: [] for name, *_ in cases}
        cpu = {name: [] for name, *_ in cases}
        took = {name: [] for name, *_ in cases}
        for r in range(args.runs):
            for name, cl, sv, dst in cases:
                before = sent_bytes(xa, devs)
                with CpuWindow() as w:
                    mbit, rt = iperf(cl, sv, dst, args.seconds)
                after = sent_bytes(xa, devs)
                took[name].append({k: after[k] - before[k] for k in devs})
                if name in must:
                    check_carrier(name, must[name], took[name][-1], mbit,
                                  args.seconds)
                tput[name].append(mbit)
                retr[name].append(rt)
                cpu[name].append(w.report())
                print('run %d %-18s %7.1f Mbit/s (%d retransmits); %s'
                      % (r + 1, name, mbit, rt, busiest(cpu[name][-1])),
                      flush=True)
        lat = {'in-site GRE wire': rtts(a, '10.66.0.2', args.pings),
               'cross-cloud wire': rtts(a, '10.67.0.2', args.pings)}
        ups, pings = [], []
        for i in range(args.relinks):
            t_up, t_ping = relink(api, lab, a, '10.67.0.2')
            ups.append(t_up)
            pings.append(t_ping)
            print('relink %d: link up %.2f s, ping across %.2f s'
                  % (i + 1, t_up, t_ping), flush=True)
    base = statistics.median(tput['in-site GRE wire'])
    doc = {
        'runs': args.runs, 'seconds': args.seconds,
        'link_rate': args.link_rate or 'unshaped',
        'wireguard': args.wireguard or 'boringtun-cli',
        'throughput_mbit_s': {k: {'runs': [round(x, 1) for x in v],
                                  'median': round(statistics.median(v), 1),
                                  'retransmits': retr[k]}
                              for k, v in tput.items()},
        'ratio_to_in_site': {k: round(statistics.median(v) / base, 3)
                             for k, v in tput.items()},
        'rtt_ms': {k: summary(v, digits=3) for k, v in lat.items()},
        'added_rtt_ms_p50': round(pct(lat['cross-cloud wire'], 50) -
                                  pct(lat['in-site GRE wire'], 50), 3),
        'link_up_s': summary(ups, digits=3),
        'first_ping_after_link_s': summary(pings, digits=3),
        'anchors': {'paper_extender_mbit_s': 230,
                    'paper_overhead_pct': 25},
    }
    doc['cpu'] = cpu
    doc['carried_bytes'] = took
    doc['own_cores'] = own_cores(tput, cpu)
    write_result(args.result, doc)
    lines = ['throughput (Mbit/s, median of %d x %d s, ratio to the in-site '
             'GRE wire):' % (args.runs, args.seconds)]
    for k, v in doc['throughput_mbit_s'].items():
        lines.append('  %-18s %7.1f  x%.2f  runs %s' % (
            k, v['median'], doc['ratio_to_in_site'][k], v['runs']))
    lines.append('RTT ms p50/p99: in-site %s/%s, cross-cloud %s/%s; added '
                 'p50 %.3f ms' % (
                     doc['rtt_ms']['in-site GRE wire']['p50'],
                     doc['rtt_ms']['in-site GRE wire']['p99'],
                     doc['rtt_ms']['cross-cloud wire']['p50'],
                     doc['rtt_ms']['cross-cloud wire']['p99'],
                     doc['added_rtt_ms_p50']))
    lines.append('link up through two NATs (%d times): p50 %.2f s, max %.2f '
                 's; first ping across p50 %.2f s, max %.2f s' % (
                     len(ups), doc['link_up_s']['p50'],
                     doc['link_up_s']['max'],
                     doc['first_ping_after_link_s']['p50'],
                     doc['first_ping_after_link_s']['max']))
    lines.append('each stage on a core of its own (projected from its '
                 'CPU, Mbit/s, per run; bound by):')
    for k, v in doc['own_cores'].items():
        lines.append('  %-18s %s  %s' % (k, v['mbit_s'], v['bound_by']))
    text = '\n'.join(lines)
    print(text)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'results', 'extender.txt'), 'w') as f:
        f.write(text + '\n')
    print(json.dumps(doc['ratio_to_in_site']))


if __name__ == '__main__':
    main()
