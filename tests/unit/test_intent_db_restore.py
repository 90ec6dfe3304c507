"""The restore's plan (pure): what a backup gets before it goes back."""
from virtualwire.store.intent_db_restore import (keep_leadership,
                                                  keep_observed, plan)


def entry(digest, expires_at=None, kind='credential'):
    return {'kind': kind, 'name': 'x', 'digest': digest, 'revoked_at': 5.0,
            'reason': 'revoked',
            'expires_at': ['set', [] if expires_at is None else [expires_at]]}


def test_listed_rows_go_and_missing_entries_are_added_once():
    backup = {'Credential': [('u1', 'd1'), ('u2', 'd2')],
              'JoinToken': [('u3', 'd3')]}
    ops, taken, added = plan(backup, {'d2'}, [entry('d1'), entry('d1'),
                                             entry('d3', 200.0)],
                             True, now=100.0)
    inserts = [o['row']['digest'] for o in ops if o['op'] == 'insert']
    deletes = [o['where'][0][2][1] for o in ops if o['op'] == 'delete']
    assert inserts == ['d1', 'd3']
    assert sorted(deletes) == ['u1', 'u2', 'u3']
    assert taken == {'Credential': 2, 'JoinToken': 1} and added == 2
    assert ops[1]['row']['expires_at'] == ['set', [200.0]]


def test_expired_entries_are_not_carried_and_nothing_is_nothing():
    backup = {'Credential': [('u1', 'd1')], 'JoinToken': [('u3', 'd3')]}
    ops, taken, added = plan(backup, set(), [entry('d3', 50.0)], True, 100.0)
    assert ops == [] and added == 0
    assert taken == {'Credential': 0, 'JoinToken': 0}


def test_a_server_without_the_list_still_drops_the_rows():
    ops, taken, added = plan({'Credential': [('u1', 'd1')]}, (),
                             [entry('d1')], False, 100.0)
    assert [o['op'] for o in ops] == ['delete'] and added == 0


def test_a_newer_leadership_term_is_kept():
    server = {'_uuid': ['uuid', 's'], '_version': ['uuid', 'v'], 'term': 9,
              'holder': 'c1', 'rest_url': 'u', 'since': 't',
              'southbound_url': 's'}
    ops = keep_leadership(server, [('b', 5)])
    assert ops[0] == {'op': 'delete', 'table': 'Leadership',
                      'where': [['_uuid', '==', ['uuid', 'b']]]}
    assert ops[1]['row'] == {'term': 9, 'holder': 'c1', 'rest_url': 'u',
                             'since': 't', 'southbound_url': 's'}
    assert keep_leadership(server, [])[-1]['op'] == 'insert'
    assert keep_leadership(dict(server, term=5), [('b', 5)]) == []
    assert keep_leadership(None, [('b', 5)]) == []


def test_what_the_controllers_observed_is_the_servers_not_the_backups():
    """Hosts as last seen and counters are newer on the server than in
    any backup: its rows replace the backup's (an older host snapshot
    made a restarted controller remove a working wire's flows until the
    host reported); a table the server has no row of keeps the backup's
    (a new, empty cluster)."""
    server = {'Host': [{'_uuid': ['uuid', 's1'], '_version': ['uuid', 'v'],
                        'name': 'h1', 'snapshot': 'now'}],
              'Migration': []}
    ops = keep_observed(server, {'Host': ['b1', 'b2'], 'Migration': ['m']})
    assert ops == [
        {'op': 'delete', 'table': 'Host',
         'where': [['_uuid', '==', ['uuid', 'b1']]]},
        {'op': 'delete', 'table': 'Host',
         'where': [['_uuid', '==', ['uuid', 'b2']]]},
        {'op': 'insert', 'table': 'Host',
         'row': {'name': 'h1', 'snapshot': 'now'}}]
    assert keep_observed({'Host': []}, {'Host': ['b1']}) == []
