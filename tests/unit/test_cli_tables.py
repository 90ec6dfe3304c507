"""vwctl's tables for migrations (pure formatting of the REST answers)."""
from virtualwire.cli.vwctl import migration_rows, moving_text


def _mig(**over):
    m = {'id': 'm1', 'vm': 'g1', 'vm_uuid': 'u1', 'vnics': ['a', 'b'],
         'sources': {'a': 'h1', 'b': 'h1'}, 'destination': 'h2',
         'state': 'completed', 'started_at': 1000.0, 'ended_at': 1001.5,
         'activated': {'a': 1000.9, 'b': 1000.9}, 'moves': {},
         'found_by': 'hook'}
    m.update(over)
    return m


def test_migrations_newest_first_with_move_activation_and_duration():
    rows = migration_rows([
        _mig(),
        _mig(id='m2', vm='', vm_uuid='vnic:a', vnics=['a'],
             sources={'a': 'h2'}, destination='h1', state='prepared',
             started_at=2000.0, ended_at=None, activated={},
             found_by='ovsdb')])
    assert [r['id'] for r in rows] == ['m2', 'm1']
    assert rows[0]['vm'] == 'vnic:a'          # no domain name: what we know
    assert (rows[0]['move'], rows[0]['activated'], rows[0]['took_s']) == \
        ('h2 -> h1', '0/1', None)
    assert (rows[1]['move'], rows[1]['activated'], rows[1]['took_s']) == \
        ('h1 -> h2', '2/2', '1.50')


def test_a_wire_says_which_ends_are_moving():
    assert moving_text({'moving': {}}) == '-'
    assert moving_text({}) == '-'
    assert moving_text({'moving': {
        'b': {'source': 'h1', 'destination': 'h2', 'activated': True},
        'a': {'source': 'h3', 'destination': 'h1', 'activated': False}}}) \
        == 'h3->h1 h1->h2*'


def test_steps_are_drawn_in_the_order_they_happened_with_their_durations():
    from virtualwire.cli import timeline
    m = _mig(vnics=['a'], activated={'a': 1003.2}, activated_by={'a': 'rarp'},
             steps={'a': {'tap_appeared': 1000.2, 'sisters_moved': 1003.211,
                          'source_left': 1003.6}},
             sisters={'a': ['h1', 'h3']}, started_at=1000.0, ended_at=1003.6)
    lines = timeline.render(m).splitlines()
    assert lines[0] == 'g1: h1 -> h2, completed'
    steps = [line.strip().split('  ')[0] for line in lines[2:]]
    assert steps == ['announced', 'tap appeared', 'activated (rarp)',
                     'sisters moved', 'source left']
    assert '+200 ms' in lines[3] and '+3.0 s' in lines[4]
    assert '+11 ms' in lines[5] and lines[5].endswith('h1, h3')
    # A move with held frames: where its first held frame waited.
    held = _mig(vnics=['a'], activated={'a': 1003.25},
                activated_by={'a': 'source-stopped'},
                steps={'a': {'tap_appeared': 1000.2, 'source_stopped': 1003.2,
                             'held_released': 1003.26,
                             'held_delivered': 1003.27,
                             'sisters_moved': 1003.3, 'source_left': 1003.6}},
                started_at=1000.0, ended_at=1003.6)
    lines = timeline.render(held).splitlines()
    assert [line.strip().split('  ')[0] for line in lines[2:]] == [
        'announced', 'tap appeared', 'source stopped',
        'activated (source-stopped)', 'held frames released',
        'held frames delivered', 'sisters moved', 'source left']
    assert '+10.0 ms' in lines[7]
    # In progress: what is still to come is drawn as waiting.
    going = _mig(vnics=['a'], state='prepared', ended_at=None, activated={},
                 steps={'a': {'tap_appeared': 1000.2}})
    tail = timeline.render(going).splitlines()[-3:]
    assert all('waiting' in line for line in tail)
