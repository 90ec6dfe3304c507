"""The sequenced echo report tells losses each way apart (pure logic)."""
from vwlab.echo_probe import echo_report


def _sent(n):
    return {q: 100.0 + q / 1000.0 for q in range(n)}


def test_no_loss():
    r = echo_report(_sent(5), [(q, q + 1, 0) for q in range(5)])
    assert (r['lost'], r['duplicates'], r['lost_runs']) == (0, 0, [])


def test_losses_each_way_and_windows():
    # 2,3 never reached the responder (counter continues 3 -> 4 at seq 4);
    # 6 reached it (counter jumps 5 -> 7) but its echo was lost.
    echoes = [(0, 1, 0), (1, 2, 0), (4, 3, 0), (5, 4, 0), (7, 6, 0),
              (7, 6, 0)]
    r = echo_report(_sent(8), echoes)
    assert r['lost'] == 3
    assert r['lost_on_the_way_in'] == 2
    assert r['lost_on_the_way_back'] == 1
    assert r['duplicates'] == 1 and r['duplicate_seqs'] == [7]
    assert r['duplicates_on_the_way_in'] == 0     # one echo, back twice
    assert [(x['first'], x['last']) for x in r['lost_runs']] == [(2, 3),
                                                                  (6, 6)]
    assert r['lost_runs'][0]['from'] == 100.002


def test_a_datagram_the_guest_got_twice_is_a_duplicate_on_the_way_in():
    # 1 reached the responder twice (its counter moved on: 2, then 3);
    # 2's one echo came back twice (the same count).
    echoes = [(0, 1, 0), (1, 2, 0), (1, 3, 0), (2, 4, 0), (2, 4, 0)]
    r = echo_report(_sent(3), echoes)
    assert r['duplicates'] == 2 and r['duplicates_on_the_way_in'] == 1
    assert r['lost'] == 0 and r['lost_on_the_way_in'] == 0


def test_lost_tail_is_counted():
    r = echo_report(_sent(4), [(0, 1, 0), (1, 2, 0)])
    assert r['lost'] == 2 and r['lost_tail'] == 2


def test_a_sender_that_fell_silent_says_when_and_for_how_long():
    sent = _sent(6)
    for q in (3, 4, 5):
        sent[q] += 0.080            # starved for 80 ms after datagram 2
    r = echo_report(sent, [(q, q + 1, 0) for q in range(6)])
    ((at, gap),) = r['send_gaps']
    assert at == sent[2] and abs(gap - 0.081) < 1e-9
    assert echo_report(_sent(6), [])['send_gaps'] == []


def test_the_echo_probe_keeps_its_schedule_when_echoes_come_back_fast():
    """Echoes over loopback return in microseconds; the probe must still
    send datagram k no earlier than k / rate after the first (a sender
    woken by each echo ran ahead of its schedule, then fell silent for as
    long as it was ahead when a migration stopped the echoes)."""
    import json
    import socket
    import subprocess
    import sys
    import threading

    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(('127.0.0.1', 0))
    srv.settimeout(0.2)
    stop = threading.Event()

    def echo():
        while not stop.is_set():
            try:
                data, peer = srv.recvfrom(2048)
            except socket.timeout:
                continue
            srv.sendto(data, peer)
    t = threading.Thread(target=echo)
    t.start()
    try:
        p = subprocess.run(
            [sys.executable, '-m', 'vwlab.traffic', 'udp-echo', '--dst',
             '127.0.0.1', '--port', str(srv.getsockname()[1]), '--rate',
             '1000', '--seconds', '0.3'], capture_output=True, text=True,
            timeout=30, check=True)
    finally:
        stop.set()
        t.join()
        srv.close()
    r = json.loads(p.stdout.splitlines()[-1])
    times = r['sent_times']
    assert r['sent'] == 300 and r['echoed'] > 0
    early = [k for k, at in enumerate(times) if at < times[0] + k / 1000.0
             - 0.0002]
    assert early == [], 'sent ahead of schedule: %s' % early[:10]


def test_datagrams_that_reached_the_responder_out_of_order_are_counted():
    # The responder got 3 before 2 (its counter says so): one reordering.
    echoes = [(0, 1, 0), (1, 2, 0), (3, 3, 0), (2, 4, 0), (4, 5, 0)]
    r = echo_report(_sent(5), echoes)
    assert (r['lost'], r['reordered']) == (0, 1)
    assert echo_report(_sent(5), [(q, q + 1, 0) for q in range(5)])[
        'reordered'] == 0
