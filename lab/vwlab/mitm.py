"""A man in the middle of an extender's control channel: an HTTPS server
with a certificate that names the controller's address but comes from
another CA, answering every report with an offer of its own (a link to
an attacker's key and endpoint). Run it with `python -m vwlab.mitm`; it
writes one JSON line per connection it accepts, per failed handshake and
per request it is sent (with the request's Authorization header), so a
test can tell "the agent dialled it and refused it" from "nothing
reached it"."""
import argparse
import http.server
import json
import ssl
import sys
import threading

_lock = threading.Lock()


def _log(log_file, **entry):
    with _lock, open(log_file, 'a') as f:
        f.write(json.dumps(entry) + '\n')


def make_server(listen, key, cert, offer, log):
    """The impostor, not yet serving (`serve_forever` on a thread, or
    `serve` below)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    body = json.dumps(offer).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            _log(log, event='request', path=self.path,
                 authorization=self.headers.get('Authorization'))
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    class Server(http.server.ThreadingHTTPServer):
        def get_request(self):
            sock, addr = self.socket.accept()
            _log(log, event='connection', peer=addr[0])
            try:
                return ctx.wrap_socket(sock, server_side=True), addr
            except (ssl.SSLError, OSError) as e:
                _log(log, event='handshake failed', peer=addr[0],
                     why=str(e))
                sock.close()
                raise

    host, _, port = listen.rpartition(':')
    return Server((host, int(port)), Handler)


def serve(listen, key, cert, offer, log):
    make_server(listen, key, cert, offer, log).serve_forever()


def events(log):
    """What the impostor saw: its log's entries."""
    try:
        with open(log) as f:
            return [json.loads(x) for x in f]
    except FileNotFoundError:
        return []


def main(argv=None):
    p = argparse.ArgumentParser(prog='vwlab.mitm')
    p.add_argument('--listen', required=True, help='IP:PORT')
    p.add_argument('--key', required=True)
    p.add_argument('--cert', required=True)
    p.add_argument('--offer', required=True, help='the JSON it answers')
    p.add_argument('--log', required=True)
    a = p.parse_args(argv)
    serve(a.listen, a.key, a.cert, json.loads(a.offer), a.log)


if __name__ == '__main__':
    sys.exit(main())
