"""Traffic tools run inside lab namespaces (`python -m vwlab.traffic`).

  frames-send IFACE HEX...           send raw Ethernet frames
  frames-sniff IFACE --seconds S     print every frame seen (hex, JSON lines),
                                     VLAN tags restored from PACKET_AUXDATA
  udp-recv --port P --seconds S      sequenced UDP sink, prints a JSON report
  udp-send --dst IP --port P --rate R --seconds S
                                     (both at most S: SIGINT or SIGTERM
                                     ends either early, with its report)
  tcp-recv --port P                  prints {"bytes", "sha256"} of one stream
  tcp-send --dst IP --port P --bytes N
  udp-echo --dst IP --port P --rate R --seconds S
  tcp-stream --dst IP --port P --seconds S [--rate-mbit M]
                                     (vwlab.tcp_probe)
                                     sequenced stream to a responder that
                                     echoes (the lab guest's vw-responder);
                                     reports losses each way, duplicates
                                     and the lost windows (JSON)
  echo-server --port P               what the guest's vw-responder does, in a
                                     namespace VM: echo each datagram's
                                     sequence with our receive counter
  rarp IFACE...                      send the RARP announce QEMU sends for
                                     a migrated NIC on each IFACE, at once;
                                     prints {"sent_at"} (unix time)
  beacon IFACE --interval-us U       raw frames (ethertype 0x88b5) until killed
  first-frame IFACE --timeout S      print the CLOCK_MONOTONIC arrival time of
                                     the first beacon frame (JSON)
"""
import argparse
import hashlib
import json
import select
import signal
import socket
import struct
import sys
import time

from vwlab.echo_probe import echo_server, guest_stats, udp_echo

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
PACKET_OUTGOING = 4


def frames_send(iface, frames):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    for f in frames:
        s.send(bytes.fromhex(f))
    s.close()


def rarp_frame(mac):
    """QEMU's self-announce (net/announce.c): a RARP reverse request from
    and for the NIC's MAC, padded to 60 bytes."""
    m = bytes.fromhex(mac.replace(':', ''))
    body = struct.pack('!HHBBH', 1, 0x0800, 6, 4, 3) + m + bytes(4) + m + \
        bytes(4)
    return (b'\xff' * 6 + m + b'\x80\x35' + body).ljust(60, b'\0')


def rarp(ifaces):
    socks = []
    for i in ifaces:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((i, 0))
        with open('/sys/class/net/%s/address' % i) as f:
            socks.append((s, rarp_frame(f.read().strip())))
    t = time.time()
    for s, frame in socks:
        s.send(frame)
    print(json.dumps({'sent_at': t}))


def frames_sniff(iface, seconds, ready_file=None):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                      socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((iface, 0))
    if ready_file:
        open(ready_file, 'w').close()
    end = time.time() + seconds
    while True:
        left = end - time.time()
        if left <= 0:
            break
        r, _, _ = select.select([s], [], [], left)
        if not r:
            continue
        data, anc, _flags, addr = s.recvmsg(65535, socket.CMSG_SPACE(64))
        if addr[2] == PACKET_OUTGOING:
            continue
        for level, typ, cdata in anc:
            if level == SOL_PACKET and typ == PACKET_AUXDATA:
                (status, _len, _snap, _mac, _net, tci,
                 tpid) = struct.unpack('IIIHHHH', cdata[:20])
                if status & TP_STATUS_VLAN_VALID:
                    if not status & TP_STATUS_VLAN_TPID_VALID:
                        tpid = 0x8100
                    data = data[:12] + struct.pack('!HH', tpid, tci) + \
                        data[12:]
        print(json.dumps({'t': time.time(), 'hex': data.hex()}), flush=True)


HDR = struct.Struct('!Qd')      # sequence number, send time


def _stop_on_signal():
    """A list that SIGINT or SIGTERM makes non-empty: a stream that runs
    until its test is done with it, not for a length guessed beforehand
    (a guess long enough for a loaded machine idles on an idle one)."""
    stopping = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.append(1))
    return stopping


def udp_recv(port, seconds, ready_file=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind(('0.0.0.0', port))
    stopping = _stop_on_signal()
    if ready_file:
        open(ready_file, 'w').close()
    seen, dups, times, delays = set(), 0, {}, []
    end = time.time() + seconds
    max_seq = -1
    while not stopping:
        left = end - time.time()
        if left <= 0:
            break
        # A signal's handler runs, then select goes on (PEP 475): the
        # loop sees `stopping` within 0.5 s.
        r, _, _ = select.select([s], [], [], min(left, 0.5))
        if not r:
            continue
        data, _ = s.recvfrom(65535)
        if len(data) < HDR.size:
            continue
        seq, sent = HDR.unpack_from(data)
        if seq in seen:
            dups += 1
            continue
        seen.add(seq)
        times[seq] = time.time()
        delays.append(times[seq] - sent)    # one clock: lab namespaces
        max_seq = max(max_seq, seq)
    missing = [q for q in range(max_seq + 1) if q not in seen]
    # Outage = longest run of consecutive missing numbers, in packets.
    longest, run, prev = 0, 0, None
    for q in missing:
        run = run + 1 if prev is not None and q == prev + 1 else 1
        longest, prev = max(longest, run), q
    print(json.dumps({'received': len(seen), 'highest_seq': max_seq,
                      'missing': len(missing), 'missing_seqs': missing[:1000],
                      'gaps': _gaps(missing, times),
                      'duplicates': dups, 'longest_gap_packets': longest,
                      # When the first and the last arrived: a probe
                      # judging a window shows it spanned it.
                      'first_at': min(times.values(), default=None),
                      'last_at': max(times.values(), default=None),
                      'delay_ms': _delay_ms(delays)}))


def _gaps(missing, times, most=20):
    """Each run of missing numbers as [first, last, arrival of the one
    before, of the one after] (epoch s): when, not only how much, a test
    lost, to set against the controller's log."""
    runs = []
    for q in missing:
        if runs and q == runs[-1][1] + 1:
            runs[-1][1] = q
        elif len(runs) < most:
            runs.append([q, q])
        else:
            break
    return [[a, b, times.get(a - 1), times.get(b + 1)] for a, b in runs]


def _delay_ms(delays):
    """One-way delay, sender's stamp to arrival (p50, p99, max), ms."""
    if not delays:
        return None
    s = sorted(delays)
    return {q: round(s[min(len(s) - 1, int(len(s) * f))] * 1e3, 2)
            for q, f in (('p50', 0.5), ('p99', 0.99), ('max', 1.0))}


def udp_send(dst, port, rate, seconds, size=64, ready_file=None):
    """ready_file: made once a signal would end the stream with its
    report (before, it would end it with none)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = b'\0' * max(0, size - HDR.size)
    interval = 1.0 / rate
    stopping = _stop_on_signal()
    if ready_file:
        open(ready_file, 'w').close()
    start = time.perf_counter()
    n = int(rate * seconds)
    sent = 0
    for seq in range(n):
        target = start + seq * interval
        # Sleep to the send time, never spin: the sender runs SCHED_FIFO
        # (vwlab.guests), and a spinning one at 1 kHz held a core to
        # itself, so two of them starved OVS and the controller on a
        # 2-core host for up to the kernel's RT throttle (950 ms a
        # second): frames died in the lab, not in the product. A FIFO
        # task has no timer slack; it wakes within tens of microseconds.
        while not stopping:
            now = time.perf_counter()
            if now >= target:
                break
            time.sleep(target - now)
        if stopping:
            break
        try:
            s.sendto(HDR.pack(seq, time.time()) + pad, (dst, port))
        except OSError:
            pass          # e.g. no ARP answer yet: counted as lost
        sent = seq + 1
    print(json.dumps({'sent': sent, 'stopped': bool(stopping)}))


def tcp_recv(port, ready_file=None, timeout=60):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(('0.0.0.0', port))
    ls.listen(1)
    ls.settimeout(timeout)
    if ready_file:
        open(ready_file, 'w').close()
    c, _ = ls.accept()
    c.settimeout(timeout)
    h, total, t0 = hashlib.sha256(), 0, time.time()
    while True:
        b = c.recv(1 << 16)
        if not b:
            break
        h.update(b)
        total += len(b)
    dt = time.time() - t0
    print(json.dumps({'bytes': total, 'sha256': h.hexdigest(),
                      'seconds': dt,
                      'mbit_s': total * 8 / dt / 1e6 if dt else 0}))


def tcp_send(dst, port, nbytes, seed=1):
    data = hashlib.sha256(str(seed).encode()).digest() * 2048   # 64 KiB
    h, sent = hashlib.sha256(), 0
    s = socket.create_connection((dst, port), timeout=30)
    while sent < nbytes:
        chunk = data[:min(len(data), nbytes - sent)]
        s.sendall(chunk)
        h.update(chunk)
        sent += len(chunk)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    s.close()
    print(json.dumps({'bytes': sent, 'sha256': h.hexdigest()}))


BEACON_ETHERTYPE = 0x88b5         # IEEE local experimental


def beacon(iface, interval_us, src_mac):
    """A steady stream of small frames, so the moment a wire starts carrying
    traffic shows up (to within interval_us) at the far end."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    mac = bytes.fromhex(src_mac.replace(':', ''))
    frame = b'\xff' * 6 + mac + struct.pack('!H', BEACON_ETHERTYPE) + \
        b'\0' * 46
    interval = interval_us / 1e6
    nxt = time.monotonic()
    while True:
        try:
            s.send(frame)
        except OSError:
            pass
        nxt += interval
        left = nxt - time.monotonic()
        if left > 0:
            time.sleep(left)
        else:
            nxt = time.monotonic()


def first_frame(iface, timeout, ready_file=None):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                      socket.htons(BEACON_ETHERTYPE))
    s.bind((iface, 0))
    if ready_file:
        open(ready_file, 'w').close()
    r, _, _ = select.select([s], [], [], timeout)
    t = time.monotonic() if r else None
    print(json.dumps({'monotonic': t}))
    return 0 if r else 1


def main(argv=None):
    p = argparse.ArgumentParser(prog='vwlab.traffic')
    sub = p.add_subparsers(dest='cmd', required=True)
    a = sub.add_parser('frames-send')
    a.add_argument('iface')
    a.add_argument('frames', nargs='+')
    a = sub.add_parser('frames-sniff')
    a.add_argument('iface')
    a.add_argument('--seconds', type=float, default=3)
    a.add_argument('--ready-file')
    a = sub.add_parser('udp-recv')
    a.add_argument('--port', type=int, required=True)
    a.add_argument('--seconds', type=float, required=True)
    a.add_argument('--ready-file')
    a = sub.add_parser('udp-send')
    a.add_argument('--dst', required=True)
    a.add_argument('--port', type=int, required=True)
    a.add_argument('--rate', type=float, default=1000)
    a.add_argument('--seconds', type=float, required=True)
    a.add_argument('--size', type=int, default=64)
    a.add_argument('--ready-file')
    a = sub.add_parser('tcp-recv')
    a.add_argument('--port', type=int, required=True)
    a.add_argument('--ready-file')
    a = sub.add_parser('tcp-send')
    a.add_argument('--dst', required=True)
    a.add_argument('--port', type=int, required=True)
    a.add_argument('--bytes', type=int, required=True)
    a = sub.add_parser('tcp-stream')
    a.add_argument('--dst', required=True)
    a.add_argument('--port', type=int, default=7001)
    a.add_argument('--seconds', type=float, required=True)
    a.add_argument('--sample-ms', type=float, default=5)
    a.add_argument('--rate-mbit', type=float, default=0)
    a = sub.add_parser('udp-echo')
    a.add_argument('--dst', required=True)
    a.add_argument('--port', type=int, default=7000)
    a.add_argument('--rate', type=float, default=1000)
    a.add_argument('--seconds', type=float, required=True)
    a.add_argument('--size', type=int, default=64)
    a = sub.add_parser('guest-stats')
    a.add_argument('--dst', required=True)
    a.add_argument('--port', type=int, default=7000)
    a = sub.add_parser('echo-server')
    a.add_argument('--port', type=int, default=7000)
    a = sub.add_parser('rarp')
    a.add_argument('ifaces', nargs='+')
    a = sub.add_parser('beacon')
    a.add_argument('iface')
    a.add_argument('--interval-us', type=int, default=250)
    a.add_argument('--src-mac', default='02:00:00:00:00:01')
    a = sub.add_parser('first-frame')
    a.add_argument('iface')
    a.add_argument('--timeout', type=float, default=10)
    a.add_argument('--ready-file')
    args = p.parse_args(argv)
    if args.cmd == 'frames-send':
        frames_send(args.iface, args.frames)
    elif args.cmd == 'frames-sniff':
        frames_sniff(args.iface, args.seconds, args.ready_file)
    elif args.cmd == 'udp-recv':
        udp_recv(args.port, args.seconds, args.ready_file)
    elif args.cmd == 'udp-send':
        udp_send(args.dst, args.port, args.rate, args.seconds, args.size,
                 args.ready_file)
    elif args.cmd == 'tcp-recv':
        tcp_recv(args.port, args.ready_file)
    elif args.cmd == 'tcp-send':
        tcp_send(args.dst, args.port, args.bytes)
    elif args.cmd == 'tcp-stream':
        from vwlab.tcp_probe import tcp_stream
        tcp_stream(args.dst, args.port, args.seconds, args.sample_ms,
                   args.rate_mbit)
    elif args.cmd == 'udp-echo':
        udp_echo(args.dst, args.port, args.rate, args.seconds, args.size)
    elif args.cmd == 'guest-stats':
        return guest_stats(args.dst, args.port)
    elif args.cmd == 'echo-server':
        echo_server(args.port)
    elif args.cmd == 'rarp':
        rarp(args.ifaces)
    elif args.cmd == 'beacon':
        beacon(args.iface, args.interval_us, args.src_mac)
    elif args.cmd == 'first-frame':
        return first_frame(args.iface, args.timeout, args.ready_file)
    return 0


if __name__ == '__main__':
    sys.exit(main())
