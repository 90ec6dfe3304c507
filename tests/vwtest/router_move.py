"""A router guest live-migrated between OSPF and BGP neighbours: BIRD in the
QEMU guest peers over two wires with BIRD in two stand-in VMs (R1 by OSPF,
1 s hello, 4 s dead; R2 by eBGP, 3 s hold). A probe from R1 to the network
behind R2 is routed through the guest: it needs the OSPF route R1 learnt
from the guest and the BGP route the guest learnt from R2. Shared by the
in-site and the cross-cloud tests."""
import signal
import time
import uuid

from vwtest import Api, switchover, wait_until
from vwlab import guest_crash, outage, routers
from vwlab.capture import HostCaptures, guest_taps
from vwlab.qemu_events import EventWatch, stop_resume_windows

# Around the move (vwtest.switchover.AROUND_S), lost datagrams must have
# been sent within the guest's pause, widened by MARGIN_S each side:
# datagrams in flight through the guest at STOP (the echo crosses it
# twice), and the switch-over after RESUME. Others only if the captures
# show the switch handed them (either leg) into a tap of the guest: the
# guest had them (the source QEMU stops reading its taps up to ~150 ms
# before STOP; what waits there dies with it: QEMU's, not the network's).
MARGIN_S = 0.05
# After the move, longer than the dead interval (4 s) and the hold time
# (3 s): an adjacency the pause broke has been seen to break by then.
SETTLE_S = 6.0
# The lab's TCG guest at times runs nothing for seconds after RESUME
# although its tap gets every datagram (docs/benchmarks.rst): a router
# that does not run loses its OSPF neighbour after the dead interval, as
# any would. Such a run is told by the captures (the switch delivered into
# the destination tap within SWITCHOVER_S of RESUME) against the probe
# (nothing came back for over STALL_S), printed, and done again.
SWITCHOVER_S = 0.05
STALL_S = 1.0
BEHIND_R1, BEHIND_R2 = '10.201.1.1/24', '10.202.1.1/24'


def routed_move(lab, src, dst, r1_host, r2_host, tag, rate, workdir,
                **migrate):
    """The move's figures, every check passed; GuestCrashed if the guest's
    QEMU broke (TCG's virtio fault, or a stall after RESUME: not judged).
    workdir: for the captures on the guest's taps."""
    api = Api(lab)
    e0, e1 = str(uuid.uuid4()), str(uuid.uuid4())
    g = src.define_guest('rtr%s' % tag, [(e0, '10.211.1.1/30'),
                                          (e1, '10.211.2.1/30')],
                         cmdline=routers.guest_cmdline(
                             '10.211.1.1', ['eth0'],
                             ('10.211.2.2', 65010, 65020)))
    v1 = r1_host.add_vm('r1%s' % tag, [('r1%s-nic' % tag, '10.211.1.2/30')])
    v2 = r2_host.add_vm('r2%s' % tag, [('r2%s-nic' % tag, '10.211.2.2/30')])
    wires = [api.connect(e0, 'r1%s-nic' % tag)['id'],
             api.connect(e1, 'r2%s-nic' % tag)['id']]
    r1 = routers.BirdRouter(v1, '10.211.1.2',
                            ospf=(v1.nics['r1%s-nic' % tag]['ifname'],),
                            stubs=(('stub0', BEHIND_R1),)).start()
    r2 = routers.BirdRouter(v2, '10.211.2.2', stubs=(('stub0', BEHIND_R2),),
                            bgp=('10.211.2.1', 65020, 65010)).start()
    server = v2.tool_bg('echo-server', '--port', 7000)
    caps = None
    try:
        # Both protocols up, and each side has the other's networks: R1's
        # from OSPF (the guest exports its BGP routes), R2's from BGP.
        wait_until(lambda: r1.ospf_full() and r2.bgp_established() and
                   r1.has_route('10.202.1.0/24') and
                   r2.has_route('10.211.1.0/30'), 90,
                   what='OSPF full and BGP established through the guest')
        dst_ip = BEHIND_R2.split('/')[0]
        wait_until(lambda: v1.ping(dst_ip, count=1)[1] == 1, 30,
                   what='R1 reaches the network behind R2')
        before = (r1.changes(), r2.changes(), routers.guest_changes(g))
        for h in lab.hosts:
            h.log_datapath_flow_changes()
        caps = HostCaptures([src, dst], workdir,
                            bpf='udp port 7000').__enter__()
        src_taps = guest_taps(src, g.name)
        stream = v1.tool_bg('udp-echo', '--dst', dst_ip, '--rate', rate,
                            '--seconds', 600, realtime=True)
        time.sleep(1.0)
        with EventWatch([src, dst]) as ev:
            took = lab.migrate(g, src, dst, **migrate)
            dst_taps = guest_taps(dst, g.name)
            caps.note_interfaces()
            time.sleep(SETTLE_S)
        stream.send_signal(signal.SIGINT)
        from vwtest.migration import probe_report
        r = probe_report(stream)
        caps.stop()
        crashed = guest_crash.crash_lines(g.console_text())
        if crashed:
            raise guest_crash.GuestCrashed('router guest %s crashed: %s' % (
                g.name, crashed[:2]))
        after = (r1.changes(), r2.changes(), routers.guest_changes(g))
        [(stop, s_host, resume, d_host)] = stop_resume_windows(ev.events,
                                                               g.name)
        assert (s_host, d_host) == (src.name, dst.name)
        near = {q.to_bytes(8, 'big') for q, t in enumerate(r['sent_times'])
                if stop - 0.2 <= t <= resume + 2.0}
        grams = caps.datagrams(near | {q.to_bytes(8, 'big')
                                       for q, _t in r['lost_sent_at']})
        edges = outage.delivery_edges(grams, dst_ip, src_taps, dst_taps,
                                      stop, resume)
        silent = max([t - resume for _q, t in r['lost_sent_at']
                      if resume < t < resume + SETTLE_S], default=0.0)
        first = edges['first_into_dest_ms']
        if silent > STALL_S and first is not None and \
                first <= SWITCHOVER_S * 1e3:
            raise guest_crash.GuestStalled(
                'router guest %s: delivered into from %.1f ms after RESUME, '
                'silent for %.1f s; its neighbours logged %s' % (
                    g.name, first, silent, after[0][len(before[0]):] +
                    after[1][len(before[1]):]))
        # The wires followed: the one to R2 collapsed beside it when the
        # guest came to R2's host, the other re-pointed.
        states = {w: api.wire(w) for w in wires}
        for w, peer_host in zip(wires, (r1_host, r2_host)):
            want = 'collapsed' if peer_host is dst else None
            got = states[w]
            assert {got['host_a'], got['host_b']} == {dst.name,
                                                      peer_host.name}, got
            assert want is None or got['state'] == want, got
        # No neighbour changed state on either side, in either protocol.
        for who, b, a in zip(('R1 (OSPF)', 'R2 (BGP)', 'the guest'),
                             before, after):
            assert a == b, '%s logged %s' % (who, a[len(b):])
        assert r1.ospf_full() and r2.bgp_established()
        # The probe ran across the move, and lost only inside the pause.
        sent = r['sent_times']
        assert sent[0] < stop - 0.5 and sent[-1] > resume + 1.0, (
            'the probe did not span the move')
        assert r['duplicates'] == 0, r['duplicates']
        races = switchover.races(lab.hosts)
        handed = {d.payload[:8] for d in grams if d.outgoing and
                  (d.host, d.iface) in set(src_taps) | set(dst_taps)}
        switched = resume + max(MARGIN_S, (first or 0.0) / 1e3)
        near = [(q, t) for q, t in r['lost_sent_at']
                if stop - switchover.AROUND_S <= t <=
                resume + switchover.AROUND_S and
                not stop - MARGIN_S <= t <= switched]
        raced = [(q, t) for q, t in near if any(
            a - switchover.RACE_SLACK_S <= t <= b + switchover.RACE_SLACK_S
            for a, b in races)]
        outside = [(q, t) for q, t in near if (q, t) not in raced and
                   q.to_bytes(8, 'big') not in handed]
        assert not outside, ('lost around the move, outside the pause '
                             '+-%d ms, never handed to the guest: %s (OVS '
                             'tunnel races %s)' % (
                                 MARGIN_S * 1e3,
                                 [(q, round((t - stop) * 1e3, 1))
                                  for q, t in outside[:20]],
                                 [(round((a - stop) * 1e3, 1),
                                   round((b - stop) * 1e3, 1))
                                  for a, b in races]))
        # The destination's switch handed the guest the probe at once.
        assert first is not None and first <= SWITCHOVER_S * 1e3, edges
        out = {'took_s': round(took, 1), 'network_ms': edges['network_ms'],
               'pause_ms': round((resume - stop) * 1e3, 1),
               'lost': r['lost'], 'rate': rate,
               'lost_before_stop_ms': round(max(
                   [stop - t for _q, t in r['lost_sent_at'] if t < stop],
                   default=0) * 1e3, 1),
               'lost_to_ovs_tunnel_race': len(raced)}
        print('router guest %s -> %s: %s; OSPF and BGP kept (%d, %d state '
              'changes before, none during)' % (src.name, dst.name, out,
                                                len(before[0]),
                                                len(before[1])))
        return out
    finally:
        if caps is not None:
            caps.stop()
        for h in lab.hosts:
            h.log_datapath_flow_changes(False)
        server.kill()
        for rt in (r1, r2):
            rt.stop()
        for w in wires:
            api.req('DELETE', '/v1/wires/%d' % w)
        lab.destroy_guest(g)
        r1_host.remove_vm(v1)
        r2_host.remove_vm(v2)
