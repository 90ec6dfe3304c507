"""/metrics in the Prometheus text format (prometheus_client): the
collector's per-wire and per-host counters, hosts, migrations and
extender links as the loop sees them at scrape time, plus the
controller's own timings (`instruments`).

Names and units follow Prometheus conventions: `_total` counters, seconds
and bytes. What describes a wire (its ends, state, sites) is an info
series, `virtualwire_wire_info`, so that a wire's counters keep one
series while its state changes (join on `wire` in PromQL)."""
import tempfile

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    InfoMetricFamily)

CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'
PAGE = 2000             # wires per page of /metrics
SPOOL = 4 << 20         # bytes of a family's text kept in memory


class LoopCollector:
    """A prometheus_client collector reading the controller on its loop."""

    def __init__(self, loop, controller, intent=None):
        self.loop, self.ctl, self.intent = loop, controller, intent

    def describe(self):
        return []               # unchecked: families depend on the state

    def collect(self):
        # The wires' series come a page at a time (`wire_exposition`).
        doc = self.loop.call(self.ctl.views.metrics_view, False)
        yield from switch_families(doc['switches'])
        yield from host_families(doc['hosts'])
        yield from other_families(doc)
        yield from role_families(doc, self.intent)


def role_families(doc, intent):
    """What the alerting rules (ops/prometheus) ask of each instance: does
    it lead, and does it reach the intent database."""
    yield GaugeMetricFamily('virtualwire_controller_active',
                            '1 if this instance leads (writes switches), 0 '
                            'if it stands by', value=int(doc['active']))
    if intent is not None:
        yield GaugeMetricFamily('virtualwire_intent_db_connected',
                                '1 if this instance reaches a member of the '
                                'intent database', value=int(intent.connected()))


class MembersCollector:
    """Each intent-database member's word on itself (`store.members`)."""

    def __init__(self, probe):
        self.probe = probe

    def describe(self):
        return []

    def collect(self):
        yield from member_families(self.probe.state)


def member_families(state):
    up = GaugeMetricFamily(
        'virtualwire_intent_db_member_up', '1 if this member of the intent '
        'database answers and is connected to its cluster',
        labels=['member'])
    leader = GaugeMetricFamily(
        'virtualwire_intent_db_member_leader', '1 if this member is the '
        "cluster's leader (a standalone server is its own)",
        labels=['member'])
    for m, s in sorted(state.items()):
        up.add_metric([m], int(s['up']))
        leader.add_metric([m], int(s['leader']))
    yield up
    yield leader


def wire_families(wires):
    info = InfoMetricFamily('virtualwire_wire', 'What a wire joins',
                            labels=['wire'])
    fams = {}
    for name, help_, unit_key in (
            ('entered_packets', 'Frames taken in at the sending end', None),
            ('entered_bytes', 'Bytes taken in at the sending end', None),
            ('delivered_packets', "Frames handed to the far end's port",
             None),
            ('delivered_bytes', "Bytes handed to the far end's port", None),
            ('held_packets', 'Frames dropped on a destination waiting for '
             'activation (a copy went to the source)', None)):
        fams[name] = CounterMetricFamily(
            'virtualwire_wire_' + name, help_, labels=['wire', 'direction'])
    lost = CounterMetricFamily(
        'virtualwire_wire_lost_packets',
        'Frames that entered and can no longer be delivered: lost beyond '
        'doubt, never more than were (never goes down)',
        labels=['wire', 'direction'])
    unsettled = GaugeMetricFamily(
        'virtualwire_wire_unsettled_packets',
        'Frames entered and neither delivered nor lost beyond doubt yet '
        '(in flight, not counted yet, or counts a switch lost)',
        labels=['wire', 'direction'])
    for w in wires:
        wid = w['connector_id']
        info.add_metric([wid], {
            'end_a': w['end_a'], 'end_b': w['end_b'], 'state': w['state'],
            'site_a': w.get('site_a') or '', 'site_b': w.get('site_b') or ''})
        for d in ('a_to_b', 'b_to_a'):
            c = (w.get('counters') or {}).get(d)
            if c is None:
                continue
            for name, fam in fams.items():
                fam.add_metric([wid, d], c[name])
            lost.add_metric([wid, d], c['lost_packets'])
            unsettled.add_metric([wid, d], c['unsettled_packets'])
    yield info
    yield from fams.values()
    yield lost
    yield unsettled


def switch_families(switches):
    """Provider switches: what each is, and its ports' counters
    (`metrics.switch_ports`); a port whose host was not read yet has no
    series rather than zeros."""
    info = InfoMetricFamily('virtualwire_provider_switch',
                            'A switch the provider runs in a host',
                            labels=['switch'])
    fams = {k: CounterMetricFamily('virtualwire_provider_switch_port_' + k,
                                   help_, labels=['switch', 'port'])
            for k, help_ in (
                ('entered_packets', 'Frames that entered the switch on '
                 'the port'),
                ('delivered_packets', 'Frames the switch sent out of the '
                 'port onto its wire'),
                ('flooded_packets', 'Frames from the port flooded to every '
                 'other port (broadcast, multicast, unknown destination)'))}
    macs = GaugeMetricFamily(
        'virtualwire_provider_switch_port_learned_macs',
        'MACs the switch learned on the port now', labels=['switch', 'port'])
    for sw in switches:
        info.add_metric([sw['name']], {'tenant': sw['tenant'],
                                       'host': sw.get('host') or ''})
        for p in sw['ports']:
            c = p.get('counters')
            if c is None:
                continue
            for k, fam in fams.items():
                if c[k] is not None:
                    fam.add_metric([sw['name'], p['name']], c[k])
            macs.add_metric([sw['name'], p['name']], c['learned_macs'])
    yield info
    yield from fams.values()
    yield macs


def host_families(hosts):
    up = GaugeMetricFamily('virtualwire_host_connected',
                           "1 if the host's switch is connected",
                           labels=['host', 'site', 'role'])
    synced = GaugeMetricFamily('virtualwire_host_synced',
                               '1 once its flow table is known and kept',
                               labels=['host'])
    flows = GaugeMetricFamily('virtualwire_host_flows',
                              'Flows the controller keeps on the host',
                              labels=['host'])
    drops = CounterMetricFamily(
        'virtualwire_host_dropped_packets',
        'Frames the switch dropped: rejected (tunnel frames no wire '
        'accepts from that source), unwired (from ports no wire has), '
        'held (waiting for a migration to activate)',
        labels=['host', 'reason'])
    expiry = GaugeMetricFamily(
        'virtualwire_host_certificate_expiry_seconds',
        "When the certificate the host's switch presented expires (Unix "
        'time; connected hosts over TLS)', labels=['host'])
    for h in hosts:
        if h.get('certificate_expires_at') is not None:
            expiry.add_metric([h['name']], h['certificate_expires_at'])
        up.add_metric([h['name'], h['site'], h['role']], int(h['connected']))
        synced.add_metric([h['name']], int(h['synced']))
        flows.add_metric([h['name']], h['flows'])
        for reason in ('rejected', 'unwired', 'held'):
            drops.add_metric([h['name'], reason],
                             h['drops'][reason + '_packets'])
    yield from (up, synced, flows, drops, expiry)


def other_families(doc):
    refused = CounterMetricFamily(
        'virtualwire_vnic_claims_refused',
        'Times a host plugged a vNIC the cloud placed on another host (or, '
        'strict, not at all) '
        '(refused: its traffic stayed there)', labels=['host'])
    for host, n in sorted(doc.get('claims_refused', {}).items()):
        refused.add_metric([host], n)
    yield refused
    departures = CounterMetricFamily(
        'virtualwire_moves_not_believed',
        'Announced migrations to a host that its source\'s report could '
        'not authorize (another address, another host\'s vNIC)',
        labels=['host'])
    for host, n in sorted(doc.get('departures_refused', {}).items()):
        departures.add_metric([host], n)
    yield departures
    takeovers = CounterMetricFamily(
        'virtualwire_switch_takeovers_refused',
        'Second connections with a connected switch\'s certificate refused '
        'because the connected one answered (its key is in two places)',
        labels=['host'])
    for host, n in sorted(doc.get('takeovers_refused', {}).items()):
        takeovers.add_metric([host], n)
    yield takeovers
    mig = GaugeMetricFamily('virtualwire_migrations_in_state',
                            'Migrations the controller knows, by state',
                            labels=['state'])
    for state, n in sorted(doc['migrations'].items()):
        mig.add_metric([state], n)
    yield mig
    links = GaugeMetricFamily('virtualwire_extender_link_up',
                              '1 if both extenders report the link up',
                              labels=['a', 'b'])
    rtt = GaugeMetricFamily('virtualwire_extender_link_rtt_seconds',
                            "The link's round trip, as its agent measured",
                            labels=['a', 'b'])
    for k in doc['links']:
        links.add_metric([k['a'], k['b']], int(k['state'] == 'up'))
        side = k['sides'].get(k['a']) or {}
        if side.get('rtt_ms') is not None:
            rtt.add_metric([k['a'], k['b']], side['rtt_ms'] / 1000.0)
    yield links
    yield rtt
    c = doc['collector']
    yield GaugeMetricFamily('virtualwire_collector_cycle_seconds',
                            'How long the last flow-counter reading took',
                            value=(c['took_ms'] or 0) / 1000.0)
    yield GaugeMetricFamily('virtualwire_collector_pace_seconds',
                            'Seconds between readings now: the interval '
                            'set, or more when a reading costs more than '
                            'a quarter of that',
                            value=c['pace_s'] or 0)
    yield GaugeMetricFamily('virtualwire_collector_flows',
                            'Flows read in all cycles so far',
                            value=c['flows'])


def exposition(registry):
    return generate_latest(registry)


def wire_exposition(pages, pause=lambda: None):
    """The wire families' text from `pages` (lists of wire metric views),
    one page's objects at a time: pause() after each lets the hub run the
    rest of the controller. The text format wants each family's samples
    together, so each family's text waits in a spool of its own (memory
    up to SPOOL each, then a file). At 100,000 wires the one-piece answer
    held the loop about 17 s and 850 MiB; every switch hung up."""
    spools: list = []
    for page in pages:
        texts = [generate_latest(Fixed([f])) for f in wire_families(page)]
        if not spools:
            spools = [tempfile.SpooledTemporaryFile(max_size=SPOOL)
                      for _ in texts]
        for spool, text in zip(spools, texts):
            # After its first page a family's HELP and TYPE lines go.
            spool.write(text.split(b'\n', 2)[2] if spool.tell() else text)
        pause()
    if not spools:
        yield generate_latest(Fixed(list(wire_families([]))))
    for spool in spools:
        spool.seek(0)
        yield from iter(lambda: spool.read(1 << 16), b'')
        spool.close()


class Fixed:
    """A prometheus_client collector of families made beforehand."""

    def __init__(self, families):
        self.families = families

    def collect(self):
        return self.families


def scoped_exposition(doc):
    """A tenant's switches of a metrics view already cut to its own
    (`core.tenancy.Scope.metrics`): no host, link, migration, collector
    or controller series. Its wires come page by page, cut the same way
    (`wire_pages`)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed(list(switch_families(doc.get('switches', [])))))
    return generate_latest(registry)


def wire_pages(call, views, keep=None, page=None):
    """Pages of wire metric views, each read on the loop by `call` (the
    loop runs everything else between two); `keep` cuts each page."""
    page = page or PAGE
    cids = call(views.wire_ids)
    for i in range(0, len(cids), page):
        rows = call(views.wire_metrics, cids[i:i + page])
        yield keep(rows) if keep else rows
