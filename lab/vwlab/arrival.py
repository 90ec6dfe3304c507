"""How soon a moving vNIC's destination delivers after the guest's first
frame (`python -m vwlab.arrival`), for bench/bench_activation.py.

  stream --dst IP --port P --rate R --mac M
        sequenced UDP datagrams, each stamped with its send time (unix),
        paced by the clock until SIGINT; then prints a JSON report with
        the send gaps over 2 ms (start, length): a window with no such
        gap was probed (the sender was sending through it)
  arrive IFACE --port P [--timeout S]
        on a destination port: send QEMU's RARP announce for IFACE's MAC,
        then wait for the first datagram of the stream; prints the
        announce's send time, the first datagram's kernel receive time
        and its own send stamp, and every delivery for --collect seconds
        after it (JSON)
  tunnel-sniff IFACE --port P --seconds S --direction in|out
        in a host's namespace: when each of the stream's datagrams left
        (out) or reached (in) its underlay device inside GRE (JSON)
"""
import argparse
import json
import select
import signal
import socket
import struct
import subprocess
import sys
import time

from vwlab.traffic import HDR, rarp_frame

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
SO_TIMESTAMPNS = 35
PACKET_OUTGOING = 4
GAP = 0.002


def stream(dst, port, rate, mac):
    # A static neighbour: the stream must not wait on ARP while the
    # destination holds frames.
    subprocess.run(['ip', 'neigh', 'replace', dst, 'lladdr', mac, 'nud',
                    'permanent', 'dev', 'eth0'], check=True)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stop = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    interval = 1.0 / rate
    start = time.perf_counter()
    seq, last, gaps = 0, None, []
    while not stop:
        target = start + seq * interval
        now = time.perf_counter()
        if target - now > 0.0003:
            time.sleep(target - now - 0.0002)
            continue
        t = time.time()
        try:
            s.sendto(HDR.pack(seq, t), (dst, port))
        except OSError:
            pass
        if last is not None and t - last > GAP:
            gaps.append((last, t - last))
        last, seq = t, seq + 1
    print(json.dumps({'sent': seq, 'gaps': gaps}))


def _stamp(anc):
    """The kernel's receive time (SO_TIMESTAMPNS) of a datagram."""
    if not anc:
        return time.time()
    sec, nsec = struct.unpack('qq', anc[0][2][:16])
    return sec + nsec / 1e9


def tunnel_sniff(iface, port, seconds, direction):
    """(sequence, time) of the stream's datagrams inside GRE on a host's
    underlay device, leaving it ('out') or arriving ('in')."""
    # ETH_P_ALL: only such sockets see what the device sends.
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM,
                      socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((iface, 0))
    print(json.dumps({'ready': True}), flush=True)
    want_out = direction == 'out'
    seen, end = [], time.time() + seconds
    while time.time() < end:
        if not select.select([s], [], [], max(0, end - time.time()))[0]:
            continue
        data, anc, _f, addr = s.recvmsg(65535, socket.CMSG_SPACE(16))
        if (addr[2] == PACKET_OUTGOING) != want_out or \
                addr[1] != ETH_P_IP or data[9] != 47:
            continue
        o = (data[0] & 15) * 4
        flags = struct.unpack('!H', data[o:o + 2])[0]
        o += 4 + 4 * bin(flags & 0xb000).count('1') + 14  # GRE, Ethernet
        head = _is_ours(data[o:], port) if len(data) > o else None
        if head is not None:
            seen.append((head[0], _stamp(anc)))
    print(json.dumps({'seen': seen}))


def _is_ours(data, port):
    """(sequence, send time) of one of the stream's datagrams (an IP
    packet), else None."""
    ihl = (data[0] & 15) * 4
    if len(data) < ihl + 8 + HDR.size or data[9] != 17 or \
            struct.unpack('!H', data[ihl + 2:ihl + 4])[0] != port:
        return None
    return HDR.unpack_from(data, ihl + 8)


def arrive(iface, port, timeout, collect, announce_it=True):
    # SOCK_DGRAM: datagrams start at the IP header.
    s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM,
                      socket.htons(ETH_P_IP))
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.bind((iface, 0))
    with open('/sys/class/net/%s/address' % iface) as f:
        announce = rarp_frame(f.read().strip())
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    tx.bind((iface, 0))
    # Proof that the destination held the stream: what reached the port
    # in the 100 ms before the announce (0 if it held).
    before, quiet = 0, time.time() + 0.1
    while time.time() < quiet:
        if select.select([s], [], [], max(0, quiet - time.time()))[0]:
            data = s.recv(65535)
            before += _is_ours(data, port) is not None
    sent_at = time.time()
    if announce_it:
        tx.send(announce)
    end = sent_at + timeout
    out = {'sent_at': sent_at, 'first_at': None, 'first_sent': None,
           'first_seq': None, 'before': before}
    delivered = []
    while time.time() < end:
        if not select.select([s], [], [], end - time.time())[0]:
            break
        data, anc, _f, _a = s.recvmsg(65535, socket.CMSG_SPACE(16))
        head = _is_ours(data, port)
        if head is None:
            continue
        seq, stamp = head
        at = _stamp(anc)
        if out['first_at'] is None:
            out.update(first_at=at, first_sent=stamp, first_seq=seq)
            end = at + collect
        delivered.append((seq, stamp, at))
    out['delivered'] = delivered
    print(json.dumps(out))
    return 0 if out['first_at'] else 1


def main(argv=None):
    p = argparse.ArgumentParser(prog='vwlab.arrival')
    sub = p.add_subparsers(dest='cmd', required=True)
    a = sub.add_parser('stream')
    a.add_argument('--dst', required=True)
    a.add_argument('--port', type=int, required=True)
    a.add_argument('--rate', type=float, default=4000)
    a.add_argument('--mac', required=True)
    a = sub.add_parser('arrive')
    a.add_argument('iface')
    a.add_argument('--port', type=int, required=True)
    a.add_argument('--timeout', type=float, default=3)
    a.add_argument('--collect', type=float, default=0.02)
    a.add_argument('--no-announce', action='store_true',
                   help='only listen (another NIC of the guest announces)')
    a = sub.add_parser('tunnel-sniff')
    a.add_argument('iface')
    a.add_argument('--port', type=int, required=True)
    a.add_argument('--seconds', type=float, required=True)
    a.add_argument('--direction', choices=('in', 'out'), required=True)
    args = p.parse_args(argv)
    if args.cmd == 'stream':
        stream(args.dst, args.port, args.rate, args.mac)
        return 0
    if args.cmd == 'tunnel-sniff':
        tunnel_sniff(args.iface, args.port, args.seconds, args.direction)
        return 0
    return arrive(args.iface, args.port, args.timeout, args.collect,
                  not args.no_announce)


if __name__ == '__main__':
    sys.exit(main())
