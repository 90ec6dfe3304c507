"""The 1 kHz echo probe that judges a migration's outage: a clock-paced
sequenced UDP stream to a responder that echoes each sequence with its own
receive counter (the lab guest's vw-responder, or `echo_server` in a
namespace VM), and the report that tells losses on the way in from losses
on the way back, duplicates, the lost runs and the sender's own silences.
Run through `python -m vwlab.traffic udp-echo | echo-server | guest-stats`.
"""
import json
import select
import signal
import socket
import struct
import sys
import time

ECHO = struct.Struct('!QQ')     # our sequence, the responder's rx counter


# s between two sends that counts as a silence: at 1 kHz, over 2 ms means
# at least one datagram was not sent when due (vwlab.outage.PROBE_GAP).
SEND_GAP = 0.002
LATE_ECHO = 0.005       # s from send to echo that marks one held back
LATE_KEPT = 5000        # of them, at most (a report stays small)


def echo_report(sent_at, echoes):
    """sent_at: {seq: send time}; echoes: [(seq, responder counter, t)].
    Between two consecutive echoes the responder's counter tells how many
    of the missing datagrams reached it (lost on the way back) and how
    many did not (lost on the way in)."""
    seen, dups, dup_seqs, dups_in = {}, 0, [], 0
    for seq, ctr, t in echoes:
        if seq in seen:
            dups += 1
            dup_seqs.append(seq)
            # The responder counted it again: the guest got it twice (a
            # duplicate on the way in); the same count: its one echo
            # came back twice.
            dups_in += ctr != seen[seq]
        else:
            seen[seq] = ctr
    lost_in = lost_back = 0
    prev = None                     # (seq, counter)
    for seq in sorted(seen):
        ctr = seen[seq]
        gap = seq - (prev[0] + 1 if prev else 0)
        reached = ctr - (prev[1] + 1 if prev else 1)
        if gap > 0:
            lost_back += max(0, min(gap, reached))
            lost_in += gap - max(0, min(gap, reached))
        prev = (seq, ctr)
    # The responder's counter gives the order datagrams reached it: one
    # that reached it before an older one was reordered on the way in.
    by_seq = sorted(seen)
    reordered = [q for p, q in zip(by_seq, by_seq[1:]) if seen[q] < seen[p]]
    missing = [q for q in sorted(sent_at) if q not in seen]
    # Echoes that came back LATE_ECHO or more after their datagram left:
    # those sent while a guest was paused and delivered when it ran again
    # (what a migration's judge reads the first held delivery from).
    first_echo: dict = {}
    for seq, _ctr, t in echoes:
        first_echo.setdefault(seq, t)
    late = [[q, round(t, 6)] for q, t in sorted(first_echo.items())
            if q in sent_at and t - sent_at[q] >= LATE_ECHO][:LATE_KEPT]
    # Where the sender itself fell silent (not scheduled): a stream that
    # sent nothing during a guest's pause cannot have lost anything in it.
    times = [sent_at[q] for q in sorted(sent_at)]
    send_gaps = [[a, b - a] for a, b in zip(times, times[1:])
                 if b - a > SEND_GAP]
    runs = []
    for q in missing:
        if runs and runs[-1][1] == q - 1:
            runs[-1][1] = q
        else:
            runs.append([q, q])
    return {'sent': len(sent_at), 'echoed': len(seen), 'duplicates': dups,
            'duplicates_on_the_way_in': dups_in,
            # Which (the first 100): a capture tells who made each twice.
            'duplicate_seqs': dup_seqs[:100],
            'reordered': len(reordered),
            # Each with its send time: where in a move it happened.
            'reordered_sent_at': [[q, sent_at[q]] for q in reordered[:100]],
            'lost': len(missing), 'lost_tail': len(sent_at) - 1 - max(
                seen, default=-1),
            'lost_on_the_way_in': lost_in, 'lost_on_the_way_back': lost_back,
            'lost_runs': [{'first': a, 'last': b, 'packets': b - a + 1,
                           'from': sent_at[a], 'to': sent_at[b]}
                          for a, b in runs],
            # Each lost datagram with its send time, for loss audits.
            'lost_sent_at': [[q, sent_at[q]] for q in missing],
            'send_gaps': send_gaps,
            'late_echoes': late,
            # Every datagram's send time, by sequence number.
            'sent_times': [round(t, 6) for t in times]}


def echo_server(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(('0.0.0.0', port))
    count = 0
    while True:
        data, peer = s.recvfrom(65535)
        if len(data) >= ECHO.size:
            count += 1
            seq, _ = ECHO.unpack_from(data)
            s.sendto(ECHO.pack(seq, count) + data[ECHO.size:], peer)


def udp_echo(dst, port, rate, seconds, size=64, linger=0.5):
    """Send `rate` sequenced datagrams a second for `seconds` (or until
    SIGINT/SIGTERM), each at its own time on the clock, and print what
    came back (`echo_report`)."""
    stopping = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.append(1))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setblocking(False)
    pad = b'\0' * max(0, size - ECHO.size)
    interval = 1.0 / rate
    n = int(rate * seconds)
    sent_at, echoes = {}, []
    start = time.perf_counter()
    wall0 = time.time() - start

    def drain(until):
        """Read echoes until `until` (perf_counter): waking up for an echo
        must not send the next datagram early (a sender clocked by its
        echoes runs ahead of its schedule, then falls silent for as long
        when they stop: a probe that says nothing about a pause)."""
        while True:
            left = until - time.perf_counter()
            r, _, _ = select.select([s], [], [], max(0.0, left))
            while r:
                try:
                    data = s.recv(65535)
                except BlockingIOError:
                    break
                if len(data) >= ECHO.size:
                    seq, ctr = ECHO.unpack_from(data)
                    echoes.append((seq, ctr, time.time()))
            if left <= 0:
                return
    for seq in range(n):
        target = start + seq * interval
        drain(target)
        if stopping:
            break
        sent_at[seq] = wall0 + time.perf_counter()
        try:
            s.sendto(ECHO.pack(seq, 0) + pad, (dst, port))
        except OSError:
            pass            # e.g. no ARP answer yet: counted as lost
    drain(time.perf_counter() + linger)
    print(json.dumps(echo_report(sent_at, echoes)))


def parse_guest_stats(text):
    """/proc/net/snmp + /proc/net/dev text -> {'udp': {...}, 'dev': {iface:
    {'rx_packets', 'rx_dropped', 'tx_packets', 'tx_dropped'}}}."""
    udp, dev, head = {}, {}, None
    snmp, _, netdev = text.partition('Inter-|')
    for line in snmp.splitlines():
        if line.startswith('Udp: '):
            fields = line.split()[1:]
            if head is None:
                head = fields
            else:
                udp = dict(zip(head, (int(v) for v in fields)))
    for line in netdev.splitlines()[2:]:
        name, _, rest = line.partition(':')
        v = [int(x) for x in rest.split()]
        if len(v) >= 12:
            dev[name.strip()] = {'rx_packets': v[1], 'rx_dropped': v[3],
                                 'tx_packets': v[9], 'tx_dropped': v[11]}
    return {'udp': udp, 'dev': dev}


def guest_stats(dst, port, timeout=2.0):
    """Asks the lab guest's responder for its kernel's counters."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    for _ in range(3):
        s.sendto(b'VWSTATS?', (dst, port))
        try:
            data = s.recv(65535)
        except socket.timeout:
            continue
        print(json.dumps(parse_guest_stats(data.decode(errors='replace'))))
        return 0
    print('guest-stats: no answer from %s:%d' % (dst, port), file=sys.stderr)
    return 1
