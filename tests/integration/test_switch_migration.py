"""A guest behind a provider switch live-migrates (issue 41): a libvirt/QEMU
guest on h1 and a VM on h3 are wired to two ports of a switch on h2; under
a 1 kHz echo stream from the VM through the switch, `virsh migrate --live`
(with the hook) moves the guest to h3. Its wire follows it as any wire
does; the switch keeps its MAC on the same port, so no frame needs to
teach it anything. Judged as every migration is (vwtest.switchover): the
destination hands the guest the stream within the goal, the network loses
nothing else around the move, nothing doubled."""
import time
import uuid

from vwtest import seq, switchover, wait_until
from vwlab import guest_crash
from vwlab.capture import HostCaptures, guest_taps
from vwlab.guest_crash import check_guest
from vwlab.qemu_events import EventWatch, stop_resume_windows
from vwtest.migration import stop_probe, wire_hosts


def test_a_guest_behind_a_switch_migrates_under_a_stream(lab, api,
                                                         guest_retry):
    guest_retry.run(lambda d: _migrate_behind_switch(lab, api, d))


def _migrate_behind_switch(lab, api, tmp_path):
    h1, h2, h3 = lab.hosts
    n = next(seq)
    nic, far_nic, tenant = str(uuid.uuid4()), 'sm%d-nic' % n, 'sm%d' % n
    g = h1.define_guest('sm%d' % n, [(nic, '10.86.0.1/24')])
    far = h3.add_vm('smf%d' % n, [(far_nic, '10.86.0.2/24')])
    for v in (nic, far_nic):
        api.ok('PUT', '/v1/vnics/%s/tenant' % v, json={'tenant': tenant})
    name = 'sm%d' % n
    api.ok('POST', '/v1/switches', json={'name': name, 'ports': 2,
                                         'tenant': tenant, 'host': 'h2'})
    wires = [api.connect(nic, 'sw:%s/p1' % name)['id'],
             api.connect(far_nic, 'sw:%s/p2' % name)['id']]
    stream = None
    try:
        for w in wires:
            api.wait_state(w, 'tunnelled')
        wait_until(lambda: far.ping('10.86.0.1', count=1)[1] == 1, 20,
                   what='the guest answers through the switch')
        booted = guest_crash.marks(g.console_text())
        caps = HostCaptures(lab.hosts, tmp_path).__enter__()
        taps = [guest_taps(h1, g.name)]
        watch = EventWatch([h1, h3]).__enter__()
        stream = far.tool_bg('udp-echo', '--dst', '10.86.0.1', '--rate',
                             1000, '--seconds', 60)
        time.sleep(1)
        lab.migrate(g, h1, h3)
        taps.append(guest_taps(h3, g.name))
        caps.note_interfaces()
        wait_until(lambda: wire_hosts(api, wires[0]) ==
                   ('tunnelled', {'h2', 'h3'}), 15,
                   what="the guest's wire from h3 to the switch")
        report = stop_probe(stream, after=1.0)
        caps.stop()
        watch.__exit__(None, None, None)
        windows = stop_resume_windows(watch.events, g.name)
        assert [(w[1], w[3]) for w in windows] == [('h1', 'h3')], windows
        check_guest(g, booted)
        grams = caps.datagrams(switchover.heads_near([report], windows))
        row = switchover.judge(report, grams, '10.86.0.1', taps[0], taps[1],
                               windows[0], switchover.races(lab.hosts))
        print('guest behind switch %s, h1 -> h3 under 1 kHz: %s'
              % (name, row))
        switchover.check(row)
        # Afterwards the switch still delivers both ways, nothing lost.
        r = far.tool('udp-echo', '--dst', '10.86.0.1', '--rate', 1000,
                     '--seconds', 1)
        assert r['lost'] == 0 and r['duplicates'] == 0, r
    finally:
        if stream is not None and stream.poll() is None:
            stream.kill()
        for w in wires:
            api.req('DELETE', '/v1/wires/%d' % w)
        api.req('DELETE', '/v1/switches/%s' % name)
        lab.destroy_guest(g)
