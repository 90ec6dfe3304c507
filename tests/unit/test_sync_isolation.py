"""A sync never half-applies (issue 39, point 1): one host's bad report or
one switch's unencodable change stays that host's problem. Before, a
host reporting an address that is not an IPv4 one raised in the middle
of a sync: flows recorded as installed were never sent, and the other
hosts' changes of that sync (a deleted wire) were lost."""
from virtualwire.core.model import Encap, Host, VnicPort, \
    carrier_address_problem
from virtualwire.southbound import session as session_mod
from virtualwire.testing.harness import TUN, Harness


def three_hosts():
    h = Harness()
    h.host('h1', ('a', 1), ('c', 2))
    h.host('h2', ('b', 1))
    h.host('h3', ('d', 1))
    return h, h.connect('a', 'b'), h.connect('c', 'd')


def report_h3(h, ip):
    h.loop.post(h.ctl.on_hosts, 'tcp:h3', [Host(
        'h3', 3, (Encap('gre', ip, TUN),),
        vnics=(VnicPort('d', 'vnet1', 1),))], None)


def state(h, wid):
    return h.call(h.ctl.views.wire_view, wid)['state']


def test_carrier_addresses_that_cannot_be_a_tunnels_are_named():
    assert carrier_address_problem('198.19.0.3') is None
    assert carrier_address_problem('not-an-ip') == \
        "'not-an-ip' is not an IP address"
    assert carrier_address_problem('') == "'' is not an IP address"
    assert carrier_address_problem('2001:db8::1') == '2001:db8::1 is not IPv4'
    for ip in ('0.0.0.0', '224.0.0.5', '255.255.255.255', '240.0.0.1'):
        assert carrier_address_problem(ip) == '%s is not a unicast address' \
            % ip


def test_a_bad_address_in_the_same_sync_as_a_delete_spoils_nothing_else():
    h, ab, cd = three_hosts()
    # In one sync: h3 reports an address no tunnel can use, and the wire
    # a-b (h1, h2) is deleted.
    report_h3(h, 'not-an-ip')
    h.loop.call(h.ctl.views.wire, ab['id'])
    h.intent.delete_wire(ab['id'])
    h.settle()
    assert h.send('h1', 1) == [] and h.send('h2', 1) == []   # a-b gone
    assert h.send('h1', 2) == [] and h.send('h3', 1) == []   # c-d waits
    assert state(h, cd['id']) == 'waiting-host'
    status = h.call(h.ctl.views.status)
    assert status['counters']['host_reports_refused'] == 1
    assert [r['why'] for r in status['admission']['recent_refusals']] == [
        "host h3: its gre carrier's address 'not-an-ip' is not an IP "
        "address"]
    # What each switch holds is what the controller believes it holds.
    for name, sw in h.fabric.switches.items():
        s = h.ctl.sessions[sw.id]
        assert sorted(map(repr, s.installed.values())) == \
            sorted(map(repr, sw.flows())), name
    # The same bad report again is not a new refusal; a good one heals.
    report_h3(h, 'not-an-ip')
    h.settle()
    assert h.call(h.ctl.views.status)['counters']['host_reports_refused'] == 1
    report_h3(h, '198.19.0.3')
    h.settle()
    assert state(h, cd['id']) == 'tunnelled'
    assert h.send('h1', 2) == [('h3', 1)] and h.send('h3', 1) == [('h1', 2)]


def test_a_switch_whose_change_cannot_be_encoded_gets_none_of_it(
        monkeypatch):
    h, ab, _ = three_hosts()
    real, broken = session_mod.flowmod_bytes.diff_bundle, [True]

    def h1s_fail(bundle_id, diff):
        # h1's flows are the ones that tunnel to h2's address.
        if broken and '198.19.0.2' in repr(diff):
            raise ValueError('cannot encode')
        return real(bundle_id, diff)

    monkeypatch.setattr(session_mod.flowmod_bytes, 'diff_bundle', h1s_fail)
    h1 = h.ctl.sessions[h.fabric.switches['h1'].id]
    held = dict(h1.installed)
    h.disconnect(ab['id'])
    # h1's change could not be encoded: nothing sent to it and nothing
    # recorded; h2 still got its half of the delete.
    assert h1.installed == held
    assert h.fabric.switches['h1'].flows() == set(held.values())
    assert h.send('h2', 1) == []
    assert h.call(h.ctl.views.status)['counters']['sync_host_failures'] >= 1
    broken.clear()
    h.tick(1)
    # The next sync diffs h1's whole table: the wire is gone there too.
    assert h.send('h1', 1) == []
    assert sorted(map(repr, h1.installed.values())) == \
        sorted(map(repr, h.fabric.switches['h1'].flows()))
