"""A router guest (BIRD in the QEMU lab guest) live-migrated within a site
keeps its OSPF adjacency (1 s hello) and its BGP session (3 s hold): no
neighbour changes state on either side, and a probe routed through it
loses only inside the guest's pause (vwtest.router_move; across clouds:
bench/soak/test_soak_clouds.py)."""
from vwtest import seq
from vwtest.router_move import routed_move


def test_a_router_guest_keeps_ospf_and_bgp_through_a_move(lab, guest_retry):
    h1, h2, h3 = lab.hosts
    # Both neighbours on h3: both wires re-point. Not R2 on the
    # destination: OVS 3.1 drops tunnelled traffic into a host for a few
    # ms when libvirt plugs the destination's tap (README). The cross-cloud
    # test has R2 beside the destination (its wire collapses).
    guest_retry.run(lambda d: routed_move(lab, h1, h2, h3, h3,
                                          's%d' % next(seq), 1000, d))
