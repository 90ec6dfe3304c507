"""A provider switch's flows (pipeline.switch, issue 41) on the fake
fabric, which runs them as OVS does (testing.fake_walk: resubmit,
registers, learn with a limit): 4 VMs on 3 hosts wired to a switch on
h1. What a user of a switch checks: a broadcast reaches every other port
once and never its own; unicast reaches only its port once learned; an
unknown destination floods; a MAC moves with its first frame from a new
port; a port learns no more than its limit; a part of a split switch
never passes a frame from one part to another."""
import pytest

from virtualwire.core import ids
from virtualwire.core.model import Encap, Host, Location, Wire
from virtualwire.core.switches import ProviderSwitch, parse_end
from virtualwire.pipeline import flow as pf
from virtualwire.pipeline import wire as fl
from virtualwire.pipeline.switch import switch_flows
from virtualwire.pipeline.tables import PipelineError, check
from virtualwire.testing.fakeswitch import FakeFabric, Packet

TUN = 65000
IPS = {'h1': '198.19.0.11', 'h2': '198.19.0.12', 'h3': '198.19.0.13'}
# VM i: its vNIC's host and ofport, and its MAC.
VMS = {1: ('h1', 11), 2: ('h1', 12), 3: ('h2', 13), 4: ('h3', 14)}


def mac(i):
    return '02:00:00:00:00:%02x' % i


def build(switch, vms=VMS, mesh=frozenset(), vlan_ends=()):
    """A fabric of h1-h3 where VM i is wired to port i of `switch`
    (for i in `vlan_ends`, a gateway's VLAN 100+i on h1's port 30+i)."""
    hosts = {n: Host(n, k + 1, encaps=(Encap('gre', ip, TUN),))
             for k, (n, ip) in enumerate(sorted(IPS.items()))}
    fab = FakeFabric()
    for h in hosts.values():
        fab.add(h.name, h.dpid, {TUN: h.tunnel_ip})
    tables = {n: set(pf.host_default_flows(h)) for n, h in hosts.items()}
    tables[switch.host] |= switch_flows(switch, mesh)
    for i, (host, ofport) in vms.items():
        end = switch.end(switch.ports[i - 1])
        wire = Wire(100 + i, 'vm%d' % i, end)
        here = Location(host, ofport) if i not in vlan_ends else \
            Location('h1', 30 + i, 'vlan', 100 + i)
        locations = {'vm%d' % i: here,
                     end: Location(switch.host, i, 'switchport',
                                   switch=switch.number)}
        for h, flows in fl.wire_flows(wire, hosts, locations).items():
            tables[h] |= flows
    for name, sw in fab.switches.items():
        sw.apply(pf.diff_flows(sw.flows(), tables[name]))
    return fab


def send(fab, i, dst, src=None):
    host, ofport = VMS[i]
    return sorted((h, p) for h, p, _ in fab.send(
        host, ofport, forged=Packet(ofport, eth_src=src or mac(i),
                                    eth_dst=dst)))


def web(**kw):
    return ProviderSwitch('web', 'shop', 3, 'h1', ('p1', 'p2', 'p3', 'p4'),
                          **kw)


BROADCAST = 'ff:ff:ff:ff:ff:ff'
EVERY = sorted(VMS.values())


def test_a_broadcast_reaches_every_other_port_once():
    fab = build(web())
    for i in VMS:
        assert send(fab, i, BROADCAST) == [
            v for k, v in sorted(VMS.items()) if k != i], i


def test_unicast_reaches_only_its_port_once_learned():
    fab = build(web())
    # Nothing learned: an unknown destination floods.
    assert send(fab, 3, mac(1)) == [VMS[1], VMS[2], VMS[4]]
    send(fab, 1, BROADCAST)                   # vm1 seen on port 1
    assert send(fab, 3, mac(1)) == [VMS[1]]
    assert send(fab, 4, mac(1)) == [VMS[1]]
    # Learned from any frame (vm3's first, an unknown unicast that
    # crossed a tunnel), for every port.
    assert send(fab, 1, mac(3)) == [VMS[3]]
    assert send(fab, 2, mac(3)) == [VMS[3]]
    assert send(fab, 1, mac(5)) == [VMS[2], VMS[3], VMS[4]]


def test_a_flood_leaves_by_the_carrier_it_came_in_on():
    """vm3's and vm4's wires both reach h1 on its one GRE port: a frame
    from vm3 flooded to vm4 goes back out of the port it came in on,
    which OpenFlow drops unless the switch's in_port was cleared."""
    fab = build(web())
    assert VMS[4] in send(fab, 3, BROADCAST)
    assert VMS[3] in send(fab, 4, BROADCAST)


def test_never_back_out_of_the_port_a_frame_came_in_on():
    fab = build(web())
    send(fab, 1, BROADCAST)
    # vm1 sends to its own MAC (a learned port equal to the in port).
    assert send(fab, 1, mac(1)) == []


def test_a_mac_moves_with_its_first_frame_from_a_new_port():
    fab = build(web())
    send(fab, 1, BROADCAST, src=mac(9))
    assert send(fab, 3, mac(9)) == [VMS[1]]
    send(fab, 4, BROADCAST, src=mac(9))       # it migrated behind port 4
    assert send(fab, 3, mac(9)) == [VMS[4]]


def test_a_port_learns_no_more_than_its_limit():
    fab = build(web(mac_limit=2))
    for k in (20, 21, 22):
        send(fab, 1, BROADCAST, src=mac(k))
    assert send(fab, 3, mac(20)) == [VMS[1]]
    assert send(fab, 3, mac(21)) == [VMS[1]]
    # The third was not learned: flooded, as any unknown destination.
    assert send(fab, 3, mac(22)) == [VMS[1], VMS[2], VMS[4]]
    assert fab.switches['h1'].learn_refused == 1
    # Another port's limit is its own.
    send(fab, 2, BROADCAST, src=mac(23))
    assert send(fab, 3, mac(23)) == [VMS[2]]


def test_a_vlan_end_gets_its_tag_and_no_other_port_does():
    """Ports 1 and 2 lead to two VLANs of a gateway's trunk on h1 (100+i
    on port 30+i): a flood tags each for its own port only."""
    fab = build(web(), vlan_ends=(1, 2))
    out = fab.send('h2', 13, forged=Packet(13, eth_src=mac(3),
                                           eth_dst=BROADCAST))
    assert sorted((h, p, pkt.vlan_vid) for h, p, pkt in out) == [
        ('h1', 31, 101), ('h1', 32, 102), ('h3', 14, None)]


def test_a_frame_from_a_group_address_is_dropped_and_learns_nothing():
    fab = build(web())
    assert send(fab, 1, BROADCAST, src='01:00:5e:00:00:01') == []
    assert send(fab, 3, '01:00:5e:00:00:01') == [VMS[1], VMS[2], VMS[4]]


def test_split_horizon_a_mesh_port_never_feeds_another():
    """Ports 3 and 4 join this part to two other parts: a frame from one
    part reaches the local ports only, and a unicast known behind one
    mesh port is not passed on from another."""
    fab = build(web(), mesh=frozenset({3, 4}))
    assert send(fab, 3, BROADCAST) == [VMS[1], VMS[2]]
    assert send(fab, 1, BROADCAST) == [VMS[2], VMS[3], VMS[4]]
    send(fab, 4, BROADCAST, src=mac(30))     # mac 30 is behind part 4
    assert send(fab, 3, mac(30)) == []
    assert send(fab, 1, mac(30)) == [VMS[4]]


def test_switch_flows_fit_the_declared_pipeline():
    for f in switch_flows(web(), frozenset({4})):
        check(f)
    bad = pf.Flow(3, 150, (), (('resubmit', 1),), ids.switch_cookie(3))
    with pytest.raises(PipelineError, match='resubmit to table 1'):
        check(bad)


@pytest.mark.parametrize('end,words', [
    ('sw:Web/p1', 'sw:SWITCH/PORT'),
    ('sw:web', 'sw:SWITCH/PORT'),
    ('sw:web/' + 'p' * 16, 'up to 15'),
])
def test_a_bad_switch_end_says_what_is_wrong(end, words):
    with pytest.raises(ids.InvalidId, match=words):
        parse_end(end)


def test_a_switch_end_parses_and_other_ends_are_not_one():
    assert parse_end('sw:web/p1') == ('web', 'p1')
    assert parse_end('gw1/p1/5') is None and parse_end('vnic-1') is None


@pytest.mark.parametrize('kw,words', [
    (dict(number=0), 'number is 1-65535'),
    (dict(ports=('p1', 'p1')), 'names a port twice'),
    (dict(ports=('p 1',)), 'a port name'),
    (dict(mac_limit=0), 'mac_limit'),
    (dict(name='Web'), 'a switch name'),
])
def test_a_bad_switch_says_what_is_wrong(kw, words):
    args = dict(name='web', tenant='shop', number=3, host='h1',
                ports=('p1',))
    args.update(kw)
    with pytest.raises(ids.InvalidId, match=words):
        ProviderSwitch(**args)


def test_a_reconnect_keeps_what_a_switch_learned_and_removes_the_rest():
    """A dump on reconnect lists the MACs a switch learned itself: the
    controller's diff leaves them (they are the switch's, and go by their
    idle timeout) but still removes a stale flow of a switch's own."""
    from virtualwire.testing.harness import Harness
    h = Harness()
    h.host('h1', ('a', 1))
    sw = h.fabric.switches['h1']
    mine = pf.Flow(2, 100, (('eth_dst', mac(7)), ('reg4', 3)),
                   (('set_field', 'reg6', 2),),
                   ids.switch_cookie(3, 2, ids.SW_LEARNED))
    stale = pf.Flow(3, 100, (('reg4', 3),), (('resubmit', 4),),
                    ids.switch_cookie(3))
    sw.apply(pf.FlowDiff([mine, stale], [], []))
    h.reconnect('h1')
    keys = {f.key for f in sw.flows()}
    assert mine.key in keys and stale.key not in keys
