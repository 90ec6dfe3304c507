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


def kept_out(answers):
    """What says a real client was kept out (none, when well): an answer
    that is not a 200 or took over 3 s, or all of them when their median
    is over 1 s. One answer a little over 1 s is the machine, not a
    listener shut: CI once saw 1.06 s for the first of ten while 25,000
    connections were held, and 0.01-0.05 s for those after it; another
    run 1.23 s for the first of six while 1,100 were, then 0.05 s."""
    bad = [a for a in answers if a['status'] != 200 or a['seconds'] > 3.0]
    times = sorted(a['seconds'] for a in answers)
    if times and times[len(times) // 2] > 1.0:
        return list(answers)
    return bad


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
    closes it or `seconds` pass. Closes are seen as they happen (a
    selector, not a scan between sends), so a lifetime is the server's
    deadline plus this client's own lateness, which is reported too."""
    _files(n)
    payload = client_hello() if kind == 'hello' else HEAD
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    conns, errors = [], 0
    t0 = time.time()
    for i in range(n):
        try:
            s = _open(host, port, srcs[i % len(srcs)])
            opened = time.time()
            if kind == 'head':
                s = ctx.wrap_socket(s)
            conns.append({'s': s, 'opened': opened, 'sent': 0, 'last': None,
                          'closed': None})
        except OSError:
            errors += 1
    started = time.time()
    if ready_file:
        open(ready_file, 'w').close()
    late = _drip_until_closed(conns, payload, every, started + seconds)
    closed = [c for c in conns if c['closed'] is not None]
    lives = sorted(c['closed'] - c['opened'] for c in closed)
    gaps = [c['closed'] - c['last'] for c in closed if c['last']]
    out = {'kind': kind, 'opened': len(conns), 'connect_errors': errors,
           'open_seconds': round(started - t0, 3),
           'closed_by_server': len(closed),
           'still_open': len(conns) - len(closed),
           'closed_after_min': round(lives[0], 2) if lives else None,
           'closed_after_p50': round(lives[len(lives) // 2], 2)
           if lives else None,
           'closed_after_max': round(lives[-1], 2) if lives else None,
           # How late this (niced) client ran its sends: a bound on how
           # late it can have seen a close.
           'client_late_max': round(late, 2),
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


def _drip_until_closed(conns, payload, every, end):
    """Send a byte on each live connection every `every` s, and note
    each server close when it comes. Returns the worst lateness of a
    round of sends."""
    sel = selectors.DefaultSelector()
    for c in conns:
        c['s'].setblocking(False)
        sel.register(c['s'], selectors.EVENT_READ, c)
    live, late, due = len(conns), 0.0, time.time()
    while live and time.time() < end:
        now = time.time()
        if now >= due:
            late = max(late, now - due)
            for c in conns:
                if c['closed'] is None and c['sent'] < len(payload):
                    _send_byte(c, payload)
                    if c['closed'] is not None:     # reset while sending
                        sel.unregister(c['s'])
                        live -= 1
            due += every
        for key, _ in sel.select(max(0.0, min(due, end) - time.time())):
            c = key.data
            if not _server_open(c['s']):
                c['closed'] = time.time()
                sel.unregister(c['s'])
                live -= 1
    sel.close()
    return late


def _send_byte(c, payload):
    try:
        c['s'].send(payload[c['sent']:c['sent'] + 1])
    except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
        return
    except OSError:
        c['closed'] = time.time()
        return
    c['sent'] += 1
    c['last'] = time.time()


def _server_open(s):
    """False once the server has closed (EOF or reset on read)."""
    try:
        return bool(s.recv(4096))
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return True
    except OSError:
        return False


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
