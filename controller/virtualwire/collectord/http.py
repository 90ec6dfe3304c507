"""The collector process's HTTP(S) API (WebOb + Routes, as the
controller's), every call with its own bearer token (`--token-file`):
read-only figures for controllers and Prometheus, nothing that changes
anything.

- GET /v1/counters?epoch=E&since=G&wait=S: figures of the wires that
  changed since generation G of epoch E (every wire for another epoch),
  waiting up to S seconds (at most 30) for the next sample when nothing
  did: what controllers mirror (`metrics.remote`).
- GET /v1/status: the pollers and the process (CPU, memory).
- GET /metrics: the same for Prometheus.
"""
import hmac
import json
import resource
import time

import routes
import webob
import webob.dec
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from os_ken.lib import hub

from virtualwire.metrics.exporter import Fixed
from virtualwire.metrics.instruments import build_info

MAX_WAIT = 30.0


def process_figures():
    """CPU seconds (user + system) and resident memory of this process."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    rss = 0
    try:
        with open('/proc/self/statm') as f:
            rss = int(f.read().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        pass
    return {'cpu_seconds': round(ru.ru_utime + ru.ru_stime, 3),
            'rss_bytes': rss}


class CollectorApi:
    def __init__(self, loop, fleet, token, has_lock=lambda: True,
                 refusals=None):
        self.loop, self.fleet, self.token = loop, fleet, token
        self.refusals = refusals    # the listeners' (listen_guard)
        self.has_lock = has_lock
        self.sampled = hub.Event()
        fleet.on_sample = self._sampled
        self.mapper = routes.Mapper()
        self.mapper.connect('/v1/counters', action='counters')
        self.mapper.connect('/v1/status', action='status')
        self.mapper.connect('/metrics', action='metrics')

    def _sampled(self):
        # Wake every waiting request; later ones wait on a new event.
        ev, self.sampled = self.sampled, hub.Event()
        ev.set()

    @webob.dec.wsgify
    def __call__(self, req):
        match = self.mapper.match(req.path_info)
        if match is None:
            return _error(404, 'no such resource: %s' % req.path_info)
        if req.method != 'GET':
            return _error(405, '%s takes GET only' % req.path_info)
        given = req.headers.get('Authorization', '')
        if not hmac.compare_digest(given.encode(),
                                   ('Bearer ' + self.token).encode()):
            return _error(401, 'a bearer token (the collector\'s token '
                          'file) is needed')
        return getattr(self, match['action'])(req)

    def counters(self, req):
        try:
            since = int(req.params.get('since', '0'))
            wait = min(float(req.params.get('wait', '0')), MAX_WAIT)
        except ValueError:
            return _error(400, 'since must be a whole number and wait a '
                          'number of seconds')
        epoch = req.params.get('epoch', '')
        ev = self.loop.call(lambda: self.sampled if (
            epoch == self.fleet.epoch and since >= self.fleet.gen) else None)
        if ev is not None and wait > 0:
            ev.wait(wait)
        doc = self.loop.call(self.fleet.feed, epoch, since)
        doc['status'].update(process_figures(), has_lock=self.has_lock())
        return _json(doc)

    def status(self, req):
        doc = self.loop.call(self.fleet.status)
        doc.update(process_figures(), has_lock=self.has_lock(),
                   time=time.time())
        return _json(doc)

    def metrics(self, req):
        doc = self.loop.call(self.fleet.status)
        reg = CollectorRegistry(auto_describe=False)
        build_info(reg)
        reg.register(Fixed(list(_families(doc, process_figures()))))
        if self.refusals is not None:
            reg.register(self.refusals)
        return webob.Response(body=generate_latest(reg),
                              content_type='text/plain', charset='utf-8')


def _families(doc, proc):
    yield CounterMetricFamily('virtualwire_collector_readings',
                              'Flow tables read', value=doc['readings'])
    yield CounterMetricFamily('virtualwire_collector_flow_removed',
                              'Flow-removed messages taken',
                              value=doc['flow_removed'])
    yield GaugeMetricFamily('virtualwire_collector_switches',
                            'Switches connected', value=doc['switches'])
    yield CounterMetricFamily('virtualwire_collector_switches_refused',
                              'Switch connections refused: a certificate '
                              'not naming the datapath\'s host, or revoked',
                              value=doc['switches_refused'])
    yield GaugeMetricFamily('virtualwire_collector_busy_wires',
                            'Wires whose counts moved in the last window',
                            value=doc['busy_wires'])
    yield CounterMetricFamily('virtualwire_collector_cpu_seconds',
                              'CPU time of the collector process',
                              value=proc['cpu_seconds'])
    yield GaugeMetricFamily('virtualwire_collector_resident_memory_bytes',
                            'Resident memory of the collector process',
                            value=proc['rss_bytes'])


def _json(doc, status=200):
    return webob.Response(status=status, content_type='application/json',
                          charset='utf-8', body=json.dumps(doc).encode())


def _error(status, message):
    return _json({'error': message}, status)
