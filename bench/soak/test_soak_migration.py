"""Soak: a two-vNIC guest moved there and back under two 1 kHz echo
streams (one far, one co-located), every lost datagram followed to its
cause through the captures and every duplicate to its maker. Fails on
anything the forensics cannot pin on the guest's pause, the guest itself,
OVS's own tunnel race or a starved switch; prints the causes either way.
What CI asserts of the same move is in tests/integration/test_migration.py.
"""
import time
import uuid

from forensic_judge import audit, check_duplicates, duplicate_heads, heads
from vwlab.guest_drops import tap_counters
from vwlab import guest_crash
from vwlab.capture import HostCaptures, guest_taps
from vwlab.qemu_events import EventWatch, stop_resume_windows
from vwtest import seq, wait_until
from vwtest.migration import probe_report, wire_hosts


def test_soak_a_guest_there_and_back(lab, api, guest_retry, soak_round):
    guest_retry.run(lambda d: _there_and_back(lab, api, d))


def _there_and_back(lab, api, workdir):
    h1, h2, h3 = lab.hosts
    n = next(seq)
    e0, e1 = str(uuid.uuid4()), str(uuid.uuid4())
    g = h1.define_guest('soak%d' % n, [(e0, '10.81.0.1/24'),
                                       (e1, '10.82.0.1/24')])
    far = h3.add_vm('sf%d' % n, [('sf%d-nic' % n, '10.81.0.2/24')])
    near = h1.add_vm('sn%d' % n, [('sn%d-nic' % n, '10.82.0.2/24')])
    wires = [api.connect(e0, 'sf%d-nic' % n)['id'],
             api.connect(e1, 'sn%d-nic' % n)['id']]
    ends = ((far, '10.81.0.1', '10.81.0.2', e0),
            (near, '10.82.0.1', '10.82.0.2', e1))
    try:
        for vm, gip, _peer, _v in ends:
            wait_until(lambda: vm.ping(gip, count=1)[1] == 1, 30,
                       what='guest answers on %s' % gip)
        booted = guest_crash.marks(g.console_text())
        for h in lab.hosts:
            h.log_datapath_flow_changes()
        caps = HostCaptures(lab.hosts, workdir).__enter__()
        taps = {v: guest_taps(h1, g.name, g.nics[v]['mac']) for v in (e0, e1)}
        watch = EventWatch([h1, h2]).__enter__()
        streams = [vm.tool_bg('udp-echo', '--dst', gip, '--rate', 1000,
                              '--seconds', 120, realtime=True)
                   for vm, gip, _p, _v in ends]
        time.sleep(1)
        for src, dst in ((h1, h2), (h2, h1)):
            lab.migrate(g, src, dst)
            for v in taps:
                taps[v] |= guest_taps(dst, g.name, g.nics[v]['mac'])
            caps.note_interfaces()
            wait_until(lambda: wire_hosts(api, wires[0])[1] ==
                       {dst.name, 'h3'}, 15, what='far wire on %s' % dst.name)
            time.sleep(1)
        for s in streams:
            s.send_signal(2)
        reports = [probe_report(s) for s in streams]
        caps.stop()
        watch.__exit__(None, None, None)
        windows = stop_resume_windows(watch.events, g.name)
        guest_crash.check_guest(g, booted)
        every = set().union(*taps.values())
        guest_crash.check_running(g, caps.frames_on(every), every, windows)
        grams = caps.datagrams(heads(reports) | duplicate_heads(reports))
        for r, (_vm, gip, peer, v) in zip(reports, ends):
            causes, bad = audit(lab, r, grams, gip, peer, taps[v], windows,
                                caps.overruns())
            dups = check_duplicates(r, grams, gip, taps[v])
            print('stream to %s: lost %d by cause %s; duplicates %s' % (
                gip, r['lost'], causes, dups))
            assert not bad, 'stream to %s: %s %s; taps now: %s' % (
                gip, causes, bad[:3], {t: tap_counters(h, t) for h in (h1,)
                                       for _h, t in guest_taps(h1, g.name)})
    finally:
        for h in lab.hosts:
            h.log_datapath_flow_changes(False)
        for w in wires:
            api.req('DELETE', '/v1/wires/%d' % w)
        lab.destroy_guest(g)
        h3.remove_vm(far)
        h1.remove_vm(near)
