"""The Geneve carrier on the fake fabric (which maps the option and
refuses its field before that, as OVS does): the full 32-bit connector id
in the option (two wires whose ids share their low 24 bits, the VNI,
never meet), every frame kind unchanged, the option map sent before the
first flow on each connection, a forged frame dropped, a migration."""
import uuid

import pytest

from virtualwire.core import ids
from virtualwire.pipeline.carriers import choose
from virtualwire.core.model import Encap, Host
from virtualwire.testing.fakeswitch import Packet
from virtualwire.testing.harness import TUN, Harness

# Two ids with the same low 24 bits: one VNI.
CID1, CID2 = 0x01ABCDEF, 0x02ABCDEF
KINDS = {'ipv4': 0x0800, 'arp': 0x0806, 'rarp': 0x8035, 'ipv6': 0x86dd,
         'vlan-tagged': 0x8100, 'qinq': 0x88a8, 'lldp': 0x88cc,
         'experimental': 0x88b5}


def geneve_harness():
    h = Harness()
    h.carrier = 'geneve'
    h.host('h1', ('a1', 1), ('a2', 2))
    h.host('h2', ('b1', 1), ('b2', 2))
    h.host('h3', ('c', 1))
    return h


def connect(h, a, b, cid):
    w = h.intent.create_wire(a, b, cid=cid)
    h.settle()
    return w


def test_the_option_carries_all_32_bits_and_the_vni_the_low_24():
    h = geneve_harness()
    connect(h, 'a1', 'b1', CID1)
    connect(h, 'a2', 'b2', CID2)
    seen = []
    real = h.fabric.switches['h1'].process

    def spy(pkt):
        out = real(pkt)
        seen.extend(p for port, p in out if port == TUN)
        return out
    h.fabric.switches['h1'].process = spy
    assert h.fabric.deliveries('h1', 1) == [('h2', 1)]
    assert h.fabric.deliveries('h1', 2) == [('h2', 2)]
    assert [(p.tun_metadata0, p.tunnel_id) for p in seen] == [
        (CID1, CID1 & 0xFFFFFF), (CID2, CID2 & 0xFFFFFF)]
    assert CID1 & 0xFFFFFF == CID2 & 0xFFFFFF


@pytest.mark.parametrize('kind', sorted(KINDS))
def test_every_frame_kind_crosses_unchanged_both_ways(kind):
    h = geneve_harness()
    connect(h, 'a1', 'b1', CID1)
    payload = b'kind-' + kind.encode() * 8
    for src, dst in (('h1', ('h2', 1)), ('h2', ('h1', 1))):
        out = h.fabric.send(src, 1, payload=payload, eth_type=KINDS[kind])
        assert [(n, p) for n, p, _ in out] == [dst]
        pkt = out[0][2]
        assert (pkt.payload, pkt.eth_type) == (payload, KINDS[kind])


def test_the_map_goes_before_the_first_flow_and_again_on_a_reconnect():
    h = geneve_harness()
    connect(h, 'a1', 'b1', CID1)
    sw = h.fabric.switches['h1']
    names = [type(m).__name__ for m in sw.sent]
    assert 'OFPExperimenter' in names
    first_bundle = names.index('OFPBundleCtrlMsg')
    tlv = names.index('OFPExperimenter')
    assert tlv < first_bundle or not any(
        'tun_metadata0' in str(m) for m in sw.sent[:first_bundle])
    assert sw.tlv_mapped
    errors = h.call(h.ctl.views.status)['counters']['switch_errors']
    # A new connection of ours sends the map again; the switch says it has
    # it (an error) and nothing is dumped again for it.
    h.reconnect('h1')
    connect(h, 'a2', 'b2', CID2)
    assert h.call(h.ctl.views.status)['counters']['switch_errors'] == errors
    assert h.fabric.deliveries('h1', 2) == [('h2', 2)]


def test_gre_hosts_send_no_map():
    h = Harness()
    h.host('h1', ('a1', 1))
    h.host('h2', ('b1', 1))
    connect(h, 'a1', 'b1', CID1)
    assert not any(type(m).__name__ == 'OFPExperimenter'
                   for m in h.fabric.switches['h1'].sent)


def test_a_forged_frame_from_a_third_host_is_dropped():
    h = geneve_harness()
    connect(h, 'a1', 'b1', CID1)
    forged = Packet(TUN, b'forged', tun_metadata0=CID1,
                    tunnel_id=CID1 & 0xFFFFFF, tun_ipv4_src=h.ip('h3'))
    assert h.fabric.send('h2', TUN, forged=forged) == []
    genuine = Packet(TUN, b'ok', tun_metadata0=CID1,
                     tun_ipv4_src=h.ip('h1'))
    assert [(n, p) for n, p, _ in h.fabric.send('h2', TUN,
                                                forged=genuine)] == [('h2', 1)]
    # Right VNI, another wire's option: nothing.
    other = Packet(TUN, b'x', tun_metadata0=CID2, tunnel_id=CID1 & 0xFFFFFF,
                   tun_ipv4_src=h.ip('h1'))
    assert h.fabric.send('h2', TUN, forged=other) == []


def test_a_site_with_both_carriers_prefers_geneve_and_gre_only_hosts_keep_gre():
    both = Host('x', 1, (Encap('gre', '10.0.0.1', 1),
                         Encap('geneve', '10.0.0.1', 2)))
    gre = Host('y', 2, (Encap('gre', '10.0.0.2', 1),))
    gen = Host('z', 3, (Encap('geneve', '10.0.0.3', 2),))
    assert choose(both, gen)[0].type == 'geneve'
    assert choose(both, gre)[0].type == 'gre'
    assert choose(gre, gen) is None, 'no common carrier: no path'


def test_a_guest_migrates_between_geneve_hosts():
    h = geneve_harness()
    w = connect(h, 'a1', 'c', CID1)
    vm = str(uuid.uuid4())
    h.call(h.ctl.moves.announce_migration, {
        'vm': 'guest', 'vm_uuid': vm, 'vnics': ['a1'], 'destination': 'h2'})
    h.host('h2', ('b1', 1), ('b2', 2), ('a1', 3))     # destination plugged
    assert h.fabric.deliveries('h3', 1) == [('h1', 1)]
    # The guest's first frame on h2 activates it there, in the switch.
    assert h.fabric.deliveries('h2', 3) == [('h3', 1)]
    h.host('h1', ('a2', 2))                           # source port gone
    assert h.fabric.deliveries('h3', 1) == [('h2', 3)]
    view = h.call(h.ctl.views.wire_view, w.connector_id)
    assert view['state'] == 'tunnelled' and not view.get('moving')
    assert ids.fmt_connector(CID1) == view['connector_id']
