"""An idle-connection flood, as an attacker runs it against a server: many
connections that say nothing (or, over TLS, finish the handshake and send
half a request), held open; then how many of them the server closed, and
when. Run in a namespace: `python -m vwlab.flood HOST:PORT --n 1000`.
Prints one JSON line."""
import argparse
import json
import resource
import selectors
import socket
import ssl
import time


def flood(host, port, n, hold, half_tls=0, ready_file=None):
    """Open `n` connections (the first `half_tls` of them also finish a
    TLS handshake, certificate unchecked, and send half a request), keep
    them `hold` seconds; returns what the server did with them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, n + 64)),
                                                hard))
    socks, opened, errors = [], 0, 0
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    t0 = time.time()
    refused_at = []         # TLS connections the server closed at once
    for i in range(n):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect((host, port))
        except OSError:
            errors += 1
            s.close()
            continue
        opened += 1
        if i < half_tls:
            try:
                s = ctx.wrap_socket(s)
                s.sendall(b'GET /v1/status HTTP/1.1\r\nHost: x\r\n')
            except OSError:
                refused_at.append(time.time() - t0)
                s.close()
                continue
        s.setblocking(False)
        socks.append(s)
    connect_s = time.time() - t0
    if ready_file:
        open(ready_file, 'w').close()
    closed_at = {}
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    end = time.time() + hold
    while time.time() < end and len(closed_at) < len(socks):
        for key, _ in sel.select(0.2):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except ssl.SSLWantReadError:
                continue
            except OSError:
                data = b''
            if not data:
                closed_at[s.fileno()] = time.time() - t0
                sel.unregister(s)
    times = sorted(list(closed_at.values()) + refused_at)
    out = {'t0': t0, 'opened': opened, 'connect_errors': errors,
           'connect_seconds': round(connect_s, 3),
           'closed_by_server': len(times),
           'still_open': len(socks) - len(closed_at),
           'closed_within_1s': sum(1 for t in times if t <= connect_s + 1),
           'last_closed_at': round(times[-1], 3) if times else None}
    for s in socks:
        s.close()
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog='vwlab.flood')
    p.add_argument('target', help='HOST:PORT')
    p.add_argument('--n', type=int, default=1000)
    p.add_argument('--hold', type=float, default=5.0)
    p.add_argument('--half-tls', type=int, default=0)
    p.add_argument('--ready-file', help='touched once all are open')
    a = p.parse_args(argv)
    host, _, port = a.target.rpartition(':')
    print(json.dumps(flood(host, int(port), a.n, a.hold, a.half_tls,
                           a.ready_file)), flush=True)


if __name__ == '__main__':
    main()
