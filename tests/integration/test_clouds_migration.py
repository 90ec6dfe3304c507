"""A guest live-migrates from one cloud to another and back, on real Open
vSwitch, libvirt and QEMU: its wire follows it across the extenders'
encrypted link (the migration stream too), with traffic running."""
import signal
import time

import pytest

from conftest import Api, wait_until
from vwlab import guest_crash, outage

SWITCHOVER_MS = 50.0   # RESUME -> first delivery into the destination tap
# Each far end's echo stream, and how many runs may break. QEMU's TCG fault
# (the guest's virtio transmit ring corrupted) strikes the running source
# during the copy (a run here: at guest uptime 20.5 s, the copy 7.0-25.1 s,
# STOP at 23.8). At 1 kHz from both ends CI lost all 3 runs to it twice;
# locally it struck 1 run in 3 at 1 kHz and at 250 Hz alike, so the lower
# rate is for load (the copy took 8-9 s instead of 10-18), and more runs
# are allowed. 250 Hz (4 ms apart) still times a 50 ms switch-over.
RATE = 250
ATTEMPTS = 5           # runs whose guest QEMU broke are done again


def _wire(api, wid):
    w = api.wire(wid)
    return w['state'], w['path']


def test_a_guest_migrates_to_another_cloud_and_back(clouds, tmp_path):
    """A QEMU guest with two NICs on h1 (cloud-a): one wired to a VM on h3
    (cloud-a), one to a VM on h2 (cloud-b). `virsh migrate --live` with
    the WAN profile's options to h2 (cloud-b), the migration stream routed
    through the extenders' link, then back; 250 Hz sequenced streams from
    both far ends throughout.
    A run whose guest QEMU's TCG fault broke (its virtio ring corrupted:
    it answers nothing more, so no later move can be judged) is done
    again with a new guest, as bench_migration excludes crashed guests;
    every run's outcome is printed."""
    for k in range(ATTEMPTS):
        d = tmp_path / ('run%d' % k)
        d.mkdir()
        if _attempt(clouds, d, k):
            return
    pytest.fail('the guest broke (QEMU TCG virtio fault) in all %d runs'
                % ATTEMPTS)


def _attempt(clouds, tmp_path, k):
    """One run; False if the guest broke (nothing judged), else True
    with every check passed."""
    from migration_helpers import (audit, check_duplicates, duplicate_heads,
                                   heads, probe_report)
    from vwlab.capture import HostCaptures, guest_taps
    from vwlab.qemu_events import EventWatch, stop_resume_windows
    import uuid
    api = Api(clouds)
    h1, h2, h3 = clouds.hosts[:3]
    e0, e1 = str(uuid.uuid4()), str(uuid.uuid4())
    born = time.time()          # the guest's uptime counts from about here
    g = h1.define_guest('xmig%d' % k, [(e0, '10.91.0.1/24'),
                                        (e1, '10.92.0.1/24')])
    fa = h3.add_vm('xfa', [('xfa-nic', '10.91.0.2/24')])
    fb = h2.add_vm('xfb', [('xfb-nic', '10.92.0.2/24')])
    wa = api.connect(e0, 'xfa-nic')['id']
    wb = api.connect(e1, 'xfb-nic')['id']
    # The far VMs keep sending to the guest even while it does not answer
    # (a stalled TCG guest, below): no ARP entry of theirs may expire.
    for vm, nic, vid, ip in ((fa, 'xfa-nic', e0, '10.91.0.1'),
                             (fb, 'xfb-nic', e1, '10.92.0.1')):
        vm.sh(['ip', 'neigh', 'replace', ip, 'lladdr', g.nics[vid]['mac'],
               'dev', vm.nics[nic]['ifname'], 'nud', 'permanent'])
    try:
        wait_until(lambda: _wire(api, wa) == ('tunnelled', ['h1', 'h3']) and
                   _wire(api, wb) == ('extended', ['h1', 'xa', 'xb', 'h2']),
                   20, what='wires before')
        for vm, dst in ((fa, '10.91.0.1'), (fb, '10.92.0.1')):
            wait_until(lambda: vm.ping(dst, count=1)[1] == 1, 30,
                       what='guest answers on %s' % dst)
        for h in clouds.hosts:
            h.log_datapath_flow_changes()
        # The probe's datagrams where they enter and leave the guest and
        # the far VMs (not inside tunnels: a minute of both streams on every
        # tunnel hop is gigabytes to read back).
        caps = HostCaptures([h1, h2, h3], tmp_path,
                            bpf='udp port 7000').__enter__()
        taps = guest_taps(h1, g.name)
        watch = EventWatch([h1, h2]).__enter__()
        # Until told to stop, after both moves: each move takes 25-35 s.
        streams = [vm.tool_bg('udp-echo', '--dst', dst, '--rate', RATE,
                              '--seconds', 240, realtime=True)
                   for vm, dst in ((fa, '10.91.0.1'), (fb, '10.92.0.1'))]
        time.sleep(1)
        # The WAN profile, as an operator on the hook path asks for it
        # (zstd over multifd, auto-converge, a 100 ms downtime limit);
        # the link's shaper keeps the wires' GRE ahead of the stream.
        how = dict(timeout=180, profile='wan')
        moved = [time.time() - born]
        took = [clouds.migrate(g, h1, h2, **how)]
        on = [set(taps), guest_taps(h2, g.name)]
        taps |= on[1]
        caps.note_interfaces()
        # Cloud-a's sister now goes through the extenders; cloud-b's is
        # beside the guest: collapsed.
        wait_until(lambda: _wire(api, wa) == ('extended',
                                              ['h2', 'xb', 'xa', 'h3']) and
                   _wire(api, wb) == ('collapsed', ['h2']), 20,
                   what='wires in cloud-b')
        time.sleep(1)
        moved.append(time.time() - born)
        took.append(clouds.migrate(g, h2, h1, **how))
        on.append(guest_taps(h1, g.name))
        taps |= on[2]
        wait_until(lambda: _wire(api, wa) == ('tunnelled', ['h1', 'h3']) and
                   _wire(api, wb) == ('extended', ['h1', 'xa', 'xb', 'h2']),
                   20, what='wires back in cloud-a')
        time.sleep(0.5)
        for p in streams:
            p.send_signal(signal.SIGINT)
        reports = [probe_report(p) for p in streams]
        caps.stop()
        watch.__exit__(None, None, None)
        windows = stop_resume_windows(watch.events, g.name)
        assert [(w[1], w[3]) for w in windows] == [('h1', 'h2'),
                                                   ('h2', 'h1')], windows
        print('cross-cloud migrations took %s s; pauses %s ms; switch '
              'overruns counted %s' % (
                  ['%.1f' % t for t in took],
                  ['%.0f' % ((w[2] - w[0]) * 1e3) for w in windows],
                  caps.overruns()))
        near = {q.to_bytes(8, 'big') for r in reports
                for q, t in enumerate(r['sent_times'])
                for stop, _, resume, _ in windows
                if stop - 0.1 <= t <= resume + 0.1}
        grams = caps.datagrams(heads(reports) | near |
                               duplicate_heads(reports))
        # QEMU's known fault under TCG (docs/benchmarks.rst, guest
        # crashes): after some migrations the guest's virtio transmit ring
        # is corrupted, or the guest panics (and reboots); frames on a tap
        # cannot cause it, and what is lost after it is not the network's.
        console = g.console_text()
        broken = guest_crash.crash_lines(console)
        if broken:
            # When it struck, against the moves (guest uptime, s): during
            # a move's copy (the source running) or after its RESUME.
            print('run %d: guest virtio ring corrupted (%s): not judged, '
                  'a new guest runs it again; moves at uptime %s s, '
                  'STOP/RESUME at %s s' % (
                      k, broken[0], ['%.1f-%.1f' % (a, a + b) for a, b in
                                     zip(moved, took)],
                      ['%.1f/%.1f' % (w[0] - born, w[2] - born)
                       for w in windows]))
            lines = console.splitlines()
            at = lines.index(broken[0])
            print('console before it:\n' + '\n'.join(lines[max(0, at - 8):at]))
            return False
        probed = [[] for _w in windows]
        records = [m for m in api.ok('GET', '/v1/migrations')['migrations']
                   if m['vm_uuid'] == g.uuid]
        for r, (peer, gip), vnic in zip(reports,
                                        (('10.91.0.2', '10.91.0.1'),
                                         ('10.92.0.2', '10.92.0.1')),
                                        (e0, e1)):
            # No duplicate the network made, but for what held frames'
            # records say they could not place (the source tap's drops in
            # the poll interval of the cut: core.held_frames); one the
            # guest sent twice is its QEMU's (CI saw 5, whose maker was not
            # read then, in a run whose guest echoed 40% of its stream).
            # A lost tail is allowed: the
            # guest at times does not answer for seconds after RESUME
            # (every datagram handed to its tap: `first_into_dest_ms`
            # below), docs/benchmarks.rst.
            held = [(m.get('held') or {}).get(vnic, {}) for m in records]
            dups = check_duplicates(r, grams, gip, taps, sum(
                h.get('drops_unplaced', 0) for h in held))
            if dups:
                print('stream to %s: duplicates %s' % (gip, dups))
            causes, bad = audit(clouds, r, grams, gip, peer, taps, windows,
                                 caps.overruns())
            rows = [outage.judge(r, w, RATE, outage.delivery_edges(
                grams, gip, on[i], on[i + 1], w[0], w[2]))
                for i, w in enumerate(windows)]
            print('stream to %s: lost %d %s; per move %s' % (
                gip, r['lost'], causes, rows))
            for i, ((stop, _s, resume, _d), row) in enumerate(zip(windows,
                                                                  rows)):
                # The switchover is the network's: right after RESUME the
                # destination's switch hands the far end's datagrams to
                # the guest (QEMU's RARP activates it there; 50 ms covers
                # the RARP, a TCG guest and two userspace hops), and no
                # loss around STOP and RESUME is the network's. The first
                # needs a sender that sent across STOP and RESUME: the
                # other stream judges a move where this one's did not (its
                # far VM starved 24 ms at STOP once, here).
                first = row['capture']['first_into_dest_ms']
                if row['probed']:
                    probed[i].append(gip)
                    assert first is not None and first <= SWITCHOVER_MS, (
                        gip, row)
                # What was sent after RESUME and before that first delivery
                # was the switch-over's, bounded just above (the audit's
                # 15 ms margin once judged one sent 15.2 ms after RESUME,
                # the destination's first delivery at 20.3 ms).
                switching = resume + min(first or 0, SWITCHOVER_MS) / 1e3
                around = [v for v in bad if v.cause in ('network',
                                                        'ovs-race') and
                          stop - 0.1 <= v.at <= resume + 0.1 and
                          not resume <= v.at <= switching]
                assert not around, str((gip, around[:5], causes))
            # Losses away from the switchover are reported, not failed:
            # during the copy a saturated link loses some of the cross-cloud
            # stream's datagrams, and a TCG guest at times stops answering
            # for seconds after RESUME although its tap got every datagram
            # (docs/benchmarks.rst); issue 10 keeps them open.
        # Each move judged by at least one stream whose sender sent across
        # its STOP and RESUME (a 25 s stream once ended before the first
        # STOP: it probed nothing).
        assert all(probed), ('a move no stream probed', probed, windows)
        # Activation stayed in the switch: each vNIC on its first frame.
        for m in api.ok('GET', '/v1/migrations')['migrations']:
            if m['vm_uuid'] != g.uuid:
                continue
            assert m['state'] == 'completed'
            assert sorted(m['activated']) == sorted([e0, e1]), m
        return True
    finally:
        for h in clouds.hosts:
            h.log_datapath_flow_changes(False)
        for w in (wa, wb):
            api.req('DELETE', '/v1/wires/%d' % w)
        clouds.destroy_guest(g)
        h3.remove_vm(fa)
        h2.remove_vm(fb)


def test_three_guests_move_together_to_another_cloud(clouds, tmp_path):
    """`vwctl migrate --topology T --to cloud-b`: three guests (two with
    two vNICs, wired to each other) from h1 (cloud-a) to cloud-b's
    hypervisor, two at a time, the streams through the extenders. Every
    wire ends in the right state: the far ones extended through both
    extenders, the one between members collapsed on h2. Each guest is
    judged unless QEMU's TCG fault corrupted its virtio ring (it then
    answers nothing more: nothing it shows is the network's): no
    duplicate, no loss around its STOP and RESUME that is the network's.
    A run where no guest could be judged is done again."""
    from migration_helpers import Ensemble, audit, heads
    api = Api(clouds)
    h1, h2, h3 = clouds.hosts[:3]
    for k in range(ATTEMPTS):
        d = tmp_path / ('run%d' % k)
        d.mkdir()
        ens = Ensemble(clouds, 'xens%d' % k, h1, h3, d)
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
            broken = ens.broken()
            judged = [x for x in zip(ens.guests, reports, ens.ips)
                      if x[0].name not in broken]
            print('run %d: guests judged %s; virtio ring corrupted (not '
                  'judged) %s' % (k, [g.name for g, _r, _i in judged],
                                  broken))
            if not judged:
                continue
            grams = caps.datagrams(heads(reports))
            for g, r, ip in judged:
                w = windows[g.name]
                assert [(x[1], x[3]) for x in w] == [('h1', 'h2')], w
                assert r['sent_times'][0] < w[0][0] < w[0][2] < \
                    r['sent_times'][-1], (g.name, w)
                assert r['duplicates'] == 0, (g.name, r)
                causes, bad = audit(clouds, r, grams, ip, ip[:-1] + '2',
                                    taps, w, caps.overruns())
                stop, _s, resume, _d = w[0]
                print('%s: lost %d %s, pause %.0f ms' % (
                    g.name, r['lost'], causes, (resume - stop) * 1e3))
                around = [v for v in bad if v.cause in ('network',
                                                        'ovs-race') and
                          stop - 0.1 <= v.at <= resume + 0.1]
                assert not around, (g.name, around[:5], causes)
            return
        finally:
            ens.remove(api)
    pytest.fail('every guest broke (QEMU TCG virtio fault) in all %d runs'
                % ATTEMPTS)


def test_a_router_guest_keeps_ospf_and_bgp_across_clouds(clouds, tmp_path):
    """The router guest (router_move.py) moves from cloud-a to cloud-b:
    its OSPF neighbour stays behind in cloud-a (the wire now crosses the
    extenders), its BGP neighbour is in cloud-b (the wire collapses); the
    migration stream crosses the extenders' link at 10 MiB/s, plain
    pre-copy (the WAN profile is tested in test_migration.py and measured
    in bench/bench_wan_migration.py)."""
    from router_move import routed_move
    h1, h2, h3 = clouds.hosts[:3]
    for k in range(ATTEMPTS):
        d = tmp_path / ('run%d' % k)
        d.mkdir()
        # 250 Hz: a 1 kHz probe through the userspace extenders starves
        # a cross-cloud move on two cores.
        if routed_move(clouds, h1, h2, h3, h2, 'c%d' % k, 250, d,
                       timeout=180,
                       options=['--bandwidth', '10']) is not None:
            return
    pytest.fail('the router guest broke (QEMU TCG virtio fault or stall) '
                'in all %d runs' % ATTEMPTS)
