"""Loss figures that never cry wolf, on real OVS: TCP bursts and a
1 Gbit/s UDP flood over a tunnelled wire, read every 0.3 s in REST and
/metrics (and at the end by `vwctl stats`, `vwctl top` and the dashboard
in a browser). Lost beyond doubt is never above what the wire lost (its
entered minus delivered once quiet), and once quiet equals it. A known
drop on the underlay and a live migration: test_metrics.py."""
import json
import re
import subprocess
import sys
import time

from vwtest.loss_watch import DIRS, LossWatch, check_against, quiet, truth
from vwlab.browser import Browser

MIB16 = 16 * 1024 * 1024


def iperf(client, server, dst, *args, timeout=60):
    srv = subprocess.Popen(['ip', 'netns', 'exec', server.ns, 'iperf3',
                            '-s', '-1'], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        p = subprocess.run(['ip', 'netns', 'exec', client.ns, 'iperf3',
                            '-c', dst, '-J'] + list(args),
                           capture_output=True, text=True, timeout=timeout)
        doc = json.loads(p.stdout)
        assert 'error' not in doc, doc['error']
        return doc['end']
    finally:
        srv.kill()
        srv.wait()


def vwctl(lab, *args):
    r = subprocess.run([sys.executable, '-m', 'virtualwire.cli', '--config',
                        lab.vwctl_config] + list(args),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def lossy_wires(b):
    """Wires the dashboard draws as lossy, in its table or its picture."""
    return [e.get_attribute('data-wire') or e.text
            for e in b.all('#wires tr td.lossy') +
            b.all('#topology .wire-label.lossy')]


def test_tcp_bursts_show_no_loss_that_did_not_happen(lab, api, pair):
    va, vb, w = pair('h1', 'h2')
    base = quiet(api, w['id'])
    spans = []
    with Browser(trust_cert=lab.pki.files('controller')[1]) as b:
        with open(lab.credential('reader', 'loss-noc')) as f:
            b.open(lab.url + '/')
            b.sign_in(f.read().strip())
        b.wait(lambda: b.all('#wires tr[data-wire="%s"]'
                             % w['connector_id']), 15, what='the wire shown')
        drawn = []
        with LossWatch(api, w['id'], w['connector_id']) as watch:
            for _ in range(3):
                t0 = time.time()
                end = iperf(va, vb, '192.0.2.2', '-n', str(MIB16))
                spans.append((t0, time.time()))
                assert end['sum_sent']['bytes'] >= MIB16
            # What `scripts/demo` showed red for ~10 s after its burst.
            stop = time.time() + 8
            while time.time() < stop:
                drawn.append(lossy_wires(b))
                time.sleep(0.3)
    end = quiet(api, w['id'])
    check_against(watch, end)
    # The reads saw the bursts: each had reads inside it, the count rose
    # while they read, and the wire carried all three.
    for t0, t1 in spans:
        assert any(t0 <= t <= t1 for t, _s, _m in watch.samples), spans
    risen = watch.entered_while('a_to_b', spans[0][0], spans[-1][1] + 8)
    assert risen > 10000, risen
    # 16 MiB is 11,586 full segments; iperf3 -n ends its stream when the
    # bytes are written, and 29,866-31,998 frames crossed for three.
    carried = end['a_to_b']['entered_packets'] - \
        base['a_to_b']['entered_packets']
    assert carried >= 3 * 8000, carried
    assert watch.failures == 0
    # The raw difference the old figure called lost did open up in reads.
    unsettled = max(st['a_to_b']['unsettled_packets'] + st['b_to_a'][
        'unsettled_packets'] for _t, st, _m in watch.samples)
    print('tcp bursts: lost %s, max unsettled seen %d, reads %d' % (
        {d: truth(end, d) - truth(base, d) for d in DIRS}, unsettled,
        len(watch.samples)))
    # Red only for frames the wire really lost. The bursts lose none, but
    # a wire can lose a frame at set-up (a flow replaced while the first
    # ARP crossed): CI once drew that one, judged during the bursts.
    lost_life = sum(truth(end, d) for d in DIRS)
    shown = [int(m.group(1)) for x in drawn for text in x
             for m in [re.match(r'^(\d+)( \(\+\d+ unsettled\))?$', text)]
             if m]
    assert all(n <= lost_life for n in shown), (shown, lost_life)
    if lost_life == 0:
        assert not [x for x in drawn if w['connector_id'] in ' '.join(x)], \
            drawn
    out = vwctl(lab, 'stats', str(w['id']))
    assert 'lost %d' % end['a_to_b']['lost_packets'] in out, out
    top = json.loads(vwctl(lab, '--json', 'top', '--once'))
    row = next(x for x in top['wires'] if x['id'] == w['id'])
    assert all(row[d]['window']['surely_lost_packets'] <= truth(end, d)
               for d in DIRS), row


def test_a_gigabit_udp_flood_shows_no_loss_that_did_not_happen(lab, api,
                                                               pair):
    va, vb, w = pair('h2', 'h3')
    with LossWatch(api, w['id'], w['connector_id']) as watch:
        t0 = time.time()
        end = iperf(va, vb, '192.0.2.2', '-u', '-b', '1G', '-l', '1400',
                    '-t', '3')
        t1 = time.time()
        time.sleep(4)
    st = quiet(api, w['id'])
    check_against(watch, st)
    risen = watch.entered_while('a_to_b', t0, t1 + 4)
    sent = end['sum']['packets']
    print('udp flood: %d datagrams sent (%.0f Mbit/s asked 1000), %d '
          'entered the wire, %d lost by its counts, the receiver missed '
          '%d' % (sent, end['sum']['bits_per_second'] / 1e6, risen,
                  truth(st, 'a_to_b'), end['sum']['lost_packets']))
    assert risen >= 0.5 * sent or risen > 20000, (risen, sent)
