"""Extender link bring-up with the keys delivered over HTTPS (the
controller CA pinned, the default) against plain HTTP
(--insecure-plaintext-lab), side by side in one run: the same two-cloud
lab built three times, TLS, plain, TLS (so drift shows as a TLS-TLS
spread), each timing --relinks bring-ups of the xa-xb link through two
NATs as bench_extender does: DELETE the link, wait until both agents
dropped it, POST it again; time until the controller sees it up on both
sides (each agent has reported, been handed the peer's key and endpoint,
and completed a WireGuard handshake) and until a ping crosses a wire
over it.

    python bench/bench_extender_tls.py [--relinks 20]
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_extender import link_up, relink, wait              # noqa: E402
from common import Api, summary, write_result                # noqa: E402

from vwlab import Lab, extenders                              # noqa: E402


def bring_ups(tls, n):
    """[(link up s, first ping s)] of n relinks, and the agents' reports
    the controller took meanwhile (to show the key path was exercised)."""
    with Lab(3, sites=['cloud-a', 'cloud-a', 'cloud-b'],
             extenders='xa:cloud-a:nat,xb:cloud-b:nat', tls=tls) as lab:
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(5)
        extenders.connect(lab, [('xa', 'xb')], link_rate='')
        wait(lambda: link_up(api, 'xa', 'xb'), 60, 'xa-xb up')
        h1, _h2, h3 = lab.hosts[:3]
        a = h1.add_vm('ta', [('ta', '10.68.0.1/24')])
        h3.add_vm('tc', [('tc', '10.68.0.2/24')])
        w = api.call('POST', '/v1/wires', {'a': 'ta', 'b': 'tc'})
        wait(lambda: api.call('GET', '/v1/wires/%d' % w['id'])['state']
             == 'extended', 30, 'wire extended')
        wait(lambda: a.ping('10.68.0.2', count=1)[1] == 1, 30, 'ping')
        scheme = lab.scheme
        out = []
        for i in range(n):
            out.append(relink(api, lab, a, '10.68.0.2'))
            print('  %s relink %d: link up %.2f s, ping %.2f s'
                  % ('TLS' if tls else 'plain', i + 1, *out[-1]), flush=True)
        return out, scheme


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--relinks', type=int, default=20)
    args = ap.parse_args()
    runs = []
    for tls in (True, False, True):
        times, scheme = bring_ups(tls, args.relinks)
        runs.append({'mode': 'tls' if tls else 'plain',
                     'agents_reach_the_controller_over': scheme,
                     'link_up_s': summary([t for t, _ in times], digits=3),
                     'first_ping_s': summary([p for _, p in times],
                                             digits=3)})
    med = {m: statistics.median(r['link_up_s']['p50'] for r in runs
                                if r['mode'] == m) for m in ('tls', 'plain')}
    doc = {'relinks': args.relinks, 'runs': runs,
           'ratio_link_up_p50_tls_to_plain': round(med['tls'] /
                                                   med['plain'], 3)}
    for r in runs:
        print('%-6s link up p50 %.2f s max %.2f s; first ping p50 %.2f s '
              '(%s)' % (r['mode'], r['link_up_s']['p50'],
                        r['link_up_s']['max'], r['first_ping_s']['p50'],
                        r['agents_reach_the_controller_over']))
    print('link up p50 TLS/plain: %.3fx'
          % doc['ratio_link_up_p50_tls_to_plain'])
    write_result('extender_tls', doc)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'results', 'extender_tls.txt'), 'w') as f:
        for r in runs:
            f.write('%s: link up p50 %.2f max %.2f s, first ping p50 %.2f '
                    's\n' % (r['mode'], r['link_up_s']['p50'],
                             r['link_up_s']['max'], r['first_ping_s']['p50']))
        f.write('ratio TLS/plain link up p50: %.3f\n'
                % doc['ratio_link_up_p50_tls_to_plain'])


if __name__ == '__main__':
    main()
