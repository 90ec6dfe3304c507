"""Soak, across clouds: combinations whose parts CI shows one by one
(tests/integration: three guests moved together within a site, one guest
moved to another cloud and back, a router guest moved within a site).
Here three guests go to another cloud two at a time, and a router guest
keeps OSPF and BGP while it crosses; each judged as CI judges a move
(vwtest.switchover), a broken TCG guest retried (vwtest.retry)."""
from vwtest import Api, seq, switchover, wait_until

SWITCHOVER_MS = 50.0   # RESUME -> first delivery into the destination tap
RATE = 250             # 4 ms apart: 1 kHz through the userspace extenders
ATTEMPTS = 5           # starves two cores (tests/integration/clouds)


def test_soak_three_guests_move_together_to_another_cloud(clouds,
                                                         guest_retry,
                                                         soak_round):
    """`vwctl migrate --topology T --to cloud-b`: three guests (two with
    two vNICs, wired to each other) from h1 (cloud-a) to cloud-b's
    hypervisor, two at a time, the streams through the extenders. Every
    wire ends in the right state: the far ones extended through both
    extenders, the one between members collapsed on h2. Each guest QEMU's
    TCG fault did not break is judged (vwtest.switchover); a run where it
    broke them all is done again."""
    guest_retry.run(lambda d: _three_to_cloud_b(clouds, d, next(seq)),
                    ATTEMPTS)


def _three_to_cloud_b(clouds, workdir, k):
    from vwtest.migration import Ensemble
    api = Api(clouds)
    h1, h2, h3 = clouds.hosts[:3]
    ens = Ensemble(clouds, 'xens%d' % k, h1, h3, workdir)
    try:
        # 250 Hz streams (4 ms apart): three 1 kHz echo streams through
        # the userspace WireGuard extenders, captured on three hosts,
        # slowed two migrations at once from 15-30 s to over 250 s on
        # this 2-core machine (the shaper keeps the wires' traffic
        # ahead of the migration streams).
        p, reports, windows, caps, taps = ens.move(
            'cloud-b', h2, options=['--bandwidth', '10'], rate=250)
        assert p.returncode == 0, p.stderr
        assert '3 VMs to h2, 2 at a time' in p.stderr
        far = ('extended', ['h2', 'xb', 'xa', 'h3'])
        wait_until(lambda: ens.states(api) == {
            'f1:eth0|g1:eth0': far, 'f2:eth0|g2:eth0': far,
            'f3:eth0|g3:eth0': far,
            'g1:eth1|g2:eth1': ('collapsed', ['h2'])}, 20,
            what='wires in cloud-b')
        rows = ens.judged(reports, windows, caps, taps, h2, RATE)
        print('guests judged %s; broken (not judged) %s' % (
            sorted(rows), ens.broken()))
        for g in ens.guests:
            w = windows[g.name]
            assert [(x[1], x[3]) for x in w] == [('h1', 'h2')], w
            if g.name in rows:
                print('%s: %s' % (g.name, rows[g.name]))
                switchover.check(rows[g.name], SWITCHOVER_MS)
    finally:
        ens.remove(api)


def test_soak_a_router_guest_keeps_ospf_and_bgp_across_clouds(
        clouds, guest_retry, soak_round):
    """The router guest (vwtest.router_move) moves from cloud-a to cloud-b:
    its OSPF neighbour stays behind in cloud-a (the wire now crosses the
    extenders), its BGP neighbour is in cloud-b (the wire collapses); the
    migration stream crosses the extenders' link at 10 MiB/s, plain
    pre-copy (the WAN profile is tested in test_migration.py and measured
    in bench/bench_wan_migration.py)."""
    from vwtest.router_move import routed_move
    h1, h2, h3 = clouds.hosts[:3]
    # 250 Hz: a 1 kHz probe through the userspace extenders starves a
    # cross-cloud move on two cores.
    guest_retry.run(lambda d: routed_move(
        clouds, h1, h2, h3, h2, 'c%d' % next(seq), 250, d, timeout=180,
        options=['--bandwidth', '10']), ATTEMPTS)
