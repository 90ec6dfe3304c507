"""The cloud's word on placement on the lab (issue 39's first attack): h3,
a legitimate but compromised hypervisor, plugs a port with the id of a
vNIC the cloud placed on h2 and sends from it while a 1 kHz stream runs
over the victim's wire. It is refused: the wire stays h1 > h2, the
receiver on h2 loses nothing, and the refusal shows in /v1/status, in
`vwctl vnics` and on /metrics. Then an orchestrator credential places
the vNIC on h3, and the wire follows to h3."""
import re
import threading

import requests

from vwtest import wait_until
from vwtest.migration import vwctl
from vwtest.wire_traffic import udp_stream


def as_token(lab, token_file, method, path, **kw):
    with open(token_file) as f:
        token = f.read().strip()
    return requests.request(method, lab.url + path, timeout=15,
                            verify=lab.verify,
                            headers={'Authorization': 'Bearer ' + token},
                            **kw)


def refused_metric(api, host):
    text = api.req('GET', '/metrics').text
    m = re.search(r'^virtualwire_vnic_claims_refused_total\{host="%s"\} '
                  r'(\S+)$' % host, text, re.M)
    return float(m.group(1)) if m else 0.0


def test_a_host_cannot_take_a_vnic_the_cloud_placed_elsewhere(lab, api):
    h1, h2, h3 = lab.hosts
    va = h1.add_vm('pra', [('pra-nic', '10.61.0.1/24')])
    vb = h2.add_vm('prb', [('prb-nic', '10.61.0.2/24')])
    wid = api.connect('pra-nic', 'prb-nic')['id']
    evil = None
    try:
        api.wait_state(wid, 'tunnelled')
        wait_until(lambda: va.ping('10.61.0.2', count=1)[1] == 1, 20,
                   what='ping over the wire')
        p = vwctl(lab, 'vnics', 'place', 'prb-nic', 'h2')
        assert p.returncode == 0 and 'runs on h2' in p.stdout, p.stderr
        before = refused_metric(api, 'h3')
        out = {}
        stream = threading.Thread(target=lambda: out.update(zip(
            ('sent', 'got'), udp_stream(va, vb, '10.61.0.2', seconds=8.0,
                                        rate=1000))))
        stream.start()
        # h3 plugs a port claiming prb-nic, with the victim's address,
        # and sends from it: ARP, pings, whatever a guest sends.
        evil = h3.add_vm('prx', [('prb-nic', '10.61.0.2/24')], place=False)
        evil.ping('10.61.0.1', count=5, interval=0.3)
        stream.join(60)
        assert out['sent']['sent'] == 8000, out
        assert out['got']['received'] == 8000 and \
            out['got']['duplicates'] == 0, out['got']
        assert api.ok('GET', '/v1/vnics/prb-nic')['host'] == 'h2'
        assert api.wire(wid)['state'] == 'tunnelled'
        assert [(r['vnic'], r['host'], r['placed_on']) for r in api.ok(
            'GET', '/v1/status')['refused_claims']] == [
                ('prb-nic', 'h3', 'h2')]
        assert refused_metric(api, 'h3') == before + 1
        table = vwctl(lab, 'vnics').stdout
        line = [x for x in table.splitlines() if x.startswith('prb-nic')][0]
        assert line.split()[1:4] == ['h2', 'h2', 'h3'], table

        # The cloud moves it: an orchestrator's credential, which may do
        # nothing else, places it on h3; the wire follows on h3's frames.
        nova = lab.credential('orchestrator', 'nova')
        r = as_token(lab, nova, 'DELETE', '/v1/wires/%s' % wid)
        assert r.status_code == 403, r.text
        r = as_token(lab, nova, 'PUT', '/v1/vnics/prb-nic/placement',
                     json={'host': 'h3'})
        assert r.status_code == 200 and r.json()['previous'] == 'h2', r.text

        def on_h3():
            evil.ping('10.61.0.1', count=1)
            return api.ok('GET', '/v1/vnics/prb-nic')['host'] == 'h3'
        wait_until(on_h3, 20, what='the wire moved to h3 as the cloud said')
        assert api.ok('GET', '/v1/status')['refused_claims'] == []
        wait_until(lambda: va.ping('10.61.0.2', count=1)[1] == 1, 20,
                   what='ping reaching h3\'s guest')
    finally:
        api.req('DELETE', '/v1/vnics/prb-nic/placement')
        api.req('DELETE', '/v1/wires/%s' % wid)
        for host, vm in ((h1, va), (h2, vb), (h3, evil)):
            if vm is not None:
                host.remove_vm(vm)
