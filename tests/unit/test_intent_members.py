"""Each intent-database member's word on itself (store.members): what
counts as up, and what a member that does not answer looks like."""
from virtualwire.metrics.exporter import member_families
from virtualwire.store.errors import StoreError
from virtualwire.store.members import MemberProbe, judge, label


def test_up_means_answering_and_connected_to_its_cluster():
    assert judge([{'connected': True, 'leader': True,
                   'model': 'clustered'}]) == (True, True, '')
    assert judge([{'connected': True, 'leader': False}])[:2] == (True, False)
    up, leader, why = judge([{'connected': False, 'leader': False,
                              'model': 'clustered'}])
    assert (up, leader) == (False, False) and 'not connected' in why
    assert judge([])[0] is False


def test_a_silent_member_is_down_and_says_why():
    def ask(member, db, ops, timeout):
        assert db == '_Server' and timeout <= 2
        if member.endswith(':2'):
            raise StoreError('cannot connect to the intent database '
                             '(refused)')
        return [{'rows': [{'connected': True,
                           'leader': member.endswith(':1')}]}]
    probe = MemberProbe('vwdb-ssl:10.0.0.1:1,vwdb-ssl:10.0.0.1:2,unix:/s',
                        ask=ask, clock=lambda: 7.0)
    state = probe.check_once()
    assert {m: (s['up'], s['leader']) for m, s in state.items()} == {
        'ssl:10.0.0.1:1': (True, True), 'ssl:10.0.0.1:2': (False, False),
        'unix:/s': (True, False)}
    assert 'refused' in state['ssl:10.0.0.1:2']['why']
    up, leader = member_families(state)
    assert [(s.labels['member'], s.value) for s in up.samples] == [
        ('ssl:10.0.0.1:1', 1), ('ssl:10.0.0.1:2', 0), ('unix:/s', 1)]
    assert [s.value for s in leader.samples] == [1, 0, 0]
    assert label('vwdb-ssl:a:1') == 'ssl:a:1'
