"""Timings the controller observes as it works (REST, OVSDB, the event
loop, migrations), as Prometheus histograms in the controller's own
registry (never the library's global one: two controllers in one test
process must not share figures). Observing is thread-safe and cheap."""
import collections

from prometheus_client import (CollectorRegistry, Counter, Histogram, Info,
                               ProcessCollector)

from virtualwire import version

_FAST = (.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5)
_SLOW = (.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)


class Instruments:
    def __init__(self):
        self.registry = CollectorRegistry()
        r = self.registry
        build_info(r)
        self.rest = Histogram(
            'virtualwire_rest_request_duration_seconds',
            'REST requests, from arrival to the response built',
            ['method', 'route', 'code'], buckets=_FAST, registry=r)
        self.ovsdb = Histogram(
            'virtualwire_ovsdb_transaction_duration_seconds',
            'Transactions on the intent database, until committed',
            buckets=_FAST, registry=r)
        self.loop_lag = Histogram(
            'virtualwire_event_loop_lag_seconds',
            'How long events waited in the control loop before running',
            buckets=_FAST, registry=r)
        self.gc_pause = Histogram(
            'virtualwire_gc_pause_seconds',
            "The interpreter's garbage collections (the whole process "
            'waits for each), by generation', ['generation'],
            buckets=_FAST, registry=r)
        self.migration = Histogram(
            'virtualwire_migration_duration_seconds',
            'Live migrations, from the announcement to their end',
            ['outcome'], buckets=_SLOW, registry=r)
        self.activation = Histogram(
            'virtualwire_migration_activation_seconds',
            "From a migration's announcement to each vNIC's activation on "
            'the destination (the copy dominates it)',
            ['trigger'], buckets=_SLOW, registry=r)
        self.migrations = Counter(
            'virtualwire_migrations',
            'Live migrations that ended, by outcome', ['outcome'],
            registry=r)
        self._ended = collections.OrderedDict()

    def gc_paused(self, generation, seconds):
        self.gc_pause.labels(str(generation)).observe(seconds)

    def migration_changed(self, rec):
        """A migration record (`Migration.view()`) saved: observed once,
        when it has ended."""
        if rec.get('ended_at') is None or rec['id'] in self._ended:
            return
        self._ended[rec['id']] = True
        while len(self._ended) > 1000:
            self._ended.popitem(last=False)
        self.migrations.labels(rec['state']).inc()
        self.migration.labels(rec['state']).observe(
            max(0.0, rec['ended_at'] - rec['started_at']))
        for v, at in rec.get('activated', {}).items():
            self.activation.labels(rec.get('activated_by', {}).get(
                v, 'unknown')).observe(max(0.0, at - rec['started_at']))


def build_info(registry):
    """virtualwire_build_info{version,python,os_ken,ovs_python,hub} 1 and
    the process_* series (CPU, memory, open files) in `registry`: what an
    operator checks first after an upgrade."""
    Info('virtualwire_build', 'This process: VirtualWire and what it runs '
         'on', registry=registry).info(version.build_info())
    ProcessCollector(registry=registry)
