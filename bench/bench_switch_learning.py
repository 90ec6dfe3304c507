"""How a provider switch should learn MACs (issue 41): with OVS's learn
action in its own flows (what `pipeline.switch` computes), or with a
controller that learns from packet-ins (`learning_app.py`: the way Ryu's
simple_switch_13 and Faucet learn). Both side by side in one run, on one
lab host's Open vSwitch (netdev datapath), each on a bridge of its own
with two stand-in VMs:

1. a burst of new MACs: VM1 sends N broadcast frames, each from a source
   MAC never seen; how long until the switch has learned them all, and
   how many of the frames VM2 received (a switch must flood them);
2. the first ping through an empty table: both VMs' ARP caches and the
   switch's learned MACs flushed, `ping -c 1` VM1 -> VM2 (ARP both ways,
   then the echo), R rounds; the second ping after each, for the
   steady state.

    PYTHONPATH=controller:lab .venv/bin/python bench/bench_switch_learning.py \\
        [--macs 1000] [--rounds 20] [--name switch-learning]

Writes bench/results/NAME.json (the commit and the command).
"""
import argparse
import os
import re
import subprocess
import sys
import time

from scapy.all import Ether, Raw

from common import summary, write_result
from switch_trace import as_text
from vwlab import Lab
from virtualwire.core.model import Encap, Host, Location, Wire
from virtualwire.core.switches import ProviderSwitch
from virtualwire.pipeline import wire as fl
from virtualwire.pipeline.switch import switch_flows
from virtualwire.pipeline.tables import SWITCH_MAC

HERE = os.path.dirname(os.path.abspath(__file__))
APP_PORT = 6699
RTT = re.compile(r'time=([0-9.]+) ms')


def bridge(h, name, vms_tag):
    h.vsctl('add-br', name, '--', 'set', 'bridge', name,
            'datapath_type=netdev', 'fail_mode=secure',
            'protocols=OpenFlow14')
    vms, ofports = [], []
    for i in (1, 2):
        vm = h.add_vm('%s%d' % (vms_tag, i), [
            ('%s%d-nic' % (vms_tag, i), '10.88.0.%d/24' % i)], bridge=name,
            place=False)
        port = vm.nics['%s%d-nic' % (vms_tag, i)]['port']
        ofports.append(int(h.vsctl('get', 'interface', port,
                                   'ofport').strip()))
        vms.append(vm)
    return vms, ofports


def ovs_learn(h, lab_dir):
    """VMs on br-learn joined by the switch's own flows, as computed."""
    vms, ofports = bridge(h, 'br-learn', 'ol')
    sw = ProviderSwitch('bench', 't', 1, h.name, ('p1', 'p2'))
    hosts = {h.name: Host(h.name, 1,
                          encaps=(Encap('gre', '198.19.0.1', 65000),))}
    flows = set(switch_flows(sw))
    for i, ofport in enumerate(ofports, 1):
        end = sw.end('p%d' % i)
        locs = {'v%d' % i: Location(h.name, ofport),
                end: Location(h.name, i, 'switchport', switch=1)}
        for fs in fl.wire_flows(Wire(100 + i, 'v%d' % i, end), hosts,
                                locs).values():
            flows |= fs
    path = os.path.join(lab_dir, 'learn-flows.txt')
    as_text(flows, path)
    h.ofctl('add-flows', path, bridge='br-learn')
    return {'name': 'ovs-learn', 'vms': vms, 'bridge': 'br-learn',
            'learned': lambda: _count(h, 'br-learn', 'table=%d'
                                      % SWITCH_MAC.id),
            'flush': lambda: h.ofctl('del-flows', 'table=%d'
                                     % SWITCH_MAC.id, bridge='br-learn')}


def controller_learn(h):
    """VMs on br-ctl, learned by the os-ken app on this host."""
    vms, _ = bridge(h, 'br-ctl', 'cl')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [HERE] + os.environ.get('PYTHONPATH', '').split(os.pathsep)))
    app = subprocess.Popen(
        ['ip', 'netns', 'exec', h.ns, sys.executable, '-c',
         'from os_ken import cfg; from os_ken.base.app_manager import '
         'AppManager; from os_ken.lib import hub; '
         "cfg.CONF(args=['--ofp-tcp-listen-port', '%d', "
         "'--ofp-listen-host', '127.0.0.1'], project='os_ken'); "
         'm = AppManager.get_instance(); '
         "m.load_apps(['os_ken.controller.ofp_handler', 'learning_app']); "
         'hub.joinall(m.instantiate_apps(**m.create_contexts()))'
         % APP_PORT], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    h.vsctl('set-controller', 'br-ctl', 'tcp:127.0.0.1:%d' % APP_PORT)
    end = time.time() + 30
    ctl = h.vsctl('get', 'bridge', 'br-ctl', 'controller').strip('[] \n')
    while h.vsctl('get', 'controller', ctl, 'is_connected').strip() != \
            'true':
        if time.time() > end or app.poll() is not None:
            raise RuntimeError('the learning app did not connect')
        time.sleep(0.2)
    return {'name': 'controller', 'vms': vms, 'bridge': 'br-ctl',
            'app': app,
            'learned': lambda: _count(h, 'br-ctl', 'cookie=0x1ea2/-1,table=1'),
            'flush': lambda: h.ofctl('del-flows', 'cookie=0x1ea2/-1',
                                     bridge='br-ctl')}


def _count(h, br, spec):
    """Flows learned for the burst's MACs (02:be:...), nobody else's."""
    out = h.ofctl('dump-flows', spec, bridge=br)
    return sum(1 for line in out.splitlines() if 'dl_dst=02:be:' in line)


def burst(mode, n):
    """N frames from N new source MACs: seconds until all learned, and
    frames VM2 got."""
    v1, v2 = mode['vms']
    mode['flush']()
    frames = [bytes(Ether(dst='ff:ff:ff:ff:ff:ff',
                          src='02:be:%02x:%02x:%02x:01' % (
                              i >> 16 & 255, i >> 8 & 255, i & 255),
                          type=0x88b5) / Raw(b'new mac %d' % i))
              for i in range(n)]
    sniff = v2.tool_bg('frames-sniff', 'eth0', '--seconds', 60)
    time.sleep(1.0)
    t0 = time.time()
    v1.tool('frames-send', 'eth0', *[f.hex() for f in frames])
    learned_at, count = None, 0
    while time.time() - t0 < 30:
        count = mode['learned']()
        if count >= n:
            learned_at = time.time() - t0
            break
        time.sleep(0.05)
    time.sleep(1.0)
    sniff.terminate()
    out, _ = sniff.communicate(timeout=20)
    want = {f.hex() for f in frames}
    got = sum(1 for line in out.splitlines() if '"hex"' in line and
              line.split('"hex": "')[1].split('"')[0] in want)
    return {'macs': n, 'learned': count, 'all_learned_s': learned_at,
            'delivered': got}


def first_pings(mode, rounds):
    v1, v2 = mode['vms']
    first, steady, lost = [], [], 0
    for _ in range(rounds):
        for vm in (v1, v2):
            vm.sh(['ip', 'neigh', 'flush', 'all'])
        mode['flush']()
        time.sleep(0.2)
        for bucket in (first, steady):
            p = v1.sh(['ping', '-n', '-c', '1', '-W', '3', '10.88.0.2'],
                      check=False)
            m = RTT.search(p)
            if m:
                bucket.append(float(m.group(1)))
            else:
                lost += 1
    return {'first_ms': summary(first) if first else None,
            'steady_ms': summary(steady) if steady else None,
            'lost': lost}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--macs', type=int, default=1000)
    ap.add_argument('--rounds', type=int, default=20)
    ap.add_argument('--name', default='switch-learning',
                    help='the results file: bench/results/NAME.json')
    a = ap.parse_args()
    out = {}
    with Lab(1, collector=False) as lab:
        h = lab.hosts[0]
        modes = [ovs_learn(h, lab.dir), controller_learn(h)]
        try:
            for mode in modes:
                res = {'burst': burst(mode, a.macs),
                       'pings': first_pings(mode, a.rounds)}
                out[mode['name']] = res
                print(mode['name'], res)
        finally:
            for mode in modes:
                if 'app' in mode:
                    mode['app'].terminate()
    ol, cl = out['ovs-learn'], out['controller']
    ratios = {}
    if ol['burst']['all_learned_s'] and cl['burst']['all_learned_s']:
        ratios['learn_time_controller_over_ovs'] = round(
            cl['burst']['all_learned_s'] / ol['burst']['all_learned_s'], 2)
    if ol['pings']['first_ms'] and cl['pings']['first_ms']:
        ratios['first_ping_p50_controller_over_ovs'] = round(
            cl['pings']['first_ms']['p50'] / ol['pings']['first_ms']['p50'],
            2)
    write_result(a.name, {'modes': out, 'ratios': ratios,
                                     'macs': a.macs, 'rounds': a.rounds})
    print(ratios)


if __name__ == '__main__':
    main()
