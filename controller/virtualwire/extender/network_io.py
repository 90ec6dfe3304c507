"""The extender agent's edges to the network outside its links: the
controller's southbound REST, the rendezvous probe that finds a link
port's public endpoint and the NAT's kind, the host's own addresses, the
datagram that starts a handshake at once, and a link's round-trip time."""
import json
import socket
import ssl
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from typing import Optional

from virtualwire.southbound.rendezvous import ask as rendezvous_ask


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib follows a POST's 301/302/303 to any URL, http:// included,
    carrying the Authorization header: never. The 3xx is raised instead
    (HTTPError), and ControllerClient follows a 307/308 only to one of
    its own controllers."""

    def redirect_request(self, *args, **kwargs):
        return None


def check_urls(urls, plain_ok):
    """Every URL (not just the first) is https:// (scheme in any case),
    or http:// where `plain_ok`; ValueError saying which is not."""
    for u in urls:
        scheme = urllib.parse.urlsplit(u).scheme.lower()
        if scheme == 'https' or (scheme == 'http' and plain_ok):
            continue
        raise ValueError(
            '%s is %s: the token would cross the network in the clear '
            '(use https://)' % (u, 'plain HTTP' if scheme == 'http' else
                                'not an https:// URL'))


class ControllerClient:
    """The controller's southbound REST, as the agent uses it. Over
    HTTPS the controller's certificate must chain to `ca_cert` (the
    controller CA, pinned: not the system's CAs) and name the address
    dialled: peers' keys and endpoints arrive only from the controller.
    `url`: one controller or every instance of an HA set, comma-separated;
    a standby's 307 is followed only to one of them. `token` None: no
    Authorization header (a host enrolling has none yet)."""

    def __init__(self, url, token, ca_cert=None):
        self.urls = [u.strip().rstrip('/') for u in url.split(',')
                     if u.strip()]
        self.url, self.token = self.urls[0], token
        self.context = ssl.create_default_context(cafile=ca_cert) \
            if ca_cert else None
        self.opener = urllib.request.build_opener(
            _NoRedirect, urllib.request.HTTPSHandler(context=self.context))

    def report(self, name, doc):
        return self.post('/v1/extenders/%s/report' % name, doc)

    def post(self, path, doc):
        order = [self.url] + [u for u in self.urls if u != self.url]
        last: Exception = urllib.error.URLError('no controller configured')
        hops = 0
        while order:
            url = order.pop(0)
            headers = {'Content-Type': 'application/json'}
            if self.token is not None:
                headers['Authorization'] = 'Bearer ' + self.token
            req = urllib.request.Request(
                url + path, method='POST', data=json.dumps(doc).encode(),
                headers=headers)
            try:
                # Every 3xx is raised (_NoRedirect), never followed.
                with self.opener.open(req, timeout=5) as r:
                    self.url = url
                    return json.loads(r.read())
            except urllib.error.HTTPError as e:
                if e.code in (307, 308) and hops < len(self.urls):
                    hops += 1
                    leader = '/'.join(
                        (e.headers.get('Location') or '').split('/')[:3])
                    if leader not in self.urls:
                        raise urllib.error.URLError(
                            '%s redirected to %r, not one of our '
                            'controllers: not followed' % (url, leader))
                    order = [leader] + [u for u in order if u != leader]
                    last = e
                    continue
                if e.code == 503 and order:      # no leader there yet
                    last = e
                    continue
                raise
            except (urllib.error.URLError, OSError) as e:
                last = e
        raise last


def probe(port, rendezvous, local_ips):
    """(public endpoint, NAT kind) of local UDP `port`, asked from it at
    both rendezvous ports; (None, 'unknown') if it cannot be asked (the
    port is in use, or no answer)."""
    host, rport = rendezvous
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(('0.0.0.0', port))
    except OSError:
        s.close()
        return None, 'unknown'
    try:
        seen = [rendezvous_ask(s, (host, rport)),
                rendezvous_ask(s, (host, rport + 1))]
    finally:
        s.close()
    if not seen[0]:
        return None, 'unknown'
    if seen[0].rpartition(':')[0] in local_ips:
        return seen[0], 'public'
    return seen[0], ('endpoint-independent' if seen[0] == seen[1]
                     else 'symmetric')


def local_addresses():
    out = subprocess.run(['ip', '-o', '-4', 'addr'], capture_output=True,
                         text=True).stdout
    return {f.split('/')[0] for line in out.splitlines()
            for f in line.split()[3:4]}


def nudge(ip):
    """One datagram into the tunnel: the daemon starts its handshake now,
    not at its first keepalive (boringtun waits that long)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b'\0', (ip, 9))            # discard
    except OSError:
        pass
    finally:
        s.close()


def rtt_ms(ip) -> Optional[float]:
    p = subprocess.run(['ping', '-n', '-c', '1', '-W', '1', ip],
                       capture_output=True, text=True)
    for part in p.stdout.split():
        if part.startswith('time='):
            return float(part[5:])
    return None
