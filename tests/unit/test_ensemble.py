"""Moving a topology together (pure): who moves, where to, in which
order."""
import pytest

from virtualwire.core import ensemble, errors
from virtualwire.core.ensemble import Member

HOSTS = [{'name': 'h1', 'site': 'a'}, {'name': 'h2', 'site': 'b'},
         {'name': 'h3', 'site': 'b'}, {'name': 'xb', 'site': 'b',
                                       'role': 'extender'}]


def view(nodes, links=()):
    return {'name': 'shop', 'nodes': [
        {'name': n, 'vm': 'uuid-' + n, 'hosts': [h] if h else []}
        for n, h in nodes],
        'links': [{'a': a + ':eth0', 'b': b + ':eth0',
                   'bits_per_second': bps} for a, b, bps in links]}


def test_members_are_the_topologys_vms_or_those_named():
    v = view([('web', 'h1'), ('db', 'h1'), ('fw', 'h2')])
    assert [m.node for m in ensemble.members(v)] == ['web', 'db', 'fw']
    assert ensemble.members(v, ['db', 'uuid-fw']) == [
        Member('db', 'uuid-db', 'h1'), Member('fw', 'uuid-fw', 'h2')]
    with pytest.raises(errors.NotFound, match='no node or VM cache'):
        ensemble.members(v, ['cache'])


def test_a_member_already_moving_is_refused():
    v = view([('web', 'h1')])
    v['nodes'][0]['hosts'] = ['h1', 'h2']
    with pytest.raises(errors.Conflict, match='being migrated already'):
        ensemble.members(v)


def test_a_site_means_one_of_its_hypervisors_the_one_with_most_members():
    group = [Member('a', 'u', 'h1'), Member('b', 'u', 'h3')]
    assert ensemble.destination('h2', HOSTS, group) == 'h2'
    assert ensemble.destination('b', HOSTS, group) == 'h3'
    assert ensemble.destination('b', HOSTS, [Member('a', 'u', 'h1')]) == 'h2'
    with pytest.raises(errors.NotFound, match='no hypervisor or site c'):
        ensemble.destination('c', HOSTS, group)
    with pytest.raises(errors.NotFound):
        ensemble.destination('xb', HOSTS, group)      # not a hypervisor


def test_order_keeps_talking_members_together_and_quiet_ones_first():
    links = [('web', 'db', 8e6), ('fw', 'web', 1e6), ('log', 'fw', 0.0)]
    # No one is there yet: the quiet log server first (it splits nothing
    # busy), then fw (1 Mbit/s to web), then web (pulled by fw, pushed by
    # db's 8 Mbit/s, still the best), then db.
    assert ensemble.order(['web', 'db', 'fw', 'log'], links) == [
        'log', 'fw', 'web', 'db']
    # db already there pulls web first, then fw follows web.
    assert ensemble.order(['web', 'fw', 'log'], links, ['db']) == [
        'web', 'fw', 'log']
    # No traffic known: the file's order.
    assert ensemble.order(['c', 'a', 'b'], []) == ['c', 'a', 'b']


def test_split_traffic_counts_links_across_hosts():
    links = [('a', 'b', 5.0), ('b', 'c', 7.0)]
    assert ensemble.split_traffic(links, {'a': 'h1', 'b': 'h1',
                                          'c': 'h2'}) == 7.0
