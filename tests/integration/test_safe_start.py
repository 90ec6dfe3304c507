"""A safe start on the real lab: the controller restarted on a missing
intent database (it creates an empty one) leaves every switch's wire flows
alone and says why; the operator's release deletes them; restoring the
backup (as the README says to take it) brings the wires back."""
import os
import shutil
import subprocess
import time

from vwtest import flows_of, wait_until
from vwtest.migration import vwctl
from test_dataplane import cookie_hex
from virtualwire.store import local
from vwlab.shell import read_text


def _stop_controller_and_db(lab, state):
    lab.stop_controller()
    pidfile = os.path.join(state, 'intent-ovsdb.pid')
    local.stop(state)
    wait_until(lambda: not local._alive(pidfile), 10,
               what='the intent ovsdb-server to stop')


def test_an_empty_intent_database_deletes_no_wire_until_released(
        pair, lab, api, tmp_path):
    va, vb, w = pair('h1', 'h2')
    h1, h2 = lab.host('h1'), lab.host('h2')
    cookie = cookie_hex(w['id'])
    flows = {h.name: len(flows_of(h, cookie)) for h in (h1, h2)}
    assert all(flows.values()), flows
    state = os.path.join(lab.dir, 'controller')
    backup = str(tmp_path / 'intent-backup.db')
    with open(backup, 'wb') as f:           # the README's backup command
        subprocess.run(['ovsdb-client', 'backup',
                        'unix:%s/intent.sock' % state], stdout=f,
                       check=True, timeout=30)

    _stop_controller_and_db(lab, state)
    os.rename(os.path.join(state, 'intent.db'),
              os.path.join(state, 'intent.db.lost'))
    log = os.path.join(state, 'controller.log')
    log_at = os.path.getsize(log)
    lab.start_controller()
    wait_until(api.synced, 30, what='controller on an empty database')
    time.sleep(1.5)                       # a few syncs
    # Nothing deleted, the wire still carries traffic, and it says why.
    assert {h.name: len(flows_of(h, cookie)) for h in (h1, h2)} == flows
    assert va.ping('192.0.2.2', count=3)[1] == 3
    held = api.ok('GET', '/v1/intent/orphans')
    assert w['connector_id'] in held['held_wires'] and \
        set(held['hosts']) >= {'h1', 'h2'} and not held['released'], held
    assert api.ok('GET', '/v1/wires')['wires'] == []
    said = read_text(log)[log_at:]
    assert 'creating an empty one' in said and 'NOT deleting them' in said
    p = vwctl(lab, 'intent')
    assert p.returncode == 0 and w['connector_id'] in p.stdout and \
        'release-orphans' in p.stdout, p.stdout + p.stderr

    # The operator says the (empty) database is right: the flows go.
    p = vwctl(lab, 'intent', 'release-orphans')
    assert p.returncode == 0, p.stderr
    wait_until(lambda: not flows_of(h1, cookie) and not flows_of(h2, cookie),
               10, what='the released flows deleted')
    assert va.ping('192.0.2.2', count=2, wait=1)[1] == 0

    # Restoring the backup brings the wire back.
    _stop_controller_and_db(lab, state)
    shutil.copy(backup, os.path.join(state, 'intent.db'))
    lab.start_controller()
    wait_until(api.synced, 30, what='controller on the restored database')
    api.wait_state(w['id'], 'tunnelled')
    wait_until(lambda: va.ping('192.0.2.2', count=1)[1] == 1, 15,
               what='the restored wire carrying traffic')
    assert api.ok('GET', '/v1/intent/orphans')['held_wires'] == []
