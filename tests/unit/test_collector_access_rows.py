"""The collector's listeners as rows (store.collector_access): exactly the
targets asked for, each with the role that may write only Counters; bad
targets say why; the controller's flag refuses what cannot work."""
import pytest

from virtualwire import main as ctl_main
from virtualwire.store import collector_access


def test_the_rows_name_each_listener_with_the_collector_role():
    ops = collector_access.ops(['pssl:6645:10.0.0.1', 'pssl:6645:10.0.0.1',
                                'pssl:6646'])
    assert ops[0] == 'VirtualWire'
    deletes = [o['table'] for o in ops[1:] if o['op'] == 'delete']
    assert deletes == ['Remotes', 'RBAC_Role', 'RBAC_Permission']
    conns = [o['row'] for o in ops[1:] if o.get('table') == 'Connection']
    assert [(c['target'], c['role']) for c in conns] == [
        ('pssl:6645:10.0.0.1', 'collector'), ('pssl:6646', 'collector')]
    [perm] = [o['row'] for o in ops[1:] if o.get('table') == 'RBAC_Permission'
              and o['op'] == 'insert']
    assert perm == {'table': 'Counters', 'authorization': ['set', ['']],
                    'insert_delete': True,
                    'update': ['set', ['snapshot', 'updated_at']]}
    [role] = [o['row'] for o in ops[1:] if o.get('table') == 'RBAC_Role'
              and o['op'] == 'insert']
    assert role['name'] == 'collector' and \
        role['permissions'] == ['map', [['Counters', ['named-uuid', 'perm']]]]


def test_no_listener_leaves_no_row():
    assert [o['op'] for o in collector_access.ops([])[1:]] == ['delete'] * 3


@pytest.mark.parametrize('bad', ['punix:/run/x.sock', 'ptcp:6645',
                                 'pssl:', 'pssl:http', 'pssl:70000',
                                 'ssl:10.0.0.1:6645'])
def test_a_listener_that_cannot_carry_a_certificate_is_refused(bad):
    with pytest.raises(ValueError, match='pssl:PORT'):
        collector_access.ops([bad])


def _args(*argv):
    return ctl_main.parse_args(['--insecure-plaintext-lab'] + list(argv))


@pytest.mark.parametrize('argv,says', [
    (['--collector-listen', 'pssl:6645'], '--collector-ca'),
    (['--collector-listen', 'pssl:6645', '--intent-db', 'unix:/x.sock'],
     '--collector-remote'),
    (['--collector-listen', 'ptcp:6645', '--private-key', 'k',
      '--certificate', 'c', '--collector-ca', 'a'], 'pssl:PORT'),
])
def test_the_controller_says_why_a_collector_listener_cannot_be(argv, says,
                                                              capsys):
    with pytest.raises(SystemExit) as e:
        ctl_main.check_collector_listen(_args(*argv))
    assert says in str(e.value)
