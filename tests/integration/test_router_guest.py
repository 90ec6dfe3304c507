"""A router guest (BIRD in the QEMU lab guest) live-migrated within a site
keeps its OSPF adjacency (1 s hello) and its BGP session (3 s hold): no
neighbour changes state on either side, and a probe routed through it
loses only inside the guest's pause (router_move.py; across clouds:
test_clouds_migration.py)."""
import pytest

from router_move import routed_move

ATTEMPTS = 3           # runs whose guest QEMU broke are done again


def test_a_router_guest_keeps_ospf_and_bgp_through_a_move(lab):
    h1, h2, h3 = lab.hosts
    for k in range(ATTEMPTS):
        # R1 on h3 (its wire re-points), R2 on h2: its wire collapses when
        # the guest arrives beside it.
        if routed_move(lab, h1, h2, h3, h2, 's%d' % k, 1000) is not None:
            return
    pytest.fail('the router guest broke (QEMU TCG virtio fault) in all '
                '%d runs' % ATTEMPTS)
