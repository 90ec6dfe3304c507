"""Strict placement and moves both hypervisors agree on, on the fake
fabric that runs the controller's real OpenFlow: under strict placement
a vNIC the cloud has not placed is nobody's; a placed vNIC moves when
its destination's hook announces the guest and its source's agent
reports it leaving (in either order), not on one of them alone, and not
when the source's stream goes to another host's address."""
import uuid

import pytest

from virtualwire.core import departures, errors
from virtualwire.testing.harness import Harness

VM = str(uuid.uuid4())


def strict_pair():
    """g on h1 wired to f on h2, both placed; h3 empty; strict."""
    h = Harness(strict=True)
    for v, host in (('g', 'h1'), ('f', 'h2')):       # before they plug
        h.intent.placements.place(v, host, 'orchestrator nova', 0.0)
    h.host('h1', ('g', 1))
    h.host('h2', ('f', 5), vm=VM)
    h.host('h3')
    w = h.connect('g', 'f')
    assert h.send('h1', 1) == [('h2', 5)]
    return h, w


def write(h, words):
    """What REST does with the words a pair authorized."""
    for v, word in words.items():
        h.intent.placements.place(v, word.host, 'hypervisors', 1.0)
    h.settle()


def announce(h, dest='h3'):
    h.call(h.ctl.moves.announce_migration, {'vm': 'x', 'vm_uuid': VM,
                                            'vnics': ['f'], 'destination': dest})
    write(h, h.call(h.ctl.cloud_word.words_for_move, VM))


def depart(h, source='h2', to=None):
    doc = {'host': source, 'vm_uuid': VM, 'vnics': ['f']}
    if to is not None:
        doc['to_address'] = to
    write(h, h.call(h.ctl.cloud_word.report_departure, source, doc))


def test_an_unplaced_vnic_is_nobodys_until_the_cloud_places_it():
    h = Harness(strict=True)
    h.host('h1', ('g', 1))
    h.host('h2', ('f', 5))
    h.connect('g', 'f')
    assert h.send('h1', 1) == [] and h.send('h2', 5) == []
    refused = h.call(h.ctl.views.status)['refused_claims']
    assert {(r['vnic'], r['host'], r['placed_on']) for r in refused} == {
        ('g', 'h1', None), ('f', 'h2', None)}
    assert h.call(h.ctl.views.metrics_view)['claims_refused'] == {'h1': 1, 'h2': 1}
    for v, host in (('g', 'h1'), ('f', 'h2')):
        h.intent.placements.place(v, host, 'orchestrator nova', 0.0)
    h.settle()
    assert h.send('h1', 1) == [('h2', 5)]
    assert h.call(h.ctl.views.status)['refused_claims'] == []


def test_trusting_hosts_is_a_setting_that_can_be_turned_strict_live():
    h = Harness()
    h.host('h1', ('g', 1))
    h.host('h2', ('f', 5))
    h.connect('g', 'f')
    assert h.send('h1', 1) == [('h2', 5)]
    h.call(h.ctl.set_strict, True)
    h.settle()
    assert h.send('h1', 1) == []
    h.call(h.ctl.set_strict, False)
    h.settle()
    assert h.send('h1', 1) == [('h2', 5)]


@pytest.mark.parametrize('order', ['announce-first', 'depart-first'])
def test_a_move_both_hosts_agree_on_goes_through(order):
    h, w = strict_pair()
    if order == 'announce-first':
        announce(h)
        h.host('h3', ('f', 7), vm=VM)       # the destination's tap
        # Awaiting the source: no traffic there, listed, not alarmed.
        assert h.send('h3', 7, eth_type=0x8035) == []
        refused = h.call(h.ctl.views.status)['refused_claims']
        assert refused == [{'vnic': 'f', 'host': 'h3', 'port': 7,
                            'placed_on': 'h2', 'awaiting_source': True}]
        depart(h, to=h.ip('h3'))
    else:
        depart(h, to=h.ip('h3'))
        announce(h)
        h.host('h3', ('f', 7), vm=VM)
    assert h.call(h.ctl.views.metrics_view)['claims_refused'] == {}
    # The guest's first frame on h3 activates it there.
    assert h.send('h3', 7, eth_type=0x8035) == [('h1', 1)]
    assert h.send('h1', 1) == [('h3', 7)]
    h.host('h2')                                       # the source goes
    assert h.call(h.ctl.views.wire_view, w['id'])['moving'] == {}
    assert h.intent.placements.words()['f'].host == 'h3'


def test_the_destinations_hook_alone_moves_nothing_and_alarms_at_timeout():
    h, _w = strict_pair()
    announce(h)
    h.host('h3', ('f', 7), vm=VM)
    assert h.send('h3', 7, eth_type=0x8035) == []
    assert h.send('h1', 1) == [('h2', 5)]
    assert h.call(h.ctl.views.metrics_view)['claims_refused'] == {}
    h.call(h.ctl.tick)                                 # the move is seen
    h.now += 1000                                      # past move-timeout
    h.call(h.ctl.tick)
    h.settle()
    assert h.call(h.ctl.views.metrics_view)['claims_refused'] == {'h3': 1}
    assert h.send('h1', 1) == [('h2', 5)]


def test_a_stream_to_another_hosts_address_is_not_believed():
    h, _w = strict_pair()
    announce(h)
    h.host('h3', ('f', 7), vm=VM)
    depart(h, to=h.ip('h1'))               # the source sends to h1
    assert h.send('h3', 7, eth_type=0x8035) == []
    assert h.send('h1', 1) == [('h2', 5)]
    why = h.call(h.ctl.views.status)['departures_refused']
    assert why and 'not h3' in why[-1]['why'], why


def test_a_host_the_vnic_is_not_placed_on_cannot_report_it_leaving():
    h, _w = strict_pair()
    announce(h)
    h.host('h3', ('f', 7), vm=VM)
    # h1 (compromised) says h2's guest is leaving: not h1's to give.
    depart(h, source='h1', to=h.ip('h3'))
    assert h.send('h3', 7, eth_type=0x8035) == []
    assert h.send('h1', 1) == [('h2', 5)]
    why = h.call(h.ctl.views.status)['departures_refused']
    assert 'placed on h2, not on h1' in why[-1]['why'], why


@pytest.mark.parametrize('doc, says', [
    ({'host': 'h2', 'vm_uuid': 'nope', 'vnics': ['f']}, 'vm_uuid'),
    ({'host': 'h2', 'vm_uuid': VM, 'vnics': []}, 'vnics'),
    ({'host': 'h2', 'vm_uuid': VM, 'vnics': ['f'], 'to_address': 'x'},
     'to_address'),
    ({'host': 'h1', 'vm_uuid': VM, 'vnics': ['f']}, 'reporting host h2'),
    ({'host': 'h2', 'vm_uuid': VM, 'vnics': ['f'], 'extra': 1}, 'extra'),
])
def test_a_bad_report_says_what_is_wrong(doc, says):
    with pytest.raises(errors.VwError) as e:
        departures.parse(doc, 'h2', 0.0)
    assert says in e.value.message


def test_a_guest_back_and_forth_needs_a_fresh_report_each_way():
    """A report is spent by the move it authorized: the guest's move back
    is not believed on the old report (and the old one is no alarm)."""
    h, w = strict_pair()
    depart(h, to=h.ip('h3'))
    announce(h)
    h.host('h3', ('f', 7), vm=VM)
    assert h.send('h3', 7, eth_type=0x8035) == [('h1', 1)]
    h.host('h2')                                       # the source goes
    # Back to h2: announced, but h3 has not reported it leaving yet.
    announce(h, dest='h2')
    h.host('h2', ('f', 6), vm=VM)
    assert h.send('h2', 6, eth_type=0x8035) == []
    assert h.send('h1', 1) == [('h3', 7)]
    assert h.call(h.ctl.views.status)['departures_refused'] == []
    depart(h, source='h3', to=h.ip('h2'))
    assert h.send('h2', 6, eth_type=0x8035) == [('h1', 1)]
    assert h.intent.placements.words()['f'].host == 'h2'


def test_a_move_made_while_the_controller_was_away_is_believed_later():
    """The controller was down while the guest moved: no hook announced
    it. Its source's agent says it again when the controller is back;
    the destination's word is then its own switch holding the guest's
    port (libvirt's vm-id), refused until then."""
    h, w = strict_pair()
    h.host('h3', ('f', 7), ('other', 8), vm=VM)      # the guest arrived
    h.host('h2')                                     # and left its source
    assert h.send('h3', 7, eth_type=0x8035) == []    # no word yet
    depart(h, to=h.ip('h3'))
    assert h.intent.placements.words()['f'].host == 'h3'
    assert h.call(h.ctl.cloud_word.departure_settled, VM, 'h2')
    assert h.send('h3', 7, eth_type=0x8035) == [('h1', 1)]
    assert h.send('h1', 1) == [('h3', 7)]
    assert h.call(h.ctl.views.wire_view, w['id'])['host_b'] == 'h3'


def test_a_port_of_another_guest_is_not_the_destinations_word():
    h, _w = strict_pair()
    h.host('h3', ('f', 7), vm=str(uuid.uuid4()))   # not the guest leaving
    depart(h, to=h.ip('h3'))
    assert h.intent.placements.words()['f'].host == 'h2'
    assert h.send('h3', 7, eth_type=0x8035) == []
    assert not h.call(h.ctl.cloud_word.departure_settled, VM, 'h2')


def test_a_restart_mid_move_keeps_the_source_until_the_guest_leaves():
    """The words were written (both hosts said so), then the controller
    restarted before the guest left: its source is still the guest's,
    and its leaving completes the migration (it once was refused at the
    restart, so the record never completed)."""
    h, w = strict_pair()
    announce(h)
    depart(h, to=h.ip('h3'))
    h.host('h3', ('f', 7), vm=VM)
    n = Harness(intent=h.intent, runtime=h.runtime, fabric=h.fabric,
                strict=True)
    for name in ('h1', 'h2', 'h3'):
        n.reconnect(name)
    n.host('h1', ('g', 1), connect=False)
    n.host('h2', ('f', 5), connect=False, vm=VM)
    n.host('h3', ('f', 7), connect=False, vm=VM)
    assert n.call(n.ctl.views.status)['refused_claims'] == []
    assert n.send('h3', 7, eth_type=0x8035) == [('h1', 1)]
    n.host('h2', connect=False)                       # the guest left
    [m] = n.call(n.ctl.views.migration_views)
    assert m['state'] == 'completed', m
    assert n.call(n.ctl.views.wire_view, w['id'])['host_b'] == 'h3'


def test_a_report_said_again_after_its_move_is_not_kept():
    """The agent repeats a report until it is settled: one that arrives
    after its move is over is not kept, so the guest's next move is not
    judged against it."""
    h, _w = strict_pair()
    depart(h, to=h.ip('h3'))
    announce(h)
    assert h.intent.placements.words()['f'].host == 'h3'
    depart(h, to=h.ip('h3'))                    # said again, late
    assert h.call(h.ctl.cloud_word.departure_settled, VM, 'h2')
    assert VM not in h.ctl.cloud_word.departures.pending
