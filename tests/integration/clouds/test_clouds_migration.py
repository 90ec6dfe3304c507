"""A guest live-migrates from one cloud to another and back, on real Open
vSwitch, libvirt and QEMU: its wire follows it across the extenders'
encrypted link (the migration stream too), with traffic running."""
import signal
import time


from vwtest import Api, seq, switchover, wait_until
from vwlab import guest_crash

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


def test_a_guest_migrates_to_another_cloud_and_back(clouds, guest_retry):
    """A QEMU guest with two NICs on h1 (cloud-a): one wired to a VM on h3
    (cloud-a), one to a VM on h2 (cloud-b). `virsh migrate --live` with
    the WAN profile's options to h2 (cloud-b), the migration stream routed
    through the extenders' link, then back; 250 Hz sequenced streams from
    both far ends throughout. Each move: the wires' paths, activation in
    the switch, the switch-over within the goal and no other loss by the
    network around it (vwtest.switchover). A run whose guest QEMU's TCG
    fault broke is done again with a new guest (vwtest.retry)."""
    guest_retry.run(lambda d: _attempt(clouds, d, next(seq)), ATTEMPTS)


def _attempt(clouds, tmp_path, k):
    """One run, every check passed; GuestCrashed if the guest broke."""
    from vwtest.migration import probe_report
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
        # QEMU's known fault under TCG (docs/benchmarks.rst, guest
        # crashes): after some migrations the guest's virtio transmit ring
        # is corrupted, or the guest panics (and reboots); frames on a tap
        # cannot cause it, and what is lost after it is not the network's.
        broken = guest_crash.crash_lines(g.console_text())
        if broken:
            raise guest_crash.GuestCrashed(
                'guest %s broke (%s); moves at uptime %s s' % (
                    g.name, broken[0], ['%.1f-%.1f' % (a, a + b) for a, b
                                        in zip(moved, took)]))
        grams = caps.datagrams(switchover.heads_near(reports, windows))
        races = switchover.races(clouds.hosts)
        for r, gip in zip(reports, ('10.91.0.1', '10.92.0.1')):
            rows = [switchover.judge(r, grams, gip, on[i], on[i + 1], w,
                                     races, RATE)
                    for i, w in enumerate(windows)]
            print('stream to %s: lost %d; per move %s' % (gip, r['lost'],
                                                          rows))
            for row in rows:
                switchover.check(row, SWITCHOVER_MS)
        # Activation stayed in the switch: each vNIC on its first frame.
        for m in api.ok('GET', '/v1/migrations')['migrations']:
            if m['vm_uuid'] != g.uuid:
                continue
            assert m['state'] == 'completed'
            assert sorted(m['activated']) == sorted([e0, e1]), m
    finally:
        for h in clouds.hosts:
            h.log_datapath_flow_changes(False)
        for w in (wa, wb):
            api.req('DELETE', '/v1/wires/%d' % w)
        clouds.destroy_guest(g)
        h3.remove_vm(fa)
        h2.remove_vm(fb)
