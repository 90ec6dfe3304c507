"""TCP throughput across a wire, against hand-made flows on the same switches.

Two namespace hosts (netdev OVS, 1600-byte underlay), 1500-byte guests,
iperf3 for --seconds, --runs runs per case, in one lab:

  port-to-port (hand)   two vNICs on h1 joined by ovs-ofctl flows: the
                        datapath's floor, no encapsulation
  collapsed wire        the same two vNICs joined by POST /v1/wires
  GRE (hand)            a on h1, b on h2: the wire's flows (same pure
                        function) installed by ovs-ofctl
  GRE wire              the same, by POST /v1/wires
  Geneve+TLV (hand)     the other carrier: the hosts' GRE port replaced by a
                        Geneve one (vw-host-setup --carrier geneve), the
                        32-bit id in a TLV option (tun_metadata0) that the
                        controller mapped; flows by ovs-ofctl
  Geneve wire           the same, by POST /v1/wires

    python bench/bench_throughput.py [--runs 3] [--seconds 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_latency import hosts_from_api, wait            # noqa: E402
from common import Api, ofctl_flow, write_result          # noqa: E402

from virtualwire.pipeline import wire as fl                       # noqa: E402
from vwlab import Lab                           # noqa: E402
from virtualwire.core.model import Wire                 # noqa: E402
from virtualwire.core.world import World                 # noqa: E402

CID = 0xC0FFEE01            # the hand cases' connector id (full 32 bits)
HAND_COOKIE = 0x1
GENEVE_OFPORT = 65002      # vw-host-setup --carrier geneve


def iperf(client, server, dst, seconds):
    srv = subprocess.Popen(['ip', 'netns', 'exec', server.ns, 'iperf3', '-s',
                            '-1'], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        p = subprocess.run(['ip', 'netns', 'exec', client.ns, 'iperf3', '-c',
                            dst, '-t', str(seconds), '-J'],
                           capture_output=True, text=True,
                           timeout=seconds + 30)
        doc = json.loads(p.stdout)
        if 'error' in doc:
            raise RuntimeError('iperf3: %s' % doc['error'])
        end = doc['end']
        return (end['sum_received']['bits_per_second'] / 1e6,
                end['sum_sent'].get('retransmits', 0))
    finally:
        srv.kill()
        srv.wait()


def add_flows(host, lines):
    path = tempfile.mktemp(prefix='vwtp')
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    subprocess.run(['ovs-ofctl', '-O', 'OpenFlow14', '--bundle', 'add-flows',
                    'unix:%s/br-int.mgmt' % host.dir, path], check=True)
    os.unlink(path)


def del_hand(lab):
    for h in lab.hosts:
        h.ofctl('del-flows', 'cookie=%#x/-1' % HAND_COOKIE)


def hand_packets(lab):
    out = 0
    for h in lab.hosts:
        text = h.ofctl('dump-flows', 'cookie=%#x/-1' % HAND_COOKIE)
        out += sum(int(x.split('=')[1].rstrip(','))
                   for x in text.split() if x.startswith('n_packets='))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--seconds', type=int, default=5)
    args = ap.parse_args()
    with Lab(2) as lab:
        h1, h2 = lab.hosts
        lab.start_controller()
        api = Api(lab)
        a = h1.add_vm('tp-a', [('tp-a', '10.77.0.1/24')])
        b = h2.add_vm('tp-b', [('tp-b', '10.77.0.2/24')])
        c = h1.add_vm('tp-c', [('tp-c', '10.77.0.2/24')])   # b's stand-in
        api.wait_hosts(2)
        wait(lambda: len(api.call('GET', '/v1/vnics')['vnics']) == 3, 30,
             'vNICs seen')
        hosts = hosts_from_api(api)
        port = {v.vnic_id: v.ofport for h in hosts.values() for v in h.vnics}

        def to_geneve():
            # As vw-host-setup --carrier geneve does it; the controller
            # maps the option when it next programs a flow that uses it.
            for h in (h1, h2):
                h.bootstrap(['--carrier', 'geneve'])
            wait(lambda: all(e['type'] == 'geneve' for h in api.call(
                'GET', '/v1/hosts')['hosts'] for e in h['encaps']), 30,
                'hosts offering Geneve only')

        def gre_hand():
            world = World({CID: Wire(CID, 'tp-a', 'tp-b')}, hosts)
            for name, table in fl.compute_flows(world).items():
                add_flows(lab.host(name), [
                    ofctl_flow(f).replace('cookie=%#x' % f.cookie,
                                          'cookie=%#x' % HAND_COOKIE)
                    for f in table if f.cookie != 0])

        def geneve_hand():
            for (src, sv), (dst, dv) in (((h1, 'tp-a'), (h2, 'tp-b')),
                                         ((h2, 'tp-b'), (h1, 'tp-a'))):
                add_flows(src, [
                    'priority=100,cookie=%#x,in_port=%d actions='
                    'set_field:%#x->tun_metadata0,set_field:%s->tun_dst,'
                    'output:%d' % (HAND_COOKIE, port[sv], CID, dst.tunnel_ip,
                                   GENEVE_OFPORT)])
                add_flows(dst, [
                    'priority=100,cookie=%#x,in_port=%d,tun_src=%s,'
                    'tun_metadata0=%#x actions=output:%d' % (
                        HAND_COOKIE, GENEVE_OFPORT, src.tunnel_ip, CID,
                        port[dv])])

        def p2p_hand():
            add_flows(h1, ['priority=100,cookie=%#x,in_port=%d actions=output:'
                           '%d' % (HAND_COOKIE, port[x], port[y])
                           for x, y in (('tp-a', 'tp-c'), ('tp-c', 'tp-a'))])

        def ours(peer):
            def make():
                wid = api.call('POST', '/v1/wires', {'a': 'tp-a',
                                                     'b': peer})['id']
                wait(lambda: api.call('GET', '/v1/wires/%d' % wid)['state']
                     in ('tunnelled', 'collapsed'), 10, 'wire up')
                return wid
            return make

        cases = [('port-to-port (hand)', p2p_hand, c),
                 ('collapsed wire', ours('tp-c'), c),
                 ('GRE (hand)', gre_hand, b),
                 ('GRE wire', ours('tp-b'), b),
                 (None, to_geneve, None),
                 ('Geneve wire', ours('tp-b'), b),
                 ('Geneve+TLV (hand)', geneve_hand, b)]
        results = {}
        for name, make, server in cases:
            if name is None:
                make()
                continue
            a.sh(['ip', 'neigh', 'flush', 'all'])
            before = hand_packets(lab)
            wid = make()
            time.sleep(1.0)        # flows in, first-packet upcalls done
            runs = []
            for r in range(args.runs):
                mbit, retr = iperf(a, server, '10.77.0.2', args.seconds)
                runs.append(mbit)
                print('%-22s run %d: %7.1f Mbit/s (%d retransmits)'
                      % (name, r + 1, mbit, retr), flush=True)
            if '(hand)' in name:
                # Proof the hand flows (not something else) carried it.
                assert hand_packets(lab) - before > 1000, name
                del_hand(lab)
            else:
                api.call('DELETE', '/v1/wires/%d' % wid)
            time.sleep(0.5)
            results[name] = {'runs_mbit_s': [round(x, 1) for x in runs],
                             'min': round(min(runs), 1),
                             'median': round(statistics.median(runs), 1),
                             'max': round(max(runs), 1)}
        med = {k: v['median'] for k, v in results.items()}
        ratios = {
            'collapsed_wire_vs_port_to_port':
                round(med['collapsed wire'] / med['port-to-port (hand)'], 2),
            'gre_wire_vs_gre_hand':
                round(med['GRE wire'] / med['GRE (hand)'], 2),
            'gre_wire_vs_port_to_port':
                round(med['GRE wire'] / med['port-to-port (hand)'], 2),
            'geneve_hand_vs_gre_hand':
                round(med['Geneve+TLV (hand)'] / med['GRE (hand)'], 2),
            'geneve_wire_vs_geneve_hand':
                round(med['Geneve wire'] / med['Geneve+TLV (hand)'], 2),
            'geneve_wire_vs_gre_wire':
                round(med['Geneve wire'] / med['GRE wire'], 2),
        }
        print('\n%-22s %8s %8s %8s  (Mbit/s, %d runs x %ds)' % (
            'case', 'min', 'median', 'max', args.runs, args.seconds))
        for k, v in results.items():
            print('%-22s %8.1f %8.1f %8.1f' % (k, v['min'], v['median'],
                                               v['max']))
        for k, v in ratios.items():
            print('%-34s %.2f' % (k, v))
        write_result('throughput', {'runs': args.runs,
                                    'seconds': args.seconds,
                                    'cases': results, 'ratios': ratios})


if __name__ == '__main__':
    main()
