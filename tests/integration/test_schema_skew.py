"""Skew the other way (controller N against a database N+1 made: a
controller or package rolled back): a real ovsdb-server holding a newer
schema is used as it is, never converted down, online or offline, and
the upgrade tool refuses to go down. The controller's store works on it
(the way N+1 against N is shown in test_packages)."""
import json
import os
import subprocess

from virtualwire.store import intent_db_service, local
from virtualwire.store.intent import SCHEMA_PATH, IntentStore


def _newer_schema(path):
    """Today's schema one minor version on: a table and a Wire column this
    code does not know."""
    with open(SCHEMA_PATH) as f:
        doc = json.load(f)
    major, minor, _ = (int(x) for x in doc['version'].split('.'))
    doc['version'] = '%d.%d.0' % (major, minor + 1)
    doc['tables']['Future'] = {'columns': {'note': {'type': 'string'}},
                               'isRoot': True}
    doc['tables']['Wire']['columns']['future'] = {
        'type': {'key': 'string', 'min': 0, 'max': 1}}
    with open(path, 'w') as f:
        json.dump(doc, f)
    return doc['version']


def _client(*args):
    return subprocess.run(['ovsdb-client'] + list(args), capture_output=True,
                          text=True, check=True).stdout.strip()


def test_a_newer_intent_db_is_used_as_it_is_and_never_converted_down(
        tmp_path, capsys):
    state = str(tmp_path)
    newer = _newer_schema(os.path.join(state, 'newer.ovsschema'))
    db, sock = (os.path.join(state, 'intent.db'),
                os.path.join(state, 'intent.sock'))
    subprocess.run(['ovsdb-tool', 'create', db,
                    os.path.join(state, 'newer.ovsschema')], check=True)
    server = ['ovsdb-server', db, '--remote=punix:' + sock,
              '--pidfile=' + os.path.join(state, 'intent-ovsdb.pid'),
              '--unixctl=' + os.path.join(state, 'intent-ovsdb.ctl'),
              '--detach', '--no-chdir']
    subprocess.run(server, check=True)
    remote = 'unix:' + sock
    try:
        _client('transact', remote, json.dumps(
            ['VirtualWire',
             {'op': 'insert', 'table': 'Future', 'row': {'note': 'kept'}},
             {'op': 'insert', 'table': 'Wire', 'row': {
                 'connector_id': 7, 'end_a': 'a', 'end_b': 'b',
                 'created_at': 't', 'future': 'x'}}]))
        # Online: the controller's own start leaves it at N+1.
        assert local.ensure(state) == remote
        assert _client('get-schema-version', remote, 'VirtualWire') == newer
        store = IntentStore(remote).start()
        try:
            assert store.wires()[7].end_a == 'a'
            store.create_wire('c', 'd', connector_id=8)
            store.settings.update({'move-timeout': '600'})
            assert store.settings.options()['move-timeout'] == '600'
        finally:
            store.stop()
        # The upgrade tool refuses to go down, and says why.
        code = intent_db_service.main(['--socket', sock, 'upgrade'])
        err = capsys.readouterr().err
        assert code == 1 and 'newer than this package' in err and \
            'never goes down' in err, err
        local.stop(state)
        subprocess.run(['sleep', '0.5'])
        # Offline: the file is not converted either.
        local.ensure(state)
        assert _client('get-schema-version', remote, 'VirtualWire') == newer
        assert 'kept' in _client('dump', remote, 'Future')
        wire7 = [line.split() for line in _client(
            'dump', remote, 'Wire').splitlines() if ' 7 ' in line]
        assert wire7 and wire7[0][-1] == 'x', wire7  # its newer column
    finally:
        local.stop(state)
