"""virtualwire-intent-db: what the unit's start does to the database file
in each case (first start, restart, newer schema, cluster), and the
settings it refuses."""
import pytest

from virtualwire.store import intent_db_service as svc


def args(*argv):
    return svc.build_parser().parse_args(list(argv) + ['run'])


def test_first_start_creates_a_standalone_or_a_cluster():
    a = args('--db', '/v/i.db', '--schema', '/s.ovsschema')
    assert svc.prepare_commands(a, False, False) == [
        ['ovsdb-tool', 'create', '/v/i.db', '/s.ovsschema']]
    c = args('--db', '/v/i.db', '--schema', '/s', '--cluster-local',
             'ssl:10.0.0.1:6644')
    assert svc.prepare_commands(c, False, False) == [
        ['ovsdb-tool', 'create-cluster', '/v/i.db', '/s',
         'ssl:10.0.0.1:6644']]
    j = args('--db', '/v/i.db', '--cluster-local', 'ssl:10.0.0.2:6644',
             '--cluster-remote', 'ssl:10.0.0.1:6644')
    assert svc.prepare_commands(j, False, False) == [
        ['ovsdb-tool', 'join-cluster', '/v/i.db', 'VirtualWire',
         'ssl:10.0.0.2:6644', 'ssl:10.0.0.1:6644']]


def test_a_restart_keeps_the_file_and_only_a_standalone_converts_offline():
    a = args('--db', '/v/i.db', '--schema', '/s')
    assert svc.prepare_commands(a, True, False) == []
    assert svc.prepare_commands(a, True, True) == [
        ['ovsdb-tool', 'convert', '/v/i.db', '/s']]
    c = args('--db', '/v/i.db', '--cluster-local', 'ssl:10.0.0.1:6644')
    assert svc.prepare_commands(c, True, True) == []    # online: upgrade


def test_the_server_runs_in_the_foreground_on_its_socket():
    a = args('--socket', '/run/vw/i.sock', '--remote', 'pssl:6641',
             '--private-key', 'k', '--certificate', 'c', '--ca-cert', 'ca')
    cmd = svc.server_command(a, svc._tls(a))
    assert '--detach' not in cmd and '--pidfile' not in ' '.join(cmd)
    assert '--remote=punix:/run/vw/i.sock' in cmd
    assert '--remote=pssl:6641' in cmd and '--ca-cert=ca' in cmd


@pytest.mark.parametrize('argv, says', [
    (['--remote', 'pssl:6641'], 'pssl:6641 needs --private-key'),
    (['--cluster-local', 'tcp:10.0.0.1:6644'], 'plain TCP'),
    (['--private-key', 'k'], 'together'),
])
def test_unsafe_or_half_settings_are_refused(argv, says):
    with pytest.raises(svc.ServiceError) as e:
        svc._tls(args(*argv))
    assert says in str(e.value)
