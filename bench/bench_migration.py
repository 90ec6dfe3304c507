"""Network-added outage of live migration, VirtualWire (at its defaults:
activation at the source's STOP, held frames kept on the destination
host, as vw-host-setup sets hosts up by default; and with held frames
asked for) and OVN side by side.

One lab, the same three hosts, the same libvirtd, the same guest image:
VirtualWire's guest is plugged into br-int (wired by our controller), OVN's
into br-ovn (an OVN logical switch port; vwlab.ovn). Each guest has one
NIC to a far end on h3 and one to a near end beside it on h1, and is
migrated h1 -> h2 -> h1 ... with `virsh migrate --live` and the same
downtime limit; the two systems alternate migration by migration. OVN
migrates its way: requested-chassis=SRC,DST with activation-strategy=rarp
before, requested-chassis=DST after (lab notes, section 12).

Through each migration every end runs the same 1 kHz sequenced UDP echo
probe (SCHED_FIFO, paced by its clock), and the same analysis
(vwlab.outage) judges it:

  pause     QEMU STOP (source) -> RESUME (destination), from QMP events
  added     first to last lost datagram by send time, minus the pause;
            only for probed runs (the sender sent across STOP and RESUME);
            unprobed runs are listed apart
  network   from captures on the guest's taps, sender-independent: STOP
            minus the last delivery into the source tap, plus the first
            delivery into the destination tap minus RESUME
  frame->delivery  the guest's first frame on the destination (QEMU's RARP
            unless it sends none) to the first delivery there
  second holes  loss runs after the main one (a later step re-breaking the
            path, e.g. a cleanup), duplicates

  held echo  RESUME to the first echo of a datagram sent during the
            pause (it reached the guest once it ran: the first held frame
            handed to the guest, plus its answer's way back)

  towards the guest  datagrams lost on the way in per move (the echo
            responder's counter), reordered; for VirtualWire with held
            frames (a third guest whose hosts' hooks ask for them, the
            controller's default bound), what its record says was held,
            delivered, late, evicted

  --no-hold-on-hosts  hosts set up with vw-host-setup --no-hold-frames
            (no vw-hold, no vw-frame-hold): at the controller's default
            (--hold hosts) the first guest's moves are then not held, the
            held guest's are held by the controller. By default
            (--hold-on-hosts) every hypervisor keeps them, so both our
            guests' moves are held, released from the destination's ring
            (control.host_rings)
  --no-system-routes  every ovs-vswitchd run without system routes (the
            tunnels routed by vw-host-setup's user route, as docs/install.rst
            recommends on the userspace datapath; bench_tunnel_race): OVS
            3.1's userspace tunnel race on a tap's link event does not
            fire, for OVN's Geneve tunnels as for ours. The default keeps
            the system's routes, so the commands beside earlier figures
            still run what they measured
  --copy-log on|off  with hosts keeping frames, whether the source's copies
            stay on its host (vw-frame-hold's copy log, host.copy_log: no
            copy crosses the controller's connection; the controller's
            default) or go to the controller

    python bench/bench_migration.py [--migrations 20] [--downtime-ms 50]
                                    [--no-held] [--placement strict]
                                    [--activate-at-stop on]
                                    [--no-hold-on-hosts] [--copy-log on|off]
                                    [--no-system-routes]
"""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Api, keep_logs, write_result               # noqa: E402
from migration_evidence import (activated_at, audit_cut,        # noqa: E402
                                controller_log, hole_cause, last_record,
                                nics_by_id, tap_deleted_at, taps_by_nic)
from migration_report import fmt, goals, report              # noqa: E402
from migration_systems import (console_marks, crashed_late,     # noqa: E402
                               realtime, setup)

from vwlab import Lab, outage                                  # noqa: E402
from forensics import hole_context, loss_audit                # noqa: E402
from vwlab.shell import OVS_NICE                               # noqa: E402
from vwlab.switch_counters import SwitchCounters              # noqa: E402
from vwlab.guest_drops import (guest_counters, guest_drops,  # noqa: E402
                               tap_counters)
from vwlab.capture import HostCaptures, guest_taps, ifindexes_of  # noqa: E402
from vwlab.ovn import Ovn                                      # noqa: E402
from vwlab.qemu_events import EventWatch, stop_resume_windows  # noqa: E402

RATE = 1000


# The probe's datagrams (on taps, and inside GRE on the underlay), and
# every RARP and ARP (a guest's first frame on its destination).
# And the frames the destination's ring sends back tagged (802.1ad): which
# it released (forensics.cut_audit).
BPF = ('udp port 7000 or ip proto 47 or ether proto 0x8035 or arp or '
       'ether proto 0x88a8')


def migrate_once(lab, sysm, downtime_ms, capdir):
    h1, h2, _h3 = lab.hosts
    src = sysm.where
    dst = h2 if src is h1 else h1
    g = sysm.guest
    caps = HostCaptures([src, dst], capdir, bpf=BPF).__enter__()
    src_taps = guest_taps(src, g.name)
    # Read before it leaves (the source's domain is gone after).
    src_nics = nics_by_id(src, g.name)
    # Streams run until told to stop (SIGINT), well after the last step.
    streams = {k: vm.tool_bg('udp-echo', '--dst', ip, '--rate', RATE,
                             '--seconds', 120, realtime=True)
               for k, (vm, ip, _nic) in sysm.ends.items()}
    marks = console_marks(g)
    # The guest's own drop counters, asked over its first wire.
    ask_vm, ask_ip, _nic = next(iter(sysm.ends.values()))
    guest_before = guest_counters(ask_vm, ask_ip)
    time.sleep(1.0)
    sysm.before(src, dst)
    # What both switches counted dropped (a held move's `skipped` frames:
    # did a switch drop them?); the captures count the kernel's overruns.
    counters = SwitchCounters([src, dst]).__enter__()
    with EventWatch([src, dst]) as ev:
        took = lab.migrate(g, src, dst, downtime_ms=downtime_ms)
        dst_taps = guest_taps(dst, g.name)
        caps.note_interfaces()
        sysm.after(dst)
        time.sleep(0.5)
    for p in streams.values():
        p.send_signal(signal.SIGINT)
    reports = {k: json.loads(p.communicate(timeout=60)[0].splitlines()[-1])
               for k, p in streams.items()}
    counters.__exit__(None, None, None)
    caps.stop()
    # Towards the guest after the network: the destination taps' queues
    # (since they appeared) and the guest's kernel.
    taps_after = {tap: tap_counters(dst, tap) for _h, tap in dst_taps}
    guest_dropped = guest_drops(guest_before, guest_counters(ask_vm, ask_ip))
    sysm.where = dst
    [window] = stop_resume_windows(ev.events, g.name)
    stop, _s, resume, _d = window
    dcap = [c for c in caps.caps if c.host == dst.name][0]
    tap_of = taps_by_nic(dst, g.name)
    # A guest that crashed (TCG: rare kernel panics after a migration) and
    # rebooted says 'ready' again: its run says nothing about the network.
    sysm.marks = console_marks(g)
    crashed = sysm.marks > marks or crashed_late(sysm, 1.0)
    line = ['%-11s %s->%s %.2fs pause %5.1f%s' % (
        sysm.name, src.name, dst.name, took, (resume - stop) * 1000,
        ' GUEST CRASHED (excluded)' if crashed else '')]
    near = {q.to_bytes(8, 'big') for r in reports.values()
            for q, t in enumerate(r['sent_times'])
            if stop - 0.1 <= t <= resume + 0.1}
    grams_all = caps.datagrams(near)
    seen_by_controller = activated_at(sysm)
    held = last_record(sysm).get('held') or {}
    # The OVS userspace tunnel race (docs/benchmarks.rst): windows in which
    # a host's switch re-translated tunnel flows without their tunnel
    # action, from its dpif_netdev debug log; and when the source's tap
    # left its switch (libvirt, after the guest left).
    races = {h.name: [w for w in loss_audit.ovs_glitches(h.vswitchd_log())
                      if stop - 2 <= w[0] <= resume + 2] for h in (src, dst)}
    gone = tap_deleted_at(src, src_taps, stop)
    logs = {h.name: h.vswitchd_log() for h in lab.hosts}
    # Any host's flows briefly sending to fewer tunnels (the far end's
    # double send dipping to one host would explain `skipped`).
    dips = {n: [(round((a - stop) * 1e3, 1), round((b - stop) * 1e3, 1))
                for a, b in loss_audit.tunnel_dips(text)
                if stop - 1 <= a <= resume + 1] for n, text in logs.items()}
    ctl_log = controller_log(lab) if sysm.api is not None else None
    for k, r in reports.items():
        vm, ip, nic = sysm.ends[k]
        grams = [x for x in grams_all if ip in (x.src, x.dst)]
        # The guest's first frame on its destination: QEMU may announce
        # before RESUME (libvirt resumes the guest after the incoming
        # migration completed), so look from STOP.
        first = outage.first_frame_from_guest(
            dcap.path, ifindexes_of(dcap, {tap_of.get(nic)}), stop)
        edges = outage.delivery_edges(
            grams, ip, src_taps, dst_taps, stop, resume,
            first[0] if first else None)
        if first:
            edges.update(outage.switch_over(grams, ip, dst.name, dst_taps,
                                            first[0]))
        row = outage.judge(r, window, RATE, edges)
        row['guest_crashed'] = crashed
        row['run'] = len(sysm.rows[k]) + 1
        row['source_switch'] = outage.source_switch(
            grams, ip, src.name, src_taps, stop)
        row['lost_runs_ms_from_stop'] = [
            (x['packets'], round((x['from'] - stop) * 1000, 1),
             round((x['to'] - stop) * 1000, 1)) for x in r['lost_runs']]
        row['first_frame'] = (None if first is None else
                              {'kind': first[1], 'ms_after_resume':
                               round((first[0] - resume) * 1000, 2)})
        # Ours: the controller's packet-in handling after the guest's first
        # frame. The switch's learn delivers without it; its cleanup goes
        # out --activation-settle-ms later.
        at = seen_by_controller.get(nic)
        row['controller_ms_after_frame'] = (
            round((at - first[0]) * 1000, 2) if at and first else None)
        sysm.rows[k].append(row)
        row['second_hole_causes'] = [
            hole_cause(h, resume, races, gone) for h in row['other_holes']
            if h['ms_after_resume'] > 0]
        # Each second hole's evidence: what the switches' datapaths and the
        # controller did around it (ms after RESUME).
        row['second_hole_context'] = [
            hole_context.around(resume + h['ms_after_resume'] / 1000.0,
                                resume + (h['ms_after_resume'] + h['ms'])
                                / 1000.0, resume, logs, ctl_log)
            for h in row['other_holes'] if h['ms_after_resume'] > 0]
        row['lost_on_the_way_in'] = r['lost_on_the_way_in']
        # Lost ones the captures cover (sent from just before STOP to just
        # after RESUME): where each was seen last (underlay, tap, nowhere).
        row['lost_near_pause_seen_last'] = loss_audit.last_seen(
            {q for q, t in r['lost_sent_at'] if stop - 0.1 <= t <= resume + 0.1},
            grams, ip)
        # And which side of the held frames' cut each fell on.
        row['lost_near_pause_cut'] = audit_cut(
            src, src_nics.get(nic), caps, dst, tap_of.get(nic), ip, r,
            stop, resume)
        row['reordered'] = r.get('reordered', 0)
        row['reordered_ms_from_stop'] = [
            round((t - stop) * 1000, 1) for _q, t in r.get(
                'reordered_sent_at', [])]
        # Which were twice (the first 100), and where they were made.
        row['duplicates_on_the_way_in'] = r.get('duplicates_on_the_way_in')
        row['duplicates_ms_from_stop'] = [
            round((r['sent_times'][q] - stop) * 1000, 1)
            for q in r.get('duplicate_seqs', []) if q < len(r['sent_times'])]
        # Ours with held frames: what the controller held and delivered.
        row['held'] = held.get(nic)
        row['switch_drops'] = counters.moved()
        row['dest_taps'] = taps_after
        row['guest_dropped'] = guest_dropped
        row['overruns'] = {'%s %s' % key: n
                           for key, n in caps.overruns().items()}
        row['tunnel_dips_ms_from_stop'] = {n: d for n, d in dips.items() if d}
        row['lost_on_the_way_back'] = r['lost_on_the_way_back']
        line.append('%s: lost %d (in %d) added %s net %s echo %s frame %s->dlv %s%s%s%s' % (
            k, r['lost'], r['lost_on_the_way_in'], fmt(row['added_ms']), fmt(edges['network_ms']),
            fmt(row['first_held_echo_ms']),
            fmt(row['first_frame'] and row['first_frame']['ms_after_resume']),
            fmt(edges['first_frame_to_delivery_ms']) + (
                ' (ctl %s)' % fmt(row['controller_ms_after_frame'])
                if row['controller_ms_after_frame'] is not None else ''),
            ' dup %d' % row['duplicates'] if row['duplicates'] else '',
            ' 2nd-hole %s' % row['second_hole_causes']
            if row['second_hole'] else '',
            ' UNPROBED (%s)' % row['unprobed_why'] if not row['probed']
            else ''))
    print('  '.join(line), flush=True)


def held_summary(systems, doc):
    """Towards the guest: datagrams lost on the way in per move, and what
    the held frames came to."""
    print('\ntowards the guest, per move: lost on the way in p50/max, '
          'reordered max; held frames delivered p50/max, late max, '
          'evicted max')
    for s in systems:
        for k, rows in s.rows.items():
            ok = [r for r in rows if not r['guest_crashed']]
            lost = outage.dist([r['lost_on_the_way_in'] for r in ok])
            # A move whose record holds nothing delivered (holding stopped
            # at once: the rate bound) counts as 0 delivered.
            held = [r['held'] for r in ok if r.get('held')]
            sm = {'lost_on_the_way_in': lost,
                  'reordered_max': max([r['reordered'] for r in ok],
                                       default=None)}
            if held:
                sm['held_delivered'] = outage.dist(
                    [h.get('delivered', 0) for h in held])
                sm['held_late_max'] = max(h.get('late', 0) for h in held)
                sm['held_evicted_max'] = max(h.get('evicted', 0)
                                             for h in held)
            doc[s.name][k]['towards_guest'] = sm
            print('%-11s %-4s %s/%s  %s  %s' % (
                s.name, k, fmt(lost['p50']), fmt(lost['max']),
                sm['reordered_max'],
                '%s/%s late %d evicted %d' % (
                    fmt(sm['held_delivered']['p50']),
                    fmt(sm['held_delivered']['max']), sm['held_late_max'],
                    sm['held_evicted_max']) if held else '-'))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--migrations', type=int, default=20,
                    help='per system (default: %(default)s)')
    ap.add_argument('--downtime-ms', type=int, default=50,
                    help="QEMU's downtime limit for every migration "
                         '(default: %(default)s)')
    ap.add_argument('--ovs-nice', type=int, default=OVS_NICE,
                    help="niceness of the hosts' OVS and OVN daemons "
                         '(default: %(default)s, as ovs-ctl and ovn-ctl '
                         'start them; 0: equal to the guests)')
    ap.add_argument('--realtime', action='store_true',
                    help="run every host's ovs-vswitchd, ovn-controller and "
                         'our controller SCHED_RR 1: nothing else on the '
                         'machine (the TCG guests) can delay them')
    ap.add_argument('--result', default='migration',
                    help='bench/results/NAME.json (default: %(default)s)')
    ap.add_argument('--keep-captures', action='store_true')
    ap.add_argument('--keep-logs', metavar='DIR',
                    help="copy the lab's logs (controller, every host's "
                         'daemons: vw-frame-hold answers each cut with a '
                         'timestamped line) to DIR before the lab goes')
    ap.add_argument('--no-held', action='store_true',
                    help='leave out the third system, VirtualWire with '
                         'held frames (its hosts\' hooks ask for them)')
    ap.add_argument('--activate-at-stop', choices=('on', 'off'),
                    default='on',
                    help="the controller's --activate-at-stop (default: "
                         '%(default)s, its own default)')
    ap.add_argument('--copy-log', choices=('on', 'off'), default='on',
                    help="the controller's --copy-log: where hosts keep frames, "
                         "the source's copies stay on its host")
    ap.add_argument('--hold-on-hosts', action=argparse.BooleanOptionalAction,
                    default=True,
                    help='hypervisors keep held frames themselves, as '
                         'vw-host-setup sets them up by default (vw-hold '
                         'and vw-frame-hold); --no-hold-on-hosts: the '
                         'controller holds them')
    ap.add_argument('--system-routes', action=argparse.BooleanOptionalAction,
                    default=True,
                    help='--no-system-routes: every ovs-vswitchd without '
                         'system routes (--disable-system-route, one user '
                         'route for the underlay, no local_ip on tunnel '
                         "ports: OVS's tunnel race on a tap's link event "
                         'gone, bench_tunnel_race), for both systems')
    ap.add_argument('--placement', default='strict',
                    choices=('strict', 'insecure-trust-hosts'),
                    help="the controller's placement (default: %(default)s, "
                         'the product\'s: every vNIC placed by the cloud, '
                         'moves believed when the destination\'s hook and '
                         'the source\'s vw-host-agent agree)')
    args = ap.parse_args()
    with Lab(3, libvirt=True, ovs_nice=args.ovs_nice,
             placement=args.placement,
             hold_frames=args.hold_on_hosts,
             system_routes=args.system_routes) as lab:
        lab.start_controller(extra=['--activate-at-stop',
                                    args.activate_at_stop,
                                    '--copy-log', args.copy_log])
        api = Api(lab)
        api.wait_hosts(3)
        # Every datapath flow change logged: second holes are matched to
        # tunnel-race windows (hole_cause).
        for h in lab.hosts:
            h.log_datapath_flow_changes()
        ovn = Ovn(lab)
        ovn.start()
        systems = setup(lab, api, ovn, held=not args.no_held)
        defaults = {x['name']: x['value'] for x in api.call(
            'GET', '/v1/settings')['settings']
            if x['name'] in ('hold', 'activate-at-stop', 'copy-log')}
        if args.realtime:
            realtime(lab)
        capdir = tempfile.mkdtemp(prefix='vw-bench-mig-')
        i = 0
        while any(s.valid() < args.migrations for s in systems) and \
                i < 3 * args.migrations:
            # Alternate, and alternate who goes first in each round.
            for s in (systems if i % 2 == 0 else systems[::-1]):
                if s.valid() >= args.migrations:
                    continue
                d = os.path.join(capdir, '%s-%d' % (s.name, i + 1))
                os.makedirs(d)
                migrate_once(lab, s, args.downtime_ms, d)
                if s.rows['far'][-1]['guest_crashed']:
                    s.crashes += 1
                    print('%-11s guest crashed: run excluded, guest '
                          'recreated on %s' % (s.name, lab.hosts[0].name),
                          flush=True)
                    s.make_guest(lab, lab.hosts[0])
                if not args.keep_captures:
                    shutil.rmtree(d, ignore_errors=True)
                time.sleep(0.5)
            i += 1
        doc = report(systems)
        held_summary(systems, doc)
        goals(doc)
        doc.update({'migrations_per_system': args.migrations,
                    'rate_hz': RATE, 'downtime_limit_ms': args.downtime_ms,
                    'probe': 'udp-echo 1 kHz, SCHED_FIFO, clock-paced',
                    'ovs_nice': args.ovs_nice, 'realtime': args.realtime,
                    'placement': args.placement,
                    'hold_on_hosts': args.hold_on_hosts,
                    'system_routes': args.system_routes,
                    'controller_settings': defaults,
                    'captures': capdir if args.keep_captures else None})
        if args.keep_logs:
            keep_logs(lab, args.keep_logs)
        write_result(args.result, doc)


if __name__ == '__main__':
    main()
