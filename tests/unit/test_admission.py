"""Admission (control.admission): which switch connections and host OVSDB
reports the controller believes when certificates are required. Driven
against the fake fabric; the same attacks on real OVS over TLS are in
tests/integration/test_southbound_trust.py."""
import time

from virtualwire.core.ids import derived_dpid
from virtualwire.core.model import Encap, Host, VnicPort
from virtualwire.testing.harness import TUN, Harness

D1 = derived_dpid('h1')     # h1's datapath id under certificates


def _lab():
    h = Harness(require_identity=True)
    h.host('h1', ('a', 1))
    h.host('h2', ('b', 1))
    h.host('h3', ('c', 1))
    w = h.connect('a', 'b')
    assert h.send('h1', 1) == [('h2', 1)]
    return h, w


def _refusals(h):
    return h.call(h.ctl.views.status)['admission']['recent_refusals']


def test_a_switch_whose_certificate_names_another_host_is_refused():
    h, w = _lab()
    before = h.fabric.switches['h1'].flows()
    # A machine holding h2's certificate connects with h1's datapath id.
    rogue = h.fabric.add('rogue', D1, {TUN: '198.19.0.9'},
                         address=('198.18.0.99', 40000))
    h.loop.post(h.ctl.on_switch_up, rogue, frozenset({'h2'}))
    h.settle()
    assert rogue.closed and rogue.sent == []      # not even a flow dump
    assert h.fabric.switches['h1'].flows() == before
    why = _refusals(h)[-1]
    assert why['peer'] == '198.18.0.99:40000' and why['why'] == \
        'datapath %016x is not derived from a name its certificate holds ' \
        '(h2)' % D1
    # The real h1 still gets every change.
    h.host('h1', ('a', 1), ('x', 2))
    h.host('h3', ('c', 1), ('y', 2))
    h.connect('x', 'y')
    assert h.send('h1', 2) == [('h3', 2)]


def test_a_switch_without_a_certificate_is_refused():
    h, _w = _lab()
    rogue = h.fabric.add('rogue', 77, {TUN: '198.19.0.9'})
    h.loop.post(h.ctl.on_switch_up, rogue, None)
    h.settle()
    assert rogue.closed and 'no verified certificate' in \
        _refusals(h)[-1]['why']
    assert h.call(h.ctl.views.status)['counters']['switches_refused'] == 1


def test_a_second_connection_cannot_take_over_a_connected_datapath():
    h, w = _lab()
    victim = h.fabric.switches['h1']
    # Same datapath id, a certificate naming a host we do not know yet
    # (so the name check alone would not catch it).
    rogue = h.fabric.add('rogue', D1, {TUN: '198.19.0.9'})
    h.loop.post(h.ctl.on_switch_up, rogue, frozenset({'h9'}))
    h.settle()
    assert rogue.closed and not victim.closed
    assert h.ctl.sessions[D1].dp is victim
    # A change still reaches the victim, and only it.
    h.host('h1', ('a', 1), ('x', 2))
    h.host('h2', ('b', 1), ('y', 2))
    h.connect('x', 'y')
    assert h.send('h1', 2) == [('h2', 2)]
    assert not any(type(m).__name__ == 'OFPFlowMod' for m in rogue.sent)


def test_the_same_switch_reconnecting_replaces_its_session():
    h, w = _lab()
    old = h.fabric.switches['h1']
    old.silent = True           # restarted: its old connection is dead
    again = h.fabric.add('h1-again', D1, {TUN: h.ip('h1')})
    h.loop.post(h.ctl.on_switch_up, again, frozenset({'h1'}))
    h.settle()
    # The old connection still looks open: asked first, the newcomer waits.
    assert h.ctl.sessions[D1].dp is old and not again.closed
    h.loop.post(h.ctl.on_switch_down, old)      # then its end arrives
    h.settle()
    assert h.ctl.sessions[D1].dp is again
    assert again.flows() == old.flows()            # dumped, then synced
    assert h.call(h.ctl.views.status)['counters']['switch_takeovers_refused'] == 0


def test_a_reconnect_takes_over_a_session_that_does_not_answer():
    h, w = _lab()
    h.ctl.admission.switch_takeovers.probe = 0.05
    old = h.fabric.switches['h1']
    old.silent = True           # half-open: no end arrives, no answer
    again = h.fabric.add('h1-again', D1, {TUN: h.ip('h1')})
    h.loop.post(h.ctl.on_switch_up, again, frozenset({'h1'}))
    h.settle()
    assert h.ctl.sessions[D1].dp is old
    time.sleep(0.2)
    h.settle()
    assert old.closed and h.ctl.sessions[D1].dp is again
    assert again.flows() == old.flows()
    assert h.send('h1', 1) == [('h2', 1)]


def test_a_stolen_key_cannot_take_over_a_switch_that_answers():
    h, w = _lab()
    h.ctl.admission.switch_takeovers.probe = 0.05
    real = h.fabric.switches['h1']
    flows = real.flows()
    for attempt in range(3):     # the impostor retries, as OVS would
        thief = h.fabric.add('thief%d' % attempt, D1, {TUN: '198.19.0.9'},
                             address=('198.18.0.99', 40000 + attempt))
        h.loop.post(h.ctl.on_switch_up, thief, frozenset({'h1'}))
        h.settle()
        time.sleep(0.1)
        h.settle()
        assert thief.closed and not real.closed
        assert h.ctl.sessions[D1].dp is real
        assert not any(type(m).__name__ == 'OFPFlowMod' for m in thief.sent)
    assert real.flows() == flows
    status = h.call(h.ctl.views.status)
    assert status['counters']['switch_takeovers_refused'] == 3
    why = status['admission']['recent_refusals'][-1]
    assert why['kind'] == 'switch takeover' and \
        why['peer'] == '198.18.0.99:40002' and 'answers' in why['why'] and \
        'key in two places' in why['why'], why
    assert h.call(h.ctl.views.metrics_view)['takeovers_refused'] == {'h1': 3}
    # The real switch still gets every change.
    h.host('h1', ('a', 1), ('x', 2))
    h.host('h2', ('b', 1), ('y', 2))
    h.connect('x', 'y')
    assert h.send('h1', 2) == [('h2', 2)]


def test_an_ovsdb_report_of_a_host_its_certificate_does_not_name_is_ignored():
    h, w = _lab()
    # A rogue OVSDB with h3's certificate reports a bridge named h1 with
    # the victim's vNIC plugged: neither a host nor a migration of 'a'.
    fake = Host('h1', 1, (Encap('gre', '198.19.0.9', TUN),),
                vnics=(VnicPort('a', 'vnet9', 9),))
    h.loop.post(h.ctl.on_hosts, 'ssl:198.18.0.99:6640', [fake],
                frozenset({'h3'}))
    h.settle()
    assert 'reports host h1 but its certificate names h3' in \
        _refusals(h)[-1]['why']
    assert h.send('h1', 1) == [('h2', 1)] and h.send('h2', 1) == [('h1', 1)]
    assert h.call(h.ctl.views.migration_views) == []
    assert h.call(h.ctl.views.wire_view, w['id'])['host_a'] == 'h1'


def test_a_host_claiming_anothers_datapath_id_is_ignored():
    h, w = _lab()
    # h3 (its own certificate) reports a second bridge as h4 with h1's
    # datapath id: believing it would turn h1's switch away.
    h.host('h4', identity=frozenset({'h4'}), dpid=D1, connect=False)
    assert _refusals(h)[-1]['why'] == (
        "host h4 reports datapath id %016x; under certificates it must be "
        "%016x, derived from its name (vw-host-setup's default), so that no "
        "host can take another's" % (D1, derived_dpid('h4')))
    assert not h.fabric.switches['h1'].closed
    assert h.send('h1', 1) == [('h2', 1)]


def test_no_certificate_can_pre_claim_another_hosts_datapath_id():
    """Review point 3: datapath ids derived from names are predictable, so
    a switch with h2's certificate connected first with the id h1 would
    get: h1 was locked out until its OVSDB said so. Under certificates an
    id must derive from a name the certificate holds: refused at once."""
    h = Harness(require_identity=True)
    h.host('h2', ('b', 1))
    rogue = h.fabric.add('rogue', D1, {TUN: '198.19.0.9'})
    h.loop.post(h.ctl.on_switch_up, rogue, frozenset({'h2'}))
    h.settle()
    assert rogue.closed and D1 not in h.ctl.sessions
    h.host('h1', ('a', 1))
    assert not h.fabric.switches['h1'].closed and D1 in h.ctl.sessions
    h.connect('a', 'b')
    assert h.send('h1', 1) == [('h2', 1)]
    assert not any(type(m).__name__ == 'OFPFlowMod' for m in rogue.sent)


def test_without_certificates_required_nothing_is_refused():
    h = Harness()
    h.host('h1', ('a', 1))
    h.ctl.admission.switch_takeovers.probe = 0.05
    h.fabric.switches['h1'].silent = True
    again = h.fabric.add('h1-again', 1, {TUN: h.ip('h1')})
    h.loop.post(h.ctl.on_switch_up, again, None)
    h.settle()
    time.sleep(0.2)             # a reconnect still asks the old one first
    h.settle()
    assert h.ctl.sessions[1].dp is again
    assert h.call(h.ctl.views.status)['admission'] == {
        'certificates_required': False, 'recent_refusals': []}


def test_packet_ins_of_a_connection_that_is_not_a_session_count_for_nobody():
    """Review point 3: frames from a connection with h2's datapath id that
    was refused (or waits on a takeover probe) are not h2's: they activate
    no migration to h2."""
    from os_ken.ofproto import ofproto_v1_4_parser as parser
    from test_controller_migration import _migrating
    h, w, _vm = _migrating()
    h.host('h2', ('g', 2))                          # destination plugged
    rogue = h.fabric.add('rogue', h.ctl.tables.hosts['h2'].dpid,
                         {TUN: '198.19.0.9'})
    frame = bytes.fromhex('ffffffffffff020000000001') + b'\x80\x35' + \
        b'\0' * 28

    def packet_in(dp):
        h.loop.post(h.ctl.on_packet_in, parser.OFPPacketIn(
            dp, buffer_id=0xffffffff, total_len=len(frame), reason=1,
            table_id=0, cookie=0, match=parser.OFPMatch(in_port=2),
            data=frame))
        h.settle()
        return h.call(h.ctl.views.wire_view, w['id'])['moving']['g']['activated']
    assert packet_in(rogue) is False
    assert packet_in(h.fabric.switches['h2']) is True     # the control
