"""A topology's guests live-migrated together within a site (`vwctl
migrate --topology NAME --to HOST`) on real libvirt and QEMU, with 1 kHz
streams from far VMs to each guest throughout: every wire ends in the
right state (the wire between two members collapsed again on the
destination), no stream loses anything to the network around its own
guest's STOP and RESUME beyond the pause and the documented margin
(migration_helpers.ENSEMBLE_MARGIN), nothing is doubled, every wire carries a
clean stream afterwards, and the progress view says what happened. Across clouds:
test_clouds_migration."""
from conftest import _seq, wait_until
from migration_helpers import ENSEMBLE_MARGIN, Ensemble, audit, heads


def test_three_guests_move_together_within_a_site(lab, api, tmp_path):
    h1, h2, h3 = lab.hosts
    ens = Ensemble(lab, 'ens%d' % next(_seq), h1, h3, tmp_path)
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
        grams = caps.datagrams(heads(reports))
        for g, r, far, ip in zip(ens.guests, reports, ens.fars, ens.ips):
            w = windows[g.name]
            assert [(x[1], x[3]) for x in w] == [('h1', 'h2')], w
            # The stream ran across its guest's pause.
            assert r['sent_times'][0] < w[0][0] < w[0][2] < \
                r['sent_times'][-1], (g.name, w)
            assert r['duplicates'] == 0, (g.name, r)
            causes, bad = audit(lab, r, grams, ip, ip[:-1] + '2', taps, w,
                                caps.overruns(), ENSEMBLE_MARGIN)
            print('%s: lost %d %s, pause %.0f ms' % (
                g.name, r['lost'], causes, (w[0][2] - w[0][0]) * 1e3))
            # The network's part at the move: nothing lost around STOP and
            # RESUME beyond the pause and the margin. A TCG guest at times
            # does not answer for seconds after RESUME although its tap got
            # every datagram (cause 'guest'; three of them on two cores, two
            # moving at once, stall more often): reported, not failed. So
            # are losses away from the move, as in the cross-cloud test: CI
            # once saw 10 datagrams lost inside the far host 8 s after a
            # guest's move, while the next guest's move re-pointed its
            # sister flows there (not found yet; noted in issue 24).
            stop, _s, resume, _d = w[0]
            around = [v for v in bad if v.cause != 'guest' and
                      stop - 0.1 <= v.at <= resume + 0.1]
            assert not around, (g.name, causes, w, ens.broken())
        # And afterwards every wire carries a clean stream.
        for far, ip in zip(ens.fars, ens.ips):
            wait_until(lambda: far.ping(ip, count=1)[1] == 1, 60,
                       what='guest answers on %s' % ip)
            r = far.tool('udp-echo', '--dst', ip, '--rate', 1000,
                         '--seconds', 1)
            assert r['lost'] == 0 and r['duplicates'] == 0, (ip, r)
    finally:
        ens.remove(api)
