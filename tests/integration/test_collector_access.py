"""The collector's key writes the counter base and nothing else (issue 39,
point 6): on the lab, the collector reaches the intent database through
its own listener (RBAC role `collector`), and ovsdb-server itself refuses
every other write presented with its certificate there; the lab's
collector process holds its lock and saves its counters through it."""
import json
import subprocess
import sys

from vwtest import wait_until
from vwlab.pki import LabPki
from vwlab.shell import free_port


def _transact(lab, ops, creds, port=None, ca=None):
    key, cert = creds
    p = subprocess.run(
        ['ovsdb-client', '--timeout=10', '--private-key=' + key,
         '--certificate=' + cert,
         '--ca-cert=' + (ca or lab.pki.controller_ca), 'transact',
         'ssl:127.0.0.1:%d' % (port or lab.collector_db_port),
         json.dumps(['VirtualWire'] + ops)],
        capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _refused(result):
    return [r.get('error') for r in result if isinstance(r, dict)
            and r.get('error')]


def test_the_collectors_key_writes_counters_and_nothing_else(lab, api,
                                                              pair):
    assert lab.collector_db_port, 'the lab serves the collector its own way'
    creds = lab.pki.files('collector')
    # What a stolen collector key would try first: a credential of its
    # own choosing, a wire, a placement, the host rows.
    for table, row in (
            ('Credential', {'role': 'operator', 'name': 'mallory',
                            'digest': 'x' * 64, 'created_at': 'now'}),
            ('Wire', {'connector_id': 4242, 'end_a': 'x', 'end_b': 'y',
                      'created_at': 'now'}),
            ('VnicPlacement', {'vnic': 'v1', 'host': 'h9',
                               'placed_at': 1.0, 'by': 'x'})):
        got = _transact(lab, [{'op': 'insert', 'table': table,
                               'row': row}], creds)
        assert _refused(got) == ['permission error'], (table, got)
    got = _transact(lab, [{'op': 'delete', 'table': 'Host',
                           'where': []}], creds)
    assert _refused(got) == ['permission error'], got
    got = _transact(lab, [{'op': 'update', 'table': 'RBAC_Permission',
                           'where': [], 'row': {'insert_delete': True}}],
                    creds)
    assert _refused(got) == ['permission error'], got

    # Its own table: a row inserted, its figures updated, deleted; its
    # name (the key) stays.
    name = 'test:collector-access'
    got = _transact(lab, [{'op': 'insert', 'table': 'Counters', 'row': {
        'name': name, 'snapshot': '{}', 'updated_at': 'now'}}], creds)
    assert not _refused(got), got
    where = [['name', '==', name]]
    got = _transact(lab, [{'op': 'update', 'table': 'Counters',
                           'where': where, 'row': {'snapshot': '{"a":1}'}}],
                    creds)
    assert got[0] == {'count': 1}, got
    got = _transact(lab, [{'op': 'update', 'table': 'Counters',
                           'where': where, 'row': {'name': 'other'}}], creds)
    assert _refused(got) == ['permission error'], got
    got = _transact(lab, [{'op': 'delete', 'table': 'Counters',
                           'where': where}], creds)
    assert got[0] == {'count': 1}, got

    # The collector itself works that way: it holds the writer's lock, and
    # a new wire's counts are saved as its row, written there.
    assert lab.collector_get('/v1/status')['has_lock'] is True
    va, _vb, w = pair('h1', 'h2')
    va.ping('192.0.2.2', count=3)

    def saved():
        got = _transact(lab, [{'op': 'select', 'table': 'Counters',
                               'where': [['name', '==',
                                          'wire:%d' % w['id']]],
                               'columns': ['snapshot']}], creds)
        return got[0]['rows']
    wait_until(saved, 20, what="the new wire's counts saved by the collector")


def test_the_packaged_database_lists_the_collectors_listener(tmp_path):
    """`virtualwire-intent-db --collector-remote` (the packaged service;
    its unit's ExecStartPost `wait` writes the rows): the same refusal
    from ovsdb-server, and a counter row written."""
    pki = LabPki(str(tmp_path / 'pki')).init()
    key, cert = pki.issue('virtualwire-intent-db', role='controller')
    creds = pki.issue('collector', role='controller')
    port = free_port()
    svc = [sys.executable, '-m', 'virtualwire.store.intent_db_service',
           '--db', str(tmp_path / 'intent.db'),
           '--socket', str(tmp_path / 'intent.sock'),
           '--collector-remote', 'pssl:%d:127.0.0.1' % port,
           '--private-key', key, '--certificate', cert,
           '--ca-cert', pki.controller_ca, '--timeout', '20']
    server = subprocess.Popen(svc + ['run'], stderr=subprocess.DEVNULL)
    try:
        said = subprocess.run(svc + ['wait'], capture_output=True,
                              text=True, timeout=40)
        assert said.returncode == 0 and said.stdout.strip() == \
            'collector listeners: pssl:%d:127.0.0.1' % port, said
        wait_until(lambda: subprocess.run(
            ['ovsdb-client', '--timeout=2', '--private-key=' + creds[0],
             '--certificate=' + creds[1], '--ca-cert=' + pki.controller_ca,
             'list-dbs', 'ssl:127.0.0.1:%d' % port],
            capture_output=True).returncode == 0, 15,
            what="the collector's listener open")
        got = _transact(None, [{'op': 'insert', 'table': 'Credential',
                                'row': {'role': 'operator', 'name': 'm',
                                        'digest': 'x', 'created_at': 'now'}}],
                        creds, port, pki.controller_ca)
        assert _refused(got) == ['permission error'], got
        got = _transact(None, [{'op': 'insert', 'table': 'Counters',
                                'row': {'name': 'host:h1', 'snapshot': '{}',
                                        'updated_at': 'now'}}],
                        creds, port, pki.controller_ca)
        assert not _refused(got), got
    finally:
        server.terminate()
        server.wait(10)
