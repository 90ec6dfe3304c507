"""A topology's guests live-migrated together within a site (`vwctl
migrate --topology NAME --to HOST`) on real libvirt and QEMU, with 1 kHz
streams from far VMs to each guest throughout: every wire ends in the
right state (the wire between two members collapsed again on the
destination), each guest's switch-over meets the goal and the network
loses nothing else around its move (vwtest.switchover), nothing is
doubled, every wire carries a clean stream afterwards, and the progress
view says what happened. Across clouds: bench/soak/test_soak_clouds.py."""
from vwtest import seq, switchover, wait_until
from vwtest.migration import Ensemble


def test_three_guests_move_together_within_a_site(lab, api, guest_retry):
    guest_retry.run(lambda d: _move_three(lab, api, d))


def _move_three(lab, api, tmp_path):
    h1, h2, h3 = lab.hosts
    ens = Ensemble(lab, 'ens%d' % next(seq), h1, h3, tmp_path)
    try:
        assert ens.states(api) == {
            'f1:eth0|g1:eth0': ('tunnelled', ['h1', 'h3']),
            'f2:eth0|g2:eth0': ('tunnelled', ['h1', 'h3']),
            'f3:eth0|g3:eth0': ('tunnelled', ['h1', 'h3']),
            'g1:eth1|g2:eth1': ('collapsed', ['h1'])}
        p, reports, windows, caps, taps = ens.move('h2', h2)
        assert p.returncode == 0, p.stderr
        # The plan, each VM's and each wire's states as they changed.
        assert '3 VMs to h2, 2 at a time, in this order:' in p.stderr
        for i in (1, 2, 3):
            assert 'g%d         h1 -> h2  done in' % i in p.stderr
        assert 'moving (' in p.stderr
        assert 'moved 3 of 3 VMs of %s to h2' % ens.tag in p.stdout
        assert ens.states(api) == {
            'f1:eth0|g1:eth0': ('tunnelled', ['h2', 'h3']),
            'f2:eth0|g2:eth0': ('tunnelled', ['h2', 'h3']),
            'f3:eth0|g3:eth0': ('tunnelled', ['h2', 'h3']),
            'g1:eth1|g2:eth1': ('collapsed', ['h2'])}
        rows = ens.judged(reports, windows, caps, taps, h2, api=api)
        for g, r in zip(ens.guests, reports):
            w = windows[g.name]
            assert [(x[1], x[3]) for x in w] == [('h1', 'h2')], w
            if g.name in rows:
                print('%s: %s' % (g.name, rows[g.name]))
                switchover.check(rows[g.name])
        # And afterwards every wire carries a clean stream.
        for far, ip in zip(ens.fars, ens.ips):
            wait_until(lambda: far.ping(ip, count=1)[1] == 1, 60,
                       what='guest answers on %s' % ip)
            r = far.tool('udp-echo', '--dst', ip, '--rate', 1000,
                         '--seconds', 1)
            assert r['lost'] == 0 and r['duplicates'] == 0, (ip, r)
    finally:
        ens.remove(api)
