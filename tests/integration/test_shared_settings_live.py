"""Settings every controller instance shares, on the lab's controller:
seeded into the intent database's Global row from the active instance's
flags, changed at run time with `vwctl config set` and applied without a
restart; a bad value or a reader's token changes nothing."""
import json
import os
import subprocess

import requests

from vwtest import wait_until
from vwtest.migration import vwctl


def row(lab):
    """The Global row, read from the intent database itself."""
    out = subprocess.run(
        ['ovsdb-client', '-f', 'json', 'dump', 'unix:' + os.path.join(
            lab.state_dir(0), 'intent.sock'), 'VirtualWire', 'Global'],
        capture_output=True, text=True, check=True).stdout
    rows = json.loads(out)['data']
    return {k: v for k, v in rows[0][-1][1]} if rows else {}


def settings(api):
    return {s['name']: s for s in api.ok('GET', '/v1/settings')['settings']}


def test_a_shared_setting_changes_at_run_time_for_every_instance(lab, api):
    wait_until(lambda: row(lab).get('stats-interval') == '1.0', 15,
               what='the row seeded from the lab\'s flags')
    shown = settings(api)
    assert shown['stats-interval']['source'] == 'intent database'
    assert api.ok('GET', '/v1/stats')['read_every_s'] == 1.0
    try:
        p = vwctl(lab, 'config', 'set', 'stats-interval', '3')
        assert p.returncode == 0, p.stderr
        assert 'stats-interval = 3' in p.stdout
        assert row(lab)['stats-interval'] == '3'
        wait_until(lambda: api.ok('GET', '/v1/stats')['read_every_s'] == 3.0,
                   10, what='the new interval applied, no restart')
        p = vwctl(lab, 'config', 'show')
        line = [x for x in p.stdout.splitlines()
                if x.startswith('stats-interval')][0]
        assert line.split()[:3] == ['stats-interval', '3.0', 'intent'], line

        # Bad input: said, and nothing changes.
        p = vwctl(lab, 'config', 'set', 'stats-interval', '9')
        assert p.returncode == 1
        assert 'stats-interval must be 1 to 5 seconds, not 9' in p.stderr
        p = vwctl(lab, 'config', 'set', 'holding', 'on')
        assert p.returncode == 1 and "no shared setting 'holding'" in \
            p.stderr
        with open(lab.credential('reader', 'settings-noc')) as f:
            reader = f.read().strip()
        r = requests.put(lab.url + '/v1/settings/stats-interval',
                         json={'value': '2'}, verify=lab.verify, timeout=15,
                         headers={'Authorization': 'Bearer ' + reader})
        assert r.status_code == 403, r.text
        assert row(lab)['stats-interval'] == '3'
        assert api.ok('GET', '/v1/stats')['read_every_s'] == 3.0
    finally:
        assert vwctl(lab, 'config', 'set', 'stats-interval',
                     '1').returncode == 0
        wait_until(lambda: api.ok('GET', '/v1/stats')['read_every_s'] == 1.0,
                   10, what='the lab\'s interval back')
