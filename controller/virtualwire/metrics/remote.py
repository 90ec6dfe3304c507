"""The controller's view of a collector process (`collectord`): a mirror of
its figures, kept by a long poll outside the control loop, answering the
controller's views exactly as the in-process collector does
(`metrics.collector.Collector`: wire, totals, host, status, check_ready).

The loop never waits on the collector: `_run` fetches what changed since
the last generation (the collector answers when its next sample is taken)
and posts it to the loop, which owns the mirror. Several collector URLs
may be given: the first that answers is used until it stops answering.
A standby controller mirrors too, so it shows the same counters as the
leader, and a takeover finds them already there.
"""
import functools
import http.client
import json
import logging
import os
import socket
import ssl
import time
import urllib.parse

from os_ken.lib import hub

from virtualwire.core import errors
from virtualwire.metrics.counters import DIRECTIONS
from virtualwire.metrics.figures import flat
from virtualwire.metrics.switch_ports import SwitchPorts
from virtualwire import netns

LOG = logging.getLogger(__name__)
TIMEOUT = 10.0


class RemoteCollector:
    def __init__(self, loop, urls, token, verify=True, interval=2.0,
                 clock=time.time):
        self.loop, self.urls, self.token = loop, list(urls), token
        self.verify, self.interval, self.clock = verify, interval, clock
        self.mirror: dict = {}       # cid -> figures, as the collector's
        self.hosts: dict = {}
        self.switch_ports = SwitchPorts()
        self.remote_status: dict = {}
        self.epoch, self.gen = '', 0
        self.ready = False
        self.url = None              # the one answering
        self.ok_at = None
        self.error = None
        self._thread = None

    # -- the controller's calls (on the loop) --------------------------------
    def start(self):
        if self._thread is None:
            self._thread = hub.spawn(self._run)

    def due(self):
        """The process reads switches; nothing to do here."""

    def on_dump(self, host, body):
        """The process reads every switch itself."""

    def on_flow_removed(self, host, msg):
        """The process hears flow-removed messages itself (as SLAVE)."""

    def save(self):
        """The process saves its own counter base."""

    def check_ready(self):
        if not self._fresh():
            raise errors.Unavailable(
                'no flow counters from the collector: %s' % (
                    self.error or '%s not read yet' % ', '.join(self.urls)))
        if not self.ready:
            raise errors.Unavailable('no flow counters read yet (the '
                                     'collector reads every %gs)'
                                     % self.interval)

    def _fresh(self):
        # The collector answers at each of its samples (every interval): a
        # mirror whose last call failed, or that heard nothing for a few
        # intervals, is not shown as if it were current.
        return self.ok_at is not None and self.error is None and \
            self.clock() - self.ok_at < max(5.0, 4 * self.interval)

    def totals(self, cid):
        if not (self.ready and self._fresh()):
            return None
        w = self.wire_figures(cid)
        return {d: {k: v for k, v in f.items() if k != 'window'}
                for d, f in w.items()}

    def wire(self, cid):
        self.loop.assert_owner()
        self.check_ready()
        return self.wire_figures(cid)

    def wire_figures(self, cid):
        w = self.mirror.get(cid)
        if w is not None:
            return {d: dict(f) for d, f in w.items()}
        zero = {d: (0, 0, 0, 0) for d, _, _ in DIRECTIONS}
        still = flat(self.clock(), zero, (0, 0))
        return {d: {'entered_packets': 0, 'entered_bytes': 0,
                    'delivered_packets': 0, 'delivered_bytes': 0,
                    'held_packets': 0, 'lost_packets': 0,
                    'unsettled_packets': 0, 'loss_cuts': 0,
                    'window': still[d]} for d, _, _ in DIRECTIONS}

    def switch_counts(self, host, number):
        if not (self.ready and self._fresh()):
            return None
        return self.switch_ports.of(host, number)

    def host(self, name):
        return self.hosts.get(name) or {
            k + s: 0 for k in ('rejected', 'unwired', 'held')
            for s in ('_packets', '_bytes')}

    def status(self):
        return dict(self.remote_status, interval=self.interval,
                    ready=self.ready and self._fresh(), process=self.url,
                    mirrored_wires=len(self.mirror),
                    last_answer_age_s=round(self.clock() - self.ok_at, 3)
                    if self.ok_at else None, error=self.error)

    def apply(self, url, doc):
        """A feed from the collector (on the loop)."""
        full = doc['full'] or doc['epoch'] != self.epoch
        if full:
            self.mirror = {}
        # (A collector older than provider switches sends none.)
        self.switch_ports.apply(doc.get('switch_ports', {}), full)
        for cid, figures in doc['wires'].items():
            if figures is None:         # never counted: zeros (wire_figures)
                self.mirror.pop(int(cid), None)
            else:
                self.mirror[int(cid)] = figures
        self.hosts = doc['hosts']
        self.remote_status = doc['status']
        self.epoch, self.gen = doc['epoch'], doc['gen']
        self.ready = bool(doc['ready'])
        self.url, self.ok_at, self.error = url, self.clock(), None

    def failed(self, why):
        self.error = why

    # -- the long poll (its own green thread) --------------------------------
    def _run(self):
        k = 0
        while True:
            url = self.urls[k % len(self.urls)]
            try:
                doc = self._get(url, {
                    'epoch': self.epoch if url == self.url else '',
                    'since': self.gen, 'wait': TIMEOUT})
                self.loop.post(self.apply, url, doc)
                hub.sleep(0.05)     # let the loop take it before asking
            except Exception as e:      # noqa: BLE001 (retried, next URL)
                why = '%s: %s' % (url, e or type(e).__name__)
                LOG.warning('collector unreachable: %s', why)
                self.loop.post(self.failed, why)
                k += 1
                hub.sleep(min(1.0, self.interval))

    def _get(self, url, params):
        u = urllib.parse.urlsplit(url)
        conn = _connection(u, self.verify, TIMEOUT + 5)
        try:
            conn.request('GET', '%s/v1/counters?%s' % (
                u.path.rstrip('/'), urllib.parse.urlencode(params)),
                headers={'Authorization': 'Bearer ' + self.token})
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                raise IOError('answered %d: %s' % (r.status, body[:200]))
            return json.loads(body)
        finally:
            conn.close()


@functools.lru_cache(maxsize=4)
def _context(cafile, mtime):
    """One TLS context per CA file (made again when the file changes):
    making one loads the CA and the system's certificates, 3% of the
    controller's CPU when made per poll in a 100,000-wire run."""
    return ssl.create_default_context(cafile=cafile)


def _connection(u, verify, timeout):
    """An HTTP(S) connection whose socket is made in the namespace the
    controller started in (`southbound.netns`): the collector's API is
    reached from there, as clients reach ours, not from the southbound
    namespace the process moved into."""
    def home_socket(self):
        with netns.at_home():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect((self.host, self.port))
        return sock

    if u.scheme == 'https':
        cafile = verify if isinstance(verify, str) else None
        ctx = _context(cafile, os.stat(cafile).st_mtime_ns if cafile else 0)

        class Https(http.client.HTTPSConnection):
            def connect(self):
                self.sock = ctx.wrap_socket(home_socket(self),
                                            server_hostname=self.host)
        # The context given, or http.client makes a default one per
        # connection: it loads the system's certificates, and held the
        # whole process (every green thread) 200-370 ms a poll in the
        # migration bench, a migration's answers waiting behind it.
        return Https(u.hostname, u.port or 443, timeout=timeout,
                     context=ctx)

    class Http(http.client.HTTPConnection):
        def connect(self):
            self.sock = home_socket(self)
    return Http(u.hostname, u.port or 80, timeout=timeout)
