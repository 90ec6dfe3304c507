"""A host certificate's expiry, as operators watch it: the controller
reads it from the certificate the switch presents, shows it per host,
warns in `vwctl hosts` 30 days ahead, exports it, and the alerting rule
fires in a real Prometheus for a host whose certificate is near its end
(and for no other)."""
import os
import time

from vwtest import wait_until
from vwtest.migration import vwctl
from test_metrics import RULES
from vwlab.prometheus import Prometheus

DAY = 86400


def expires_at(api, name):
    return api.ok('GET', '/v1/hosts/%s' % name)['certificate_expires_at']


def reconnect(lab, host, extra=()):
    """Re-bootstrap a host (vw-host-setup) after dropping its controller
    targets, so its switch connects again with the files it is given."""
    host.vsctl('del-controller', 'br-int')
    host.bootstrap(extra=list(extra))


def test_a_certificate_near_its_end_is_warned_of_exported_and_alerted(
        lab, api, tmp_path):
    h1, _h2, h3 = lab.hosts
    # vw-pki's default: 825 days.
    assert abs(expires_at(api, 'h1') - (time.time() + 825 * DAY)) < 2 * DAY
    key, cert = lab.pki.issue('h3', out=os.path.join(lab.pki.dir, 'h3-short'),
                              days=10)
    try:
        reconnect(lab, h3, ['--ssl-key', key, '--ssl-cert', cert])
        wait_until(lambda: (expires_at(api, 'h3') or 0) <
                   time.time() + 11 * DAY and api.synced(), 60,
                   what='h3 back with its 10-day certificate')
        warn = [w for w in api.ok('GET', '/v1/hosts/h3')['warnings']
                if 'certificate' in w]
        assert len(warn) == 1 and warn[0].startswith(
            'certificate expires in 9 days,') and \
            'vw-host-setup enroll' in warn[0], warn
        assert not [w for w in api.ok('GET', '/v1/hosts/h1')['warnings']
                    if 'certificate' in w]
        table = vwctl(lab, 'hosts').stdout
        h3_line = [x for x in table.splitlines() if x.startswith('h3 ')][0]
        assert 'certificate expires in 9 days' in h3_line, table

        reader = lab.credential('reader', 'prometheus-certs')
        with Prometheus(lab, tmp_path / 'prom', token_file=reader,
                        rule_files=[RULES]) as prom:
            wait_until(lambda: len(prom.query(
                'virtualwire_host_certificate_expiry_seconds')) == 3, 30,
                what='every host\'s expiry scraped')
            got = dict((labels['host'], v) for labels, v in prom.query(
                'virtualwire_host_certificate_expiry_seconds'))
            assert abs(got['h3'] - expires_at(api, 'h3')) < 1
            firing = 'ALERTS{alertname="VirtualWireHostCertificateExpiring"}'
            wait_until(lambda: prom.query(firing), 30,
                       what='the expiring-certificate alert')
            assert [labels['host'] for labels, _v in
                    prom.query(firing)] == ['h3']
    finally:
        reconnect(lab, h3)
        wait_until(lambda: (expires_at(api, 'h3') or 0) >
                   time.time() + 800 * DAY and api.synced(), 60,
                   what='h3 back with its own certificate')
