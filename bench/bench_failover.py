"""Failover, side by side with its baseline in one run.

HA: two controller instances on a 3-member RAFT intent cluster over TLS,
two hosts connected to both (vwlab controllers=2). --kills times: a wire
carries a 1 kHz UDP stream across the hosts; 3 s in, kill -9 of the
leader; then time until the other instance has stored and programmed a
new wire on both switches (POST ?wait=programmed, retried until it
answers 201). Per kill: datagrams lost and duplicated (the stream's
sender counts what it sent, so a stream that stopped early shows), the
seconds, the flow changes the new leader sent while taking over (0: a
healthy switch got nothing). The killed instance is restarted as the
standby before the next kill. Then --raft-kills times: the cluster's
RAFT leader killed under the stream: datagrams lost, whether the
controller leader or its term changed, the seconds until a connect is
stored.

Baseline: one controller (its local intent database), killed -9 the same
way and restarted by hand at once, as a deployment without a standby
would be by its supervisor: seconds until it accepts and programs a
connect, datagrams lost.

    python bench/bench_failover.py [--kills 10] [--raft-kills 5]
"""
import argparse
import json
import os
import sys
import tempfile
import threading
import time

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import note_hub, summary, write_result                     # noqa: E402

from vwlab import Lab                                          # noqa: E402

STREAM_S = 12.0
KILL_AT = 3.0


class Rest:
    def __init__(self, lab):
        self.lab = lab
        with open(lab.token_file) as f:
            self.h = {'Authorization': 'Bearer ' + f.read().strip()}

    def req(self, k, method, path, body=None, timeout=15):
        return requests.request(method, self.lab.url_of(k) + path, json=body,
                                headers=self.h, timeout=timeout,
                                verify=self.lab.verify, allow_redirects=False)

    def status(self, k):
        try:
            r = self.req(k, 'GET', '/v1/status', timeout=5)
            return r.json() if r.status_code == 200 else None
        except requests.RequestException:
            return None

    def synced(self, k):
        try:
            hosts = self.req(k, 'GET', '/v1/hosts', timeout=5).json()['hosts']
        except (requests.RequestException, ValueError, KeyError):
            return False
        return len(hosts) == len(self.lab.hosts) and all(
            h['connected'] and h['synced'] for h in hosts)

    def leader(self):
        act = [k for k in self.lab.instances
               if (self.status(k) or {}).get('role', {}).get('active')]
        return act[0] if len(act) == 1 else None


def wait(fn, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = fn()
        if v:
            return v
        time.sleep(0.05)
    raise RuntimeError('timed out waiting for ' + what)


def stream(src, dst, dst_ip, out, seconds=STREAM_S, port=6100):
    ready = tempfile.mktemp(prefix='vwready')
    rx = dst.tool_bg('udp-recv', '--port', port, '--seconds', seconds + 1.5,
                     '--ready-file', ready)
    wait(lambda: os.path.exists(ready), 10, 'udp receiver')
    os.unlink(ready)
    out['started'] = time.monotonic()
    sent = src.tool('udp-send', '--dst', dst_ip, '--port', port, '--rate',
                    1000, '--seconds', seconds)
    out['ended'] = time.monotonic()
    got, _ = rx.communicate(timeout=seconds + 30)
    out.update(sent=sent['sent'], got=json.loads(got.strip().splitlines()[-1]))


def connect_until_programmed(rest, k, a, b, timeout=60):
    """Seconds until instance k stored a-b and both switches hold it."""
    t0 = time.monotonic()

    def attempt():
        try:
            r = rest.req(k, 'POST', '/v1/wires?wait=programmed&timeout=10',
                         {'a': a, 'b': b})
        except requests.RequestException:
            return None
        return r if r.status_code == 201 else None
    r = wait(attempt, timeout, 'a connect on instance %d' % k)
    return time.monotonic() - t0, r.json()['id']


def wire_flows(lab, wid):
    """Flows of wire `wid` on every host now (its cookie's low 32 bits)."""
    n = 0
    for h in lab.hosts:
        for line in h.dump_flows().splitlines():
            if 'cookie=' in line and int(line.split('cookie=')[1].split(
                    ',')[0], 16) & 0xFFFFFFFF == wid:
                n += 1
    return n


def vms(lab):
    h1, h2 = lab.hosts
    va = h1.add_vm('fa', [('fa-nic', '192.0.2.1/24')])
    vb = h2.add_vm('fb', [('fb-nic', '192.0.2.2/24')])
    h1.add_vm('fc', [('fc-nic', '192.0.2.3/24')])
    h2.add_vm('fd', [('fd-nic', '192.0.2.4/24')])
    return va, vb


def one_kill(rest, lab, va, vb, kill, recover):
    """Stream, kill at KILL_AT, recover() -> (instance to ask, its
    flow_mods before); returns the figures of this kill."""
    out = {}
    t = threading.Thread(target=stream, args=(va, vb, '192.0.2.2', out))
    t.start()
    wait(lambda: 'started' in out, 20, 'the stream')
    time.sleep(KILL_AT)
    killed = time.monotonic()
    k, mods_before = kill()
    took, wid = connect_until_programmed(rest, k, 'fc-nic', 'fd-nic')
    st = rest.status(k)
    t.join(STREAM_S + 60)
    lost = out['sent'] - out['got']['received']
    fig = {'connect_programmed_s': round(took, 3),
           'lost': lost, 'duplicates': out['got']['duplicates'],
           'sent': out['sent'],
           # The sender was sending across the whole outage it judges.
           'stream_covered_s': round(out['ended'] - killed, 3) > took,
           # What it sent besides the new wire's own flows.
           'takeover_flow_mods': (st['counters']['flow_mods'] - mods_before -
                                  wire_flows(lab, wid))
           if mods_before is not None else None}
    rest.req(k, 'DELETE', '/v1/wires/%d' % wid)
    recover()
    return fig


def ha_run(n_kills, n_raft):
    with Lab(2, controllers=2) as lab:
        lab.start_controllers()
        rest = Rest(lab)
        wait(lambda: rest.leader() is not None and all(
            rest.synced(k) for k in (0, 1)), 90, 'two synced instances')
        for k in (0, 1):
            note_hub(lab.url_of(k), rest.h, lab.verify)
        va, vb = vms(lab)
        lead = rest.leader()
        rest.req(lead, 'POST', '/v1/wires?wait=programmed',
                 {'a': 'fa-nic', 'b': 'fb-nic'})
        wait(lambda: va.ping('192.0.2.2', count=1)[1] == 1, 20, 'ping')
        kills = []
        for i in range(n_kills):
            lead = rest.leader()
            other = 1 - lead
            mods = rest.status(other)['counters']['flow_mods']

            def kill():
                lab.instances[lead].kill()
                return other, mods

            def recover():
                lab.instances[lead].wait(10)
                lab.start_controller(instance=lead)
                wait(lambda: rest.synced(lead) and rest.leader() == other,
                     90, 'the old leader back as standby')
            kills.append(one_kill(rest, lab, va, vb, kill, recover))
            print('kill %d/%d: %s' % (i + 1, n_kills, kills[-1]), flush=True)
        rafts = []
        for i in range(n_raft):
            lead = rest.leader()
            term = rest.status(lead)['role']['term']
            cluster = lab.intent_cluster
            victim = []

            def kill():
                victim.append(cluster.leader())
                cluster.kill(victim[0])
                return lead, rest.status(lead)['counters']['flow_mods']

            def recover():
                cluster.start_member(victim[0])
                wait(lambda: cluster.role(victim[0]) == 'follower', 60,
                     'the member back')
            fig = one_kill(rest, lab, va, vb, kill, recover)
            fig.pop('takeover_flow_mods')
            fig['leader_kept'] = rest.leader() == lead
            fig['term_kept'] = rest.status(lead)['role']['term'] == term
            rafts.append(fig)
            print('raft kill %d/%d: %s' % (i + 1, n_raft, fig), flush=True)
        return kills, rafts


def baseline_run(n_kills):
    with Lab(2) as lab:
        lab.start_controller()
        rest = Rest(lab)
        wait(lambda: rest.synced(0), 90, 'the controller synced')
        note_hub(lab.url_of(0), rest.h, lab.verify)
        va, vb = vms(lab)
        rest.req(0, 'POST', '/v1/wires?wait=programmed',
                 {'a': 'fa-nic', 'b': 'fb-nic'})
        wait(lambda: va.ping('192.0.2.2', count=1)[1] == 1, 20, 'ping')
        out = []
        for i in range(n_kills):
            def kill():
                lab.controller.kill()
                lab.controller.wait(10)
                lab.start_controller()
                return 0, None
            fig = one_kill(rest, lab, va, vb, kill, lambda: None)
            out.append(fig)
            print('baseline kill %d/%d: %s' % (i + 1, n_kills, fig),
                  flush=True)
        return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--kills', type=int, default=10)
    p.add_argument('--raft-kills', type=int, default=5)
    p.add_argument('--result', default='failover',
                   help='result name under bench/results (default: '
                        '%(default)s)')
    args = p.parse_args()
    kills, rafts = ha_run(args.kills, args.raft_kills)
    base = baseline_run(args.kills)

    def figs(rows):
        return {'connect_programmed_s': summary(
                    [r['connect_programmed_s'] for r in rows], digits=3),
                'lost': summary([r['lost'] for r in rows], digits=0),
                'duplicates': sum(r['duplicates'] for r in rows),
                'all_streams_covered': all(r['stream_covered_s']
                                           for r in rows)}
    doc = {'ha_leader_kill': dict(figs(kills), takeover_flow_mods=[
               r['takeover_flow_mods'] for r in kills]),
           'raft_member_kill': dict(figs(rafts), leader_kept=all(
               r['leader_kept'] for r in rafts), term_kept=all(
               r['term_kept'] for r in rafts)) if rafts else None,
           'baseline_restart': figs(base),
           'ratio_connect_p50_baseline_over_ha': round(
               figs(base)['connect_programmed_s']['p50'] /
               max(figs(kills)['connect_programmed_s']['p50'], 1e-6), 1),
           'runs': {'ha': kills, 'raft': rafts, 'baseline': base}}
    print(json.dumps({k: v for k, v in doc.items() if k != 'runs'},
                     indent=2))
    write_result(args.result, doc)


if __name__ == '__main__':
    main()
