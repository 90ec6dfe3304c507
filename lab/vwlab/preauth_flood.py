"""Unauthenticated floods from many source addresses, as an attacker runs
them against a listener (issue 39, "bounded before authentication"):

- `hold`: open N connections round robin from the given source addresses
  and keep them, saying nothing, `--hold` seconds once all are open; then
  how many the server closed at once (over its caps), later, or never.
- `drip`: N connections that each send one byte every `every` seconds:
  a TLS ClientHello (`--kind hello`, an OpenFlow or REST handshake never
  finished) or, after a finished handshake, an HTTP request head (`--kind
  head`). Reports when the server closed each one and proves the drip was
  live: the last byte each sent before the close, and how long before it.

Run in a namespace that holds the source addresses:
`python -m vwlab.preauth_flood hold 198.18.0.1:6653 --n 12500 --sources
198.18.0.100-149 --hold 12`. Prints one JSON line."""
import argparse
import errno
import ipaddress
import json
import resource
import selectors
import socket
import ssl
import time


# A client's requests timed, as a script for `python -c` in a namespace:
# argv URL TOKEN CA N; prints [{at, seconds, status}].
TIMED_GET = r'''
import json, sys, time, requests
url, token, ca = sys.argv[1:4]
out = []
for _ in range(int(sys.argv[4])):
    t = time.time()
    r = requests.get(url, headers={'Authorization': 'Bearer ' + token},
                     verify=ca, timeout=10)
    out.append({'at': t, 'seconds': time.time() - t, 'status': r.status_code})
    time.sleep(0.2)
print(json.dumps(out))
'''


def sources(spec):
    """'198.18.0.100-149' -> the 50 addresses; 'A,B' -> both."""
    out = []
    for part in spec.split(','):
        first, _, last = part.partition('-')
        a = ipaddress.ip_address(first)
        n = int(last) - int(first.rsplit('.', 1)[1]) + 1 if last else 1
        out += [str(a + i) for i in range(n)]
    return out


def _files(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE,
                       (max(soft, min(hard, n + 256)), hard))


def _open(host, port, src):
    s = socket.socket()
    s.settimeout(5)
    s.bind((src, 0))
    s.connect((host, port))
    return s


def hold(host, port, n, srcs, seconds, ready_file=None):
    _files(n)
    socks, errors = [], 0
    t0 = time.time()
    for i in range(n):
        try:
            socks.append(_open(host, port, srcs[i % len(srcs)]))
        except OSError:
            errors += 1
    connect_s = time.time() - t0
    if ready_file:
        open(ready_file, 'w').close()
    closed_at = _watch_closes(socks, time.time() + seconds)
    times = sorted(t - t0 for t in closed_at.values())
    out = {'t0': t0, 'opened': len(socks), 'connect_errors': errors,
           'connect_seconds': round(connect_s, 3),
           'closed_by_server': len(times),
           'closed_within_1s_of_opening': sum(
               1 for t in times if t <= connect_s + 1),
           'still_open': len(socks) - len(closed_at)}
    for s in socks:
        s.close()
    return out


def _watch_closes(socks, until):
    closed_at = {}
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    while time.time() < until and len(closed_at) < len(socks):
        for key, _ in sel.select(0.2):
            try:
                data = key.fileobj.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b''
            if not data:
                closed_at[key.fileobj.fileno()] = time.time()
                sel.unregister(key.fileobj)
    return closed_at


def client_hello():
    """The bytes a TLS client sends first (a real ClientHello)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_side=False)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


HEAD = b'GET /v1/status HTTP/1.1\r\nHost: x\r\nUser-Agent: ' + \
    b'd' * 200 + b'\r\n\r\n'


def drip(host, port, n, srcs, kind, every, seconds, ready_file=None):
    """Each connection sends one byte every `every` s until the server
    closes it or `seconds` pass."""
    _files(n)
    payload = client_hello() if kind == 'hello' else HEAD
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    conns, errors = [], 0
    t0 = time.time()
    for i in range(n):
        try:
            s = _open(host, port, srcs[i % len(srcs)])
            if kind == 'head':
                s = ctx.wrap_socket(s)
            conns.append({'s': s, 'sent': 0, 'last': None, 'closed': None})
        except OSError:
            errors += 1
    started = time.time()
    if ready_file:
        open(ready_file, 'w').close()
    end = started + seconds
    while time.time() < end:
        live = [c for c in conns if c['closed'] is None]
        if not live:
            break
        for c in live:
            if c['sent'] >= len(payload):
                continue
            try:
                c['s'].settimeout(0.05)
                c['s'].send(payload[c['sent']:c['sent'] + 1])
                c['sent'] += 1
                c['last'] = time.time()
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError,
                    socket.timeout) as e:
                if isinstance(e, socket.timeout):
                    continue
                c['closed'] = time.time()
            except OSError as e:
                if e.errno in (errno.EAGAIN,):
                    continue
                c['closed'] = time.time()
        _note_closes(live)
        time.sleep(every)
    _note_closes([c for c in conns if c['closed'] is None])
    closed = [c for c in conns if c['closed'] is not None]
    lives = [c['closed'] - started for c in closed]
    gaps = [c['closed'] - c['last'] for c in closed if c['last']]
    out = {'kind': kind, 'opened': len(conns), 'connect_errors': errors,
           'open_seconds': round(started - t0, 3),
           'closed_by_server': len(closed),
           'still_open': len(conns) - len(closed),
           'closed_after_min': round(min(lives), 2) if lives else None,
           'closed_after_max': round(max(lives), 2) if lives else None,
           # Proof the drip was live: each sent a byte this long before
           # the close, and none had sent its whole payload.
           'last_byte_before_close_max': round(max(gaps), 2) if gaps
           else None,
           'bytes_sent_min': min((c['sent'] for c in conns), default=0),
           'finished_payload': sum(1 for c in conns
                                   if c['sent'] >= len(payload)),
           'payload_bytes': len(payload)}
    for c in conns:
        c['s'].close()
    return out


def _note_closes(conns):
    """Mark connections the server has closed (EOF or reset on read)."""
    for c in conns:
        s = c['s']
        try:
            s.setblocking(False)
            data = s.recv(4096)
        except (BlockingIOError, ssl.SSLWantReadError):
            continue
        except OSError:
            data = b''
        finally:
            try:
                s.setblocking(True)
            except OSError:
                pass
        if not data:
            c['closed'] = time.time()


def main(argv=None):
    p = argparse.ArgumentParser(prog='vwlab.preauth_flood')
    p.add_argument('mode', choices=('hold', 'drip'))
    p.add_argument('target', help='HOST:PORT')
    p.add_argument('--n', type=int, default=1000)
    p.add_argument('--sources', required=True,
                   help="source addresses, e.g. '198.18.0.100-149'")
    p.add_argument('--hold', type=float, default=12.0,
                   help='seconds to keep the connections (hold) or drip')
    p.add_argument('--kind', choices=('hello', 'head'), default='hello')
    p.add_argument('--every', type=float, default=1.0)
    p.add_argument('--ready-file')
    a = p.parse_args(argv)
    host, _, port = a.target.rpartition(':')
    srcs = sources(a.sources)
    if a.mode == 'hold':
        out = hold(host, int(port), a.n, srcs, a.hold, a.ready_file)
    else:
        out = drip(host, int(port), a.n, srcs, a.kind, a.every, a.hold,
                   a.ready_file)
    print(json.dumps(out), flush=True)


if __name__ == '__main__':
    main()
