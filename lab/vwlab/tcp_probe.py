"""A TCP flow through a live migration, judged by what its sender's kernel
says: bytes acknowledged over time (TCP_INFO), retransmissions, and
whether a retransmission timeout struck (the congestion state `Loss`).

The sender (a lab VM) writes as fast as the connection takes to the
guest's TCP sink (vw-responder's, which reads and discards) and samples
TCP_INFO every few milliseconds; `judge` then says how long the flow
stalled around the guest's pause and when it was back at its rate.

Run through `python -m vwlab.traffic tcp-stream`.
"""
import json
import select
import signal
import socket
import struct
import time

# struct tcp_info (linux/tcp.h): the fields read here, at their offsets.
_CA_STATE, _BACKOFF = 1, 4
_RTO = 8                    # tcpi_rto, microseconds
_TOTAL_RETRANS = 100
_BYTES_ACKED = 120
TCP_INFO_LEN = 128 + 8
CA_LOSS = 4                 # TCP_CA_Loss: a retransmission timeout fired
CHUNK = 64 << 10
SO_MAX_PACING_RATE = 47     # asm-generic/socket.h (not in Python's socket)
WINDOW = 0.1                # goodput is judged over 100 ms windows
BACK_AT_RATE = 0.9          # "back at its rate": 90% of the rate before


def tcp_info(sock):
    """(bytes acked, total retransmissions, CA state, backoff, the
    retransmission timeout in µs)."""
    b = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    return (struct.unpack_from('Q', b, _BYTES_ACKED)[0],
            struct.unpack_from('I', b, _TOTAL_RETRANS)[0],
            b[_CA_STATE], b[_BACKOFF], struct.unpack_from('I', b, _RTO)[0])


def tcp_stream(dst, port, seconds, sample_ms=5, rate_mbit=0.0):
    """Send for `seconds` (or until SIGINT/SIGTERM), sampling TCP_INFO
    every `sample_ms`; print the samples as JSON. rate_mbit: paced by the
    kernel at most this fast (SO_MAX_PACING_RATE: TCP paces itself
    without the fq qdisc since Linux 4.13), 0 as fast as the path takes."""
    stopping = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.append(1))
    s = socket.create_connection((dst, port), timeout=10)
    if rate_mbit:
        s.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE,
                     int(rate_mbit * 1e6 / 8))
    s.setblocking(False)
    buf = b'\0' * CHUNK
    samples = []
    end = time.time() + seconds
    nxt = time.time()
    while not stopping and time.time() < end:
        now = time.time()
        if now >= nxt:
            samples.append((round(now, 6),) + tcp_info(s))
            nxt += sample_ms / 1000.0
        _r, w, _x = select.select([], [s], [], max(0.0, nxt - time.time()))
        if w:
            try:
                s.send(buf)
            except (BlockingIOError, InterruptedError):
                pass
    samples.append((round(time.time(), 6),) + tcp_info(s))
    s.close()
    print(json.dumps({'samples': samples}))


def _rate(samples, t0, t1):
    """Bytes acked per second over [t0, t1] (None without samples)."""
    inside = [x for x in samples if t0 <= x[0] <= t1]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def judge(samples, stop, resume):
    """What the flow went through: its rate before (median of 100 ms
    windows in the 2 s before STOP), the stall (the longest time without
    an acknowledgement moving, around the pause), the recovery (RESUME to the first
    100 ms window at 90% of that rate again), retransmissions, and whether
    a retransmission timeout struck (congestion state Loss), and the
    sender's timeout at STOP: a guest paused longer than that sends no
    acknowledgement before the timer runs out, whatever the network
    does with the segments."""
    before = [r for r in (_rate(samples, t, t + WINDOW) for t in
                          [stop - 2.0 + k * WINDOW for k in range(19)])
              if r is not None]
    rate = sorted(before)[len(before) // 2] if before else None
    # The longest stretch without an acknowledgement moving, from just
    # before STOP to a second after RESUME.
    advances = [b[0] for a, b in zip(samples, samples[1:])
                if b[1] > a[1] and stop - 0.5 <= b[0] <= resume + 1.0]
    gaps = [b - a for a, b in zip(advances, advances[1:])]
    back = None
    if rate:
        for x in samples:
            if x[0] < resume:
                continue
            r = _rate(samples, x[0], x[0] + WINDOW)
            if r is not None and r >= BACK_AT_RATE * rate:
                back = x[0]
                break
    around = [x for x in samples if stop - 0.5 <= x[0] <= (back or resume)
              + 0.5]
    at_stop = [x for x in samples if x[0] <= stop and len(x) > 5]
    # When the timer ran out (the first sample in Loss): before RESUME,
    # while the guest could acknowledge nothing.
    fired = next((x[0] for x in around if x[3] == CA_LOSS), None)
    return {
        'rate_mbit_s': round(rate * 8 / 1e6, 1) if rate else None,
        # None: nothing acknowledged after STOP within a second of RESUME.
        'stall_ms': round(max(gaps) * 1000, 1)
        if gaps and advances[-1] > stop else None,
        'recovered_ms_after_resume': round((back - resume) * 1000, 1)
        if back else None,
        'retransmissions': (around[-1][2] - around[0][2]) if around else None,
        'rto': fired is not None,
        'rto_ms_after_resume': round((fired - resume) * 1000, 1)
        if fired is not None else None,
        'max_backoff': max((x[4] for x in around), default=0),
        'sender_rto_ms': round(at_stop[-1][5] / 1000.0, 1)
        if at_stop else None}
