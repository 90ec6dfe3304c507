"""The controller's rendezvous: tells an extender the address and port the
outside sees its datagrams come from (what STUN's binding request does).

It listens on two UDP ports, P and P+1. An agent asks both from the one
local port it will use for a link: the same answer twice means its NAT
maps a local port to one public port whatever the destination (hole
punching works); two answers mean a new public port per destination
(symmetric: punching fails, a relay is needed).

What it protects and what not: it answers anyone, and only with what the
asker's own datagram showed, never with more bytes than it got (no
amplification: a request must be at least MIN_REQUEST bytes long, the
answer is shorter). A forged answer could only misdirect a link's first
packets; the link itself is authenticated by pinned certificates.
"""
import json
import logging
import socket

from os_ken.lib import hub

LOG = logging.getLogger(__name__)
MIN_REQUEST = 64


def answer(data: bytes, peer) -> bytes:
    """The reply to one request (b'' to ignore it). Pure."""
    if len(data) < MIN_REQUEST:
        return b''
    try:
        nonce = json.loads(data.decode()).get('nonce', '')
    except (ValueError, UnicodeDecodeError, AttributeError):
        return b''
    out = json.dumps({'observed': '%s:%d' % peer,
                      'nonce': str(nonce)[:16]}).encode()
    return out if len(out) <= len(data) else b''


def ask(sock, server, timeout=1.0):
    """From an agent's bound socket: the endpoint `server` (ip, port) saw
    it at, or None."""
    import secrets
    nonce = secrets.token_hex(8)
    req = json.dumps({'nonce': nonce}).encode().ljust(MIN_REQUEST)
    sock.settimeout(timeout)
    try:
        sock.sendto(req, server)
        while True:
            data, src = sock.recvfrom(2048)
            if src != server:
                continue
            doc = json.loads(data.decode())
            if doc.get('nonce') == nonce:
                return doc['observed']
    except (OSError, ValueError, KeyError):
        return None


class Rendezvous:
    def __init__(self, host, port):
        self.addrs = [(host, port), (host, port + 1)]
        self.socks = []

    def start(self):
        for a in self.addrs:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(a)
            self.socks.append(s)
            hub.spawn(self._serve, s)
        LOG.info('rendezvous on %s', ', '.join('%s:%d' % a
                                               for a in self.addrs))
        return self

    @staticmethod
    def _serve(s):
        while True:
            try:
                data, peer = s.recvfrom(2048)
                out = answer(data, peer)
                if out:
                    s.sendto(out, peer)
            except OSError as e:
                LOG.warning('rendezvous: %s', e)
