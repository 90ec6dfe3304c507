"""A controller with a newer schema meets a running intent database with
the older one (the server outlives controller restarts): it converts it
in place, online, and the wires in it survive."""
import json
import os
import subprocess

from virtualwire.store import local
from virtualwire.store.intent import SCHEMA_PATH

def _old_schema(path):
    """Today's schema without the tables 1.5.0 added (Counters)."""
    with open(SCHEMA_PATH) as f:
        doc = json.load(f)
    doc['tables'].pop('Counters')
    doc['version'] = '1.4.0'
    with open(path, 'w') as f:
        json.dump(doc, f)


def test_a_running_intent_db_is_converted_online(tmp_path):
    state = str(tmp_path)
    old = os.path.join(state, 'old.ovsschema')
    _old_schema(old)
    db, sock = os.path.join(state, 'intent.db'), os.path.join(
        state, 'intent.sock')
    subprocess.run(['ovsdb-tool', 'create', db, old], check=True)
    subprocess.run(['ovsdb-server', db, '--remote=punix:' + sock,
                    '--pidfile=' + os.path.join(state, 'intent-ovsdb.pid'),
                    '--unixctl=' + os.path.join(state, 'intent-ovsdb.ctl'),
                    '--detach', '--no-chdir'], check=True)
    try:
        remote = 'unix:' + sock
        subprocess.run(['ovsdb-client', 'transact', remote, json.dumps(
            ['VirtualWire', {'op': 'insert', 'table': 'Wire', 'row': {
                'connector_id': 7, 'end_a': 'a', 'end_b': 'b',
                'created_at': 't'}}])], check=True, capture_output=True)
        assert local.ensure(state) == remote
        version = subprocess.run(['ovsdb-client', 'get-schema-version',
                                  remote], capture_output=True, text=True,
                                 check=True).stdout.strip()
        with open(SCHEMA_PATH) as f:
            assert version == json.load(f)['version'] != '1.4.0'
        tables = subprocess.run(['ovsdb-client', 'list-tables', remote],
                                capture_output=True, text=True).stdout
        assert 'Counters' in tables
        rows = subprocess.run(['ovsdb-client', 'dump', remote, 'Wire'],
                              capture_output=True, text=True).stdout
        assert ' a     b ' in rows and ' 7 ' in rows, rows
    finally:
        local.stop(state)
