"""Tenants on the real controller, over HTTPS, in the lab: the operator
assigns vNICs with vwctl; each tenant wires its own VMs with its own
token and traffic flows; tenant acme then tries every operation of the
OpenAPI document on globex's vNICs and wire, and each answers exactly as
for objects that do not exist; no wire, flow, assignment or credential
changes and globex's wire keeps carrying traffic; every change acme asked
for is a line of the audit log; a real Prometheus scraping with acme's
tenant-reader credential stores acme's wire and nothing of globex's or
of the cloud's hosts, and acme's dashboard in a real browser with it
draws acme's vNICs and wire only."""
import json
import os
import re
import subprocess
import sys
import time
import uuid

import requests

from vwtest import flows_of, wait_until
from virtualwire.testing import isolation
from vwlab.browser import Browser
from vwlab.prometheus import Prometheus


def vwctl(lab, *args):
    r = subprocess.run([sys.executable, '-m', 'virtualwire.cli', '--config',
                        lab.vwctl_config, *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _flows(lab):
    """Every host's flows without their counters."""
    return {h.name: sorted(re.sub(r'(duration|n_packets|n_bytes|idle_age|'
                                  r'hard_age)=[^,]*, ?', '', line)
                           for line in flows_of(h)) for h in lab.hosts}


def test_tenants_are_apart_on_the_real_controller(lab, api, tmp_path):
    h1, h2, h3 = lab.hosts
    acme_a = h1.add_vm('acme-a', [('acme-a-nic', '192.0.2.1/24')])
    h2.add_vm('acme-b', [('acme-b-nic', '192.0.2.2/24')])
    h1.add_vm('acme-c', [('acme-c-nic', None)])
    gx_a = h2.add_vm('globex-a', [('globex-a-nic', '192.0.2.1/24')])
    h3.add_vm('globex-b', [('globex-b-nic', '192.0.2.2/24')])
    for nic in ('acme-a-nic', 'acme-b-nic', 'acme-c-nic'):
        vwctl(lab, 'tenants', 'assign', nic, 'acme')
    for nic in ('globex-a-nic', 'globex-b-nic'):
        vwctl(lab, 'tenants', 'assign', nic, 'globex')
    table = vwctl(lab, 'tenants')
    assert re.search(r'acme\s+3', table) and re.search(r'globex\s+2', table)

    def as_(role, name):
        with open(lab.credential(role, name)) as f:
            tok = f.read().strip()

        def send(method, path, body=None):
            r = requests.request(method, lab.url + path, json=body,
                                 timeout=15, verify=lab.verify,
                                 headers={'Authorization': 'Bearer ' + tok})
            return r.status_code, r.text
        return send

    acme, globex = as_('tenant', 'acme'), as_('tenant', 'globex')
    made = []
    try:
        status, text = acme('POST', '/v1/wires', {'a': 'acme-a-nic',
                                                  'b': 'acme-b-nic'})
        assert status == 201, text
        made.append(json.loads(text)['id'])
        status, text = globex('POST', '/v1/wires', {'a': 'globex-a-nic',
                                                    'b': 'globex-b-nic'})
        assert status == 201, text
        gw = json.loads(text)
        made.append(gw['id'])
        for wid in made:
            api.wait_state(wid, 'tunnelled')
        for vm in (acme_a, gx_a):
            wait_until(lambda: vm.ping('192.0.2.2', count=1)[1] == 1, 10,
                       what='%s reaches its peer' % vm.name)

        before = {p: api.ok('GET', p) for p in (
            '/v1/wires', '/v1/tenants', '/v1/credentials')}
        vnics_before = api.ok('GET', '/v1/vnics')
        vwctl(lab, 'switch', 'create', 'globex-lan', '--ports', '2',
              '--tenant', 'globex', '--host', 'h3')
        flows = _flows(lab)
        victim = isolation.Objects('globex', ['globex-a-nic', 'globex-b-nic'],
                                   gw['id'], str(uuid.uuid4()), 'h3',
                                   switch='globex-lan')
        problems, seen = isolation.probe(acme, victim, 'acme-c-nic')
        assert problems == [], '\n'.join(problems)
        assert seen['GET /v1/vnics/{vnic_id}'] == [(404, 404)]
        assert seen['DELETE /v1/wires/{wire_id}'] == [(404, 404)]
        assert seen['GET /v1/wires/{wire_id}/stats'] == [(404, 404)]
        assert seen['GET /v1/switches/{name}'] == [(404, 404)]
        # Nothing changed: intent, assignments, credentials, flows.
        assert {p: api.ok('GET', p) for p in before} == before
        assert [(v['id'], v['tenant'], v['wire']) for v in api.ok(
            'GET', '/v1/vnics')['vnics']] == [
            (v['id'], v['tenant'], v['wire']) for v in vnics_before['vnics']]
        assert _flows(lab) == flows
        sent, got = gx_a.ping('192.0.2.2', count=5, interval=0.1)
        assert got == sent == 5

        # The audit log: a line per change acme asked for, refused ones
        # included, saying who, from where, what and the result.
        with open(os.path.join(lab.dir, 'controller', 'audit.log')) as f:
            lines = [json.loads(x) for x in f]
        mine = [e for e in lines if e['who'] == 'tenant:acme']
        asked = sum(2 * len(runs) for label, runs in seen.items()
                    if not label.startswith('GET'))
        assert len(mine) == asked + 1                 # and its one wire
        assert mine[0]['status'] == 201 and mine[0]['request'] == {
            'a': 'acme-a-nic', 'b': 'acme-b-nic'}
        # A topology file naming what is not its own is refused as one
        # naming nothing: 422 with the line, the same both ways.
        assert all(e['status'] in (403, 404) or e['status'] == 422 and
                   e['path'].startswith('/v1/topologies/') for e in mine[1:])
        assert {e['from'] for e in mine} == {'127.0.0.1'}
        assert any(e['who'] == 'admin' and e['action'] == 'assign_tenant'
                   for e in lines)
        assert 'tenant:acme' in vwctl(lab, 'audit', '--limit', '5')

        # Acme's Prometheus reads with a tenant-reader credential: its
        # wire only; no other tenant's, none of the cloud's hosts.
        reader = lab.credential('tenant-reader', 'acme')
        with Prometheus(lab, tmp_path / 'prom', token_file=reader) as prom:
            wait_until(lambda: prom.target_health() == [('up', '')] and
                       prom.query('virtualwire_wire_info'), 30,
                       what='a scrape with the tenant-reader credential')
            time.sleep(2)
            wires = {labels['wire'] for labels, _v in
                     prom.query('virtualwire_wire_info')}
            hosts = prom.query('virtualwire_host_connected')
        acme_wire = api.wire(made[0])['connector_id']
        assert wires == {acme_wire}
        assert hosts == []

        # Acme's dashboard with the same credential: its wire, its vNICs on
        # the hosts they are on; not globex's, not the hosts' table.
        with open(reader) as f, Browser(
                trust_cert=lab.pki.files('controller')[1]) as b:
            b.open(lab.url + '/ui/')
            b.sign_in(f.read().strip())
            row = '#wires tr[data-wire="%s"] td.state' % acme_wire
            b.wait(lambda: b.text(row) == 'tunnelled', 15,
                   what="acme's wire on its dashboard")
            assert 'tenant view: 3 vNICs' in b.text('#summary')
            assert [e.get_attribute('data-wire') for e in
                    b.all('#wires tr[data-wire]')] == [acme_wire]
            assert {e.get_attribute('data-end') for e in b.all(
                '#topology g.vnic')} == {'acme-a-nic', 'acme-b-nic',
                                         'acme-c-nic'}
            assert {e.get_attribute('data-host') for e in b.all(
                '#topology g.host')} == {'h1', 'h2'}
            assert not b.find('#hosts-card').is_displayed()
    finally:
        for wid in made:
            api.req('DELETE', '/v1/wires/%d' % wid)
        api.req('DELETE', '/v1/switches/globex-lan')
        for vm in ('acme-a', 'acme-c'):
            h1.remove_vm(h1.vms[vm])
        for vm in ('acme-b', 'globex-a'):
            h2.remove_vm(h2.vms[vm])
        h3.remove_vm(h3.vms['globex-b'])
