"""The counter base as rows (store.counter_rows): a snapshot and its rows
convert both ways, an old single-row base still reads, and a save writes
only the rows that changed."""
import json

from hypothesis import given, strategies as st

from virtualwire.store import counter_rows

counts = st.dictionaries(st.sampled_from(['1', '2', '4']),
                         st.lists(st.integers(0, 2**40), min_size=2,
                                  max_size=2), max_size=3)
hosts = st.sampled_from(['h1', 'h2', 'x-a'])
snaps = st.fixed_dictionaries({
    'seen': st.dictionaries(hosts, st.lists(st.tuples(
        st.just([0, 100, [['in_port', 3]]]), st.integers(0, 9),
        st.integers(0, 9), st.integers(0, 99)).map(list), max_size=3)),
    'wires': st.dictionaries(st.integers(1, 2**32 - 1).map(str),
                             st.tuples(st.text(max_size=5), counts).map(
                                 list), max_size=8),
    'hosts': st.dictionaries(hosts, counts)})


@given(snaps)
def test_rows_hold_the_snapshot(snap):
    back = counter_rows.snapshot(counter_rows.rows(snap))
    if back is None:
        assert not snap['wires'] and not snap['seen'] and not snap['hosts']
        return
    assert back['wires'] == snap['wires']
    for h in set(snap['seen']) | set(snap['hosts']):
        assert back['seen'][h] == snap['seen'].get(h, [])
        assert back['hosts'][h] == snap['hosts'].get(h, {})


def test_an_old_single_row_reads_as_it_was():
    snap = {'seen': {}, 'wires': {'5': ['a|b', {'1': [1, 2]}]}, 'hosts': {}}
    assert counter_rows.snapshot({'flows': json.dumps(snap)}) == snap


def test_changes_name_only_what_differs():
    before = counter_rows.rows({'wires': {'1': ['x', {}], '2': ['y', {}]},
                                'seen': {'h1': []}, 'hosts': {}})
    after = counter_rows.rows({'wires': {'1': ['x', {'1': [1, 1]}],
                                         '3': ['z', {}]},
                               'seen': {'h1': []}, 'hosts': {}})
    insert, update, delete = counter_rows.changes(before, after)
    assert [n for n, _ in insert] == ['wire:3']
    assert [n for n, _ in update] == ['wire:1']
    assert delete == ['wire:2']
    assert counter_rows.changes(after, after) == ([], [], [])
