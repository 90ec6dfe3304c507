"""Per-wire figures on the real thing: a real Prometheus scraping the
controller, counters that never go back through a live migration and a
controller restart, and loss that says exactly what the underlay dropped.
Uses the session lab (3 hosts, libvirt); the controller reads flow
counters every second (the lab's --stats-interval)."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import requests

from vwtest import wait_until
from vwtest.loss_watch import DIRS, LossWatch
from vwlab.drops import UnderlayDrop
from vwlab.prometheus import Prometheus
from vwtest.wire_traffic import udp_stream

COUNTERS = ('entered_packets', 'entered_bytes', 'delivered_packets',
            'delivered_bytes')


def settled(api, wid, cycles=3):
    """The wire's stats once the collector has read everything sent so
    far: two more cycles after traffic stopped."""
    time.sleep(cycles * 1.0 + 0.5)
    return api.ok('GET', '/v1/wires/%d/stats' % wid)


def test_prometheus_rate_of_a_wire_matches_what_was_sent(lab, api, pair,
                                                         streams, tmp_path):
    va, vb, w = pair('h1', 'h2')
    rate = 400
    # Prometheus needs only to read: a reader credential, not the
    # operator's token.
    reader = lab.credential('reader', 'prometheus')
    with Prometheus(lab, tmp_path / 'prom', token_file=reader) as prom:
        stream = streams(va, vb, '192.0.2.2', 6100, rate=rate)
        time.sleep(22)
        assert prom.target_health() == [('up', '')], prom.target_health()
        q = ('rate(virtualwire_wire_entered_packets_total{wire="%s",'
             'direction="a_to_b"}[15s])' % w['connector_id'])
        [(_labels, measured)] = prom.query(q)
        info = prom.query('virtualwire_wire_info{wire="%s"}'
                          % w['connector_id'])
        sent, got, missing, dups = stream.stop()
    assert (got, missing, dups) == (sent, 0, 0), (sent, got, missing, dups)
    # The collector reads every 1 s and Prometheus scrapes every 1 s: over
    # 15 s, rate() can be off by one reading step (1/14) plus its
    # extrapolation at the window's edges: 15 % is stated, not tuned.
    assert abs(measured - rate) <= 0.15 * rate, (measured, rate)
    assert info[0][0]['state'] == 'tunnelled'
    assert {info[0][0]['end_a'], info[0][0]['end_b']} == {
        w['a'], w['b']}


def quiet(api, wid):
    """A settled reading that no frame straddles: the collector reads the
    two ends' switches one after the other, so a guest's odd background
    frame (IPv6 ND, MLD) can count as entered and not yet as delivered, or
    the other way round (lost +1 or -1: CI saw both). The baseline is a
    reading that the next one repeats exactly (nothing in flight)."""
    last = []

    def still():
        s = settled(api, wid)
        counts = [(s[d]['entered_packets'], s[d]['delivered_packets'])
                  for d in ('a_to_b', 'b_to_a')]
        same = last[-1:] == [counts]
        last.append(counts)
        return s if same else None
    return wait_until(still, 60, what='two readings alike (nothing in '
                      'flight)')


def test_loss_is_zero_on_a_clean_wire_and_exact_when_frames_are_dropped(
        lab, api, pair):
    va, vb, w = pair('h1', 'h2')
    before = quiet(api, w['id'])
    sent, got = udp_stream(va, vb, '192.0.2.2', seconds=3, rate=500,
                           port=6101)
    assert got['received'] == sent['sent']
    # Readings that the next one repeats: the collector (nice 5) can fall
    # behind busy guests, and a reading 3.5 s after the stream missed its
    # last frames once in CI (lost one short of what the receiver missed).
    clean = quiet(api, w['id'])
    ab = clean['a_to_b']
    # Nothing lost while the stream ran. Counted from `before`: a frame
    # lost at set-up is not this stream's (CI once saw 1 such frame, cause
    # not traced); the wire's total still counts it, as it should.
    assert ab['lost_packets'] - before['a_to_b']['lost_packets'] == 0, \
        (before, clean)
    entered = ab['entered_packets'] - before['a_to_b']['entered_packets']
    # Every datagram, and the few ARP frames beside them.
    assert sent['sent'] <= entered <= sent['sent'] + 4, (sent, entered)
    # h1's uplink drops its GRE for a while on the underlay switch; REST
    # and /metrics are read every 0.3 s all along.
    h1 = lab.host('h1')
    out, marks = {}, {}
    t = threading.Thread(target=lambda: out.update(r=udp_stream(
        va, vb, '192.0.2.2', seconds=4, rate=500, port=6102, marks=marks)))
    with LossWatch(api, w['id'], w['connector_id']) as watch:
        t.start()
        time.sleep(1.5)
        with UnderlayDrop(lab.ul_ns_of(1), h1.name) as drop:
            time.sleep(1.0)
        dropped_at = time.time()
        t.join(60)
        stream_end = marks['sent_at']
        wait_until(lambda: watch.samples and watch.samples[-1][0] >
                   stream_end + 8, 20, what='reads after the stream')
    sent, got = out['r']
    assert drop.dropped > 300, drop.dropped
    after = quiet(api, w['id'])
    lost = after['a_to_b']['lost_packets'] - ab['lost_packets']
    # Never more than was dropped (and the sender's odd ARP frame), at
    # any read in any place; what is not shown lost yet is shown
    # unsettled; and it is shown soon after the wire pauses (while a
    # stream runs on, a drop smaller than about two seconds of it cannot
    # be proved: docs/benchmarks.rst, "Loss figures").
    base = ab['lost_packets']
    for d in DIRS:
        most = base + drop.dropped + 3 if d == 'a_to_b' else \
            before['b_to_a']['lost_packets'] + 3
        bad = watch.never_above(d, most)
        assert not bad, (d, most, bad[:5])
    for t_read, st, _m in watch.samples:
        ab_now = st['a_to_b']
        # Once the counters read every frame the stream sent (a 1 s
        # interval, the counters' lag): each dropped one is either lost or
        # unsettled (the rule's own counter and the wire's have differed by
        # up to 10 frames: docs/benchmarks.rst).
        if t_read > stream_end + 3.0:
            assert ab_now['lost_packets'] + ab_now['unsettled_packets'] + \
                10 >= base + drop.dropped, (t_read - dropped_at, ab_now)
    final = after['a_to_b']['lost_packets']
    assert final - base >= drop.dropped - 10, (final - base, drop.dropped)
    # The stream's loss (what its receiver missed) shown in both places,
    # but for the odd frame: an ARP frame lost beside it, or one in flight
    # at a cut, may be judged a reading later or stay unsettled.
    target = base + min(final - base, sent['sent'] - got['received']) - 3
    shown = [t_read for t_read, lost_now, _w, met in watch.lost('a_to_b')
             if lost_now >= target and met is not None and met >= target]
    assert shown, watch.lost('a_to_b')[-5:]
    # The last frame counted (its lag, 0.75 s) by the next reading,
    # judged two readings later (LAG + FLIGHT = 1.25 s apart at least),
    # read within 0.5 s (CI of 622fa4a: 5.10 s against 5.05 with 0.3): at
    # the lab's 1 s interval 4.25 s; the collector reads less often when a
    # cycle costs more than a quarter of its interval (`pace_s`), and one
    # reading may come late.
    pace = max(1.0, api.ok('GET', '/v1/status')['collector']['pace_s'] or 0)
    bound = 0.75 + 4 * pace + 0.5
    print('underlay drop of %d: %d shown lost in REST and /metrics %.1f s '
          'after the drop ended, %.1f s after the stream did (bound %.1f s '
          'at a pace of %.2f s)' % (drop.dropped, target - base,
                                    shown[0] - dropped_at,
                                    shown[0] - stream_end, bound, pace))
    assert shown[0] - stream_end <= bound, (shown[0] - dropped_at,
                                            shown[0] - stream_end, pace)
    # Every datagram the receiver missed, the wire's counts say it lost
    # once quiet (entered minus delivered: lost, or unsettled where a cut
    # left frames in flight; the odd ARP frame of the sender's lost with
    # them) ...
    missed = sent['sent'] - got['received']
    counted = lost + after['a_to_b']['unsettled_packets'] - \
        ab['unsettled_packets']
    assert missed <= counted <= missed + 3, (after, sent, got)
    assert lost <= counted, (lost, counted)
    # ... and that is what the underlay's rule dropped: its counter is
    # read once the rule is gone (read before, CI once saw 16 lost
    # uncounted), so only the odd frame that entered the wire and was not
    # yet delivered at a reading differs.
    assert drop.dropped <= counted <= drop.dropped + 3, (counted,
                                                         drop.dropped)
    r = subprocess.run([sys.executable, '-m', 'virtualwire.cli', '--config',
                        lab.vwctl_config, 'stats', str(w['id'])],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert 'lost %d' % after['a_to_b']['lost_packets'] in r.stdout, r.stdout


def test_counters_never_go_back_through_a_migration_and_a_restart(
        lab, api, wired_guest):
    """A guest on h1 wired to a VM on h3, an echo stream running: migrated
    to h2 (its flows on h1 go, with their counts), then the controller is
    killed and started again. Sampled all along, no counter decreases,
    and the totals are what the far end sent and received."""
    g, far, wid = wired_guest('10.86.0')
    h1, h2, _h3 = lab.hosts
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            try:
                r = api.req('GET', '/v1/wires/%d/stats' % wid)
            except requests.ConnectionError:
                r = None                       # the controller is down
            if r is not None and r.status_code == 200:
                samples.append(r.json())
            time.sleep(0.2)
    base = settled(api, wid)
    sampler = threading.Thread(target=sample)
    sampler.start()
    stream = far.tool_bg('udp-echo', '--dst', '10.86.0.1', '--rate', 500,
                         '--seconds', 300)
    cid = api.wire(wid)['connector_id']
    watch = LossWatch(api, wid, cid).__enter__()
    try:
        time.sleep(1)
        lab.migrate(g, h1, h2)
        wait_until(lambda: api.wire(wid)['host_a'] == 'h2', 15,
                   what='wire follows to h2')
        time.sleep(2)
        lab.stop_controller(kill=True)
        time.sleep(1.5)
        lab.start_controller()
        wait_until(api.synced, 30, what='controller back')
        time.sleep(3)
    finally:
        stream.send_signal(signal.SIGINT)
        report = json.loads(stream.communicate(timeout=60)[0].splitlines()[-1])
        time.sleep(3)
        stop.set()
        watch.__exit__()
        sampler.join(10)
    last = settled(api, wid)
    seen = [base] + samples + [last]
    for a, b in zip(seen, seen[1:]):
        for d in ('a_to_b', 'b_to_a'):
            for k in COUNTERS:
                assert b[d][k] >= a[d][k], (d, k, a[d], b[d])
    # The far end is b: what it sent entered the wire, once each, and what
    # it got back was delivered to it. OVS folds its datapath's counts into
    # a flow's counter about twice a second, and what a flow counted since
    # then is lost when it is modified or removed (its datapath flows
    # report to the old version): the migration changes these flows, so
    # each total may be short by up to half a second of the stream (250
    # datagrams; 140-170 in our runs), never over by more than a few ARP
    # frames (docs/benchmarks.rst, the collector).
    rate, short = 500, 250
    sent = len(report['sent_times'])
    received = sent - report['lost']
    entered = last['b_to_a']['entered_packets'] - \
        base['b_to_a']['entered_packets']
    delivered = last['a_to_b']['delivered_packets'] - \
        base['a_to_b']['delivered_packets']
    # Over: the far VM's own frames besides the probe (ARP; 26 in a CI
    # run, while the guest stalled), at most 1 %.
    extra = sent // 100
    assert sent - short <= entered <= sent + extra, (sent, entered, rate)
    assert received - short <= delivered <= received + extra, (received,
                                                                 delivered)
    assert any(s['state'] == 'tunnelled' for s in samples)
    # Lost beyond doubt, read every 0.3 s in REST and /metrics through the
    # move and the restart, never above what the echo stream lost (a
    # round trip lost either way) and the guest's few ARP and RARP frames
    # of the move; and never down.
    most = {d: base[d]['lost_packets'] + report['lost'] + 5 for d in DIRS}
    for d in DIRS:
        bad = watch.never_above(d, most[d])
        assert not bad, (d, most[d], bad[:5])
        seen = [x[1] for x in watch.lost(d)]
        assert seen == sorted(seen), (d, seen)
    print('migration and restart: echo lost %d of %d; judged lost %s, '
          'unsettled %s' % (report['lost'], sent,
                            {d: last[d]['lost_packets'] for d in DIRS},
                            {d: last[d]['unsettled_packets'] for d in DIRS}))
    # The source's flows went with the migration and said so with their
    # final counts (OpenFlow flow-removed), which is how none was lost.
    status = api.ok('GET', '/v1/status')['collector']
    print('collector after the restart: %s' % status)


RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'ops', 'prometheus',
    'virtualwire-rules.yml')


def test_the_alerting_rules_load_and_judge_the_live_lab(lab, tmp_path):
    """ops/prometheus/virtualwire-rules.yml in a real Prometheus scraping
    the lab: promtool accepts it, every rule evaluates without error, and
    on this one-instance lab the standby alert is raised and none of
    those that would mean the lab is broken (no leader, a switch gone,
    the intent database unreachable). Wires other tests left without an
    end may be down: not judged here."""
    p = subprocess.run(['promtool', 'check', 'rules', RULES],
                       capture_output=True, text=True)
    assert p.returncode == 0 and 'SUCCESS: 8 rules found' in p.stdout, \
        p.stdout + p.stderr
    # Prometheus's own rule tests: the member alert fires after its minute.
    p = subprocess.run(['promtool', 'test', 'rules', RULES.replace(
        '.yml', '.test.yml')], capture_output=True, text=True)
    assert p.returncode == 0 and 'SUCCESS' in p.stdout, p.stdout + p.stderr
    reader = lab.credential('reader', 'prometheus-rules')
    with Prometheus(lab, tmp_path / 'prom', token_file=reader,
                    rule_files=[RULES]) as prom:
        wait_until(lambda: prom.query('virtualwire_controller_active'), 20,
                   what='a scrape with the role series')
        wait_until(lambda: len(prom.rules()) == 8 and all(
            h == 'ok' for h, _e in prom.rules().values()), 20,
            what='every rule evaluated')
        wait_until(lambda: 'VirtualWireNoStandby' in prom.alerts(), 20,
                   what='the no-standby alert')
        # Rules evaluated before the first scrape saw nothing (absent()):
        # once the series are in, those clear at the next evaluation and
        # stay clear, evaluation after evaluation.
        broken = {'VirtualWireNoLeader', 'VirtualWireSwitchDisconnected',
                  'VirtualWireIntentDbUnreachable',
                  'VirtualWireIntentDbMemberDown'}
        clear = []

        def stays_clear():
            clear.append(not broken & set(prom.alerts()))
            return clear[-4:] == [True] * 4
        wait_until(stays_clear, 20, 1.0, what='no alert of a broken lab')
        assert prom.alerts()['VirtualWireNoStandby'] == 'pending'
        assert prom.query('virtualwire_intent_db_connected')[0][1] == 1.0
        # The lab's one member, standalone: up and its own leader.
        assert [v for _m, v in prom.query(
            'virtualwire_intent_db_member_up')] == [1.0]
        assert [v for _m, v in prom.query(
            'virtualwire_intent_db_member_leader')] == [1.0]
