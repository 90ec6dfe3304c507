"""Network-added outage of live migration, VirtualWire and OVN side by side.

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

    python bench/bench_migration.py [--migrations 20] [--downtime-ms 50]
"""
import argparse
import calendar
import glob
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Api, write_result                          # noqa: E402

from vwlab import Lab, hole_context, loss_audit, outage                      # noqa: E402
from vwlab.shell import OVS_NICE, sh                              # noqa: E402
from vwlab.capture import HostCaptures, guest_taps, ifindexes_of  # noqa: E402
from vwlab.ovn import Ovn                                      # noqa: E402
from vwlab.qemu_events import EventWatch, stop_resume_windows  # noqa: E402

RATE = 1000
# Console lines that say the guest crashed (TCG: rare kernel panics after a
# migration) or booted again; checked after each migration and again before
# the next one (a reboot takes seconds to show).
CRASH_MARKS = ('Kernel panic', 'BUG:', 'Oops', 'is not a head',
               'vw-guest: ready')


def _marks(guest):
    text = guest.console_text()
    return sum(text.count(m) for m in CRASH_MARKS)
# The probe's datagrams (on taps, and inside GRE on the underlay), and
# every RARP and ARP (a guest's first frame on its destination).
BPF = 'udp port 7000 or ip proto 47 or ether proto 0x8035 or arp'


class System:
    """One system's guest, far and near ends, and how it migrates."""

    def __init__(self, name, guest, ends, ports=None, ovn=None, api=None):
        self.crashes = 0
        self.api = api          # ours: when the controller saw activation
        self.name, self.guest, self.ends = name, guest, ends
        self.ports, self.ovn = ports or [], ovn
        self.where, self.rows = None, {k: [] for k in ends}
        self.marks = None

    def make_guest(self, lab, host):
        """(Re)create the guest on `host` with its vNIC ids; OVN learns its
        new MACs. Used after a crash: the run says nothing about the
        network, and a crashed guest answers nothing afterwards."""
        if self.guest is not None:
            lab.destroy_guest(self.guest)
        bridge = 'br-ovn' if self.ovn else 'br-int'
        nics = [(nic, ip + '/24') for _vm, ip, nic in self.ends.values()]
        self.guest = host.define_guest('bm-%s' % self.name, nics,
                                       bridge=bridge)
        if self.ovn:
            for p in self.ports:
                ip = [ip for _vm, ip, nic in self.ends.values()
                      if nic == p][0]
                self.ovn.nbctl('lsp-set-options', p, 'requested-chassis=%s'
                               % host.name)
                self.ovn.nbctl('lsp-set-addresses', p, '%s %s' % (
                    self.guest.nics[p]['mac'], ip))
                self.ovn.wait_up(p)
        self.where, self.marks = host, None
        self.wait_answers()

    def wait_answers(self):
        for vm, ip, _nic in self.ends.values():
            for _ in range(200):
                if vm.ping(ip, count=1, wait=1)[1]:
                    break
            else:
                raise SystemExit('%s: %s does not answer' % (self.name, ip))

    def valid(self):
        return sum(1 for r in self.rows['far'] if not r['guest_crashed'])

    def before(self, src, dst):
        for p in self.ports:
            self.ovn.prepare_move(p, src.name, dst.name)

    def after(self, dst):
        for p in self.ports:
            self.ovn.finish_move(p, dst.name)


def setup(lab, api, ovn):
    h1, _h2, h3 = lab.hosts
    systems = []
    for name, bridge, net in (('virtualwire', 'br-int', 91),
                              ('ovn', 'br-ovn', 93)):
        nf, nn = str(uuid.uuid4()), str(uuid.uuid4())
        g = h1.define_guest('bm-%s' % name, [
            (nf, '10.%d.0.1/24' % net), (nn, '10.%d.0.1/24' % (net + 1))],
            bridge=bridge)
        far = h3.add_vm('bf-%s' % name[:3], [
            ('bf-%s' % name[:3], '10.%d.0.2/24' % net)], bridge=bridge)
        near = h1.add_vm('bn-%s' % name[:3], [
            ('bn-%s' % name[:3], '10.%d.0.2/24' % (net + 1))], bridge=bridge)
        ends = {'far': (far, '10.%d.0.1' % net, nf),
                'near': (near, '10.%d.0.1' % (net + 1), nn)}
        if name == 'virtualwire':
            for vm, _ip, nic in ends.values():
                api.call('POST', '/v1/wires', {'a': nic, 'b': vm.name})
            systems.append(System(name, g, ends, api=api))
        else:
            for k, (vm, ip, nic) in ends.items():
                ls = 'ls-%s' % k
                ovn.add_port(ls, nic, g.nics[nic]['mac'], ip)
                ovn.add_port(ls, vm.name, vm.nics[vm.name]['mac'],
                             ip[:-1] + '2')
            for k, (vm, ip, nic) in ends.items():
                ovn.wait_up(nic)
                ovn.wait_up(vm.name)
            systems.append(System(name, g, ends, [nf, nn], ovn))
        systems[-1].wait_answers()
        systems[-1].where = h1
    return systems


def migrate_once(lab, sysm, downtime_ms, capdir):
    h1, h2, _h3 = lab.hosts
    src = sysm.where
    dst = h2 if src is h1 else h1
    g = sysm.guest
    caps = HostCaptures([src, dst], capdir, bpf=BPF).__enter__()
    src_taps = guest_taps(src, g.name)
    # Streams run until told to stop (SIGINT), well after the last step.
    streams = {k: vm.tool_bg('udp-echo', '--dst', ip, '--rate', RATE,
                             '--seconds', 120, realtime=True)
               for k, (vm, ip, _nic) in sysm.ends.items()}
    marks = _marks(g)
    time.sleep(1.0)
    sysm.before(src, dst)
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
    caps.stop()
    sysm.where = dst
    [window] = stop_resume_windows(ev.events, g.name)
    stop, _s, resume, _d = window
    dcap = [c for c in caps.caps if c.host == dst.name][0]
    tap_of = _taps_by_nic(dst, g.name)
    # A guest that crashed (TCG: rare kernel panics after a migration) and
    # rebooted says 'ready' again: its run says nothing about the network.
    sysm.marks = _marks(g)
    crashed = sysm.marks > marks or _crashed_late(sysm, 1.0)
    line = ['%-11s %s->%s %.2fs pause %5.1f%s' % (
        sysm.name, src.name, dst.name, took, (resume - stop) * 1000,
        ' GUEST CRASHED (excluded)' if crashed else '')]
    near = {q.to_bytes(8, 'big') for r in reports.values()
            for q, t in enumerate(r['sent_times'])
            if stop - 0.1 <= t <= resume + 0.1}
    grams_all = caps.datagrams(near)
    seen_by_controller = _activated_at(sysm)
    # The OVS userspace tunnel race (docs/benchmarks.rst): windows in which
    # a host's switch re-translated tunnel flows without their tunnel
    # action, from its dpif_netdev debug log; and when the source's tap
    # left its switch (libvirt, after the guest left).
    races = {h.name: [w for w in loss_audit.ovs_glitches(h.vswitchd_log())
                      if stop - 2 <= w[0] <= resume + 2] for h in (src, dst)}
    gone = _tap_deleted_at(src, src_taps, stop)
    logs = {h.name: h.vswitchd_log() for h in lab.hosts}
    ctl_log = _controller_log(lab) if sysm.api is not None else None
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
            _hole_cause(h, resume, races, gone) for h in row['other_holes']
            if h['ms_after_resume'] > 0]
        # Each second hole's evidence: what the switches' datapaths and the
        # controller did around it (ms after RESUME).
        row['second_hole_context'] = [
            hole_context.around(resume + h['ms_after_resume'] / 1000.0,
                                resume + (h['ms_after_resume'] + h['ms'])
                                / 1000.0, resume, logs, ctl_log)
            for h in row['other_holes'] if h['ms_after_resume'] > 0]
        row['lost_on_the_way_in'] = r['lost_on_the_way_in']
        row['lost_on_the_way_back'] = r['lost_on_the_way_back']
        line.append('%s: lost %d (in %d) added %s net %s frame %s->dlv %s%s%s%s' % (
            k, r['lost'], r['lost_on_the_way_in'], _f(row['added_ms']), _f(edges['network_ms']),
            _f(row['first_frame'] and row['first_frame']['ms_after_resume']),
            _f(edges['first_frame_to_delivery_ms']) + (
                ' (ctl %s)' % _f(row['controller_ms_after_frame'])
                if row['controller_ms_after_frame'] is not None else ''),
            ' dup %d' % row['duplicates'] if row['duplicates'] else '',
            ' 2nd-hole %s' % row['second_hole_causes']
            if row['second_hole'] else '',
            ' UNPROBED (%s)' % row['unprobed_why'] if not row['probed']
            else ''))
    print('  '.join(line), flush=True)


def _controller_log(lab):
    path = os.path.join(lab.dir, 'controller', 'controller.log')
    with open(path, errors='replace') as f:
        return f.read()


def _tap_deleted_at(host, taps, since):
    """When the last of `taps` ((host, iface)) left host's switch (its
    vswitchd log)."""
    at = None
    for line in host.vswitchd_log().splitlines():
        m = _DELETED.match(line)
        if m and (host.name, m.group(3)) in taps:
            t = calendar.timegm(time.strptime(m.group(1), '%Y-%m-%dT%H:%M:%S')
                                ) + int(m.group(2)) / 1e3
            if t >= since:
                at = t
    return at


_DELETED = re.compile(r'^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z\|.*'
                      r'\|bridge\|INFO\|bridge [^:]+: deleted interface '
                      r'(\S+) on port')


def _hole_cause(hole, resume, races, gone):
    """What a loss after the main hole coincided with: a tunnel-race window
    on either host (within 10 ms: the echo's way back is later than its
    send time), and when the source's tap had left, relative to RESUME."""
    start = resume + hole['ms_after_resume'] / 1000.0
    end = start + hole['ms'] / 1000.0
    hit = sorted(h for h, ws in races.items()
                 if any(a - 0.010 <= end and start <= b + 0.010
                        for a, b in ws))
    return {'ms_after_resume': hole['ms_after_resume'],
            'tunnel_race_on': hit,
            'source_tap_left_ms_after_resume': (
                None if gone is None else round((gone - resume) * 1000, 1))}


def realtime(lab):
    """All threads of the switches and both systems' controllers
    SCHED_RR 1."""
    pidfiles = [os.path.join(h.dir, 'vswitchd.pid') for h in lab.hosts] + \
        glob.glob(os.path.join(lab.dir, '**', 'ovn-controller.pid'),
                  recursive=True)
    pids = [open(p).read().strip() for p in pidfiles] + \
        [str(lab.controller.pid)]
    for pid in pids:
        sh(['chrt', '-a', '-r', '-p', '1', pid])
    print('SCHED_RR 1: %d processes' % len(pids), flush=True)


def _activated_at(sysm):
    """{vNIC: when the controller handled its activation} of the guest's
    last migration (ours only)."""
    if sysm.api is None:
        return {}
    recs = [m for m in sysm.api.call('GET', '/v1/migrations')['migrations']
            if set(m.get('vnics', ())) & {n for _v, _i, n in
                                          sysm.ends.values()}]
    if not recs:
        return {}
    last = max(recs, key=lambda m: m.get('started_at') or 0)
    return dict(last.get('activated') or {})


def _crashed_late(sysm, wait):
    """Did the guest (whose console said nothing yet) stop answering? A
    crash can take a moment to reach the console."""
    time.sleep(wait)
    vm, ip, _nic = sysm.ends['far']
    if vm.ping(ip, count=3, interval=0.2, wait=1)[1] > 0:
        return _marks(sysm.guest) > sysm.marks
    return True


def _f(v):
    return '-' if v is None else '%.1f' % v


def _taps_by_nic(host, domain):
    """{interfaceid: tap} of a libvirt guest on host (from its live XML)."""
    import xml.etree.ElementTree as ET
    root = ET.fromstring(host.libvirt.virsh('dumpxml', domain).stdout)
    out = {}
    for itf in root.findall('./devices/interface'):
        t, p = itf.find('target'), itf.find('virtualport/parameters')
        if t is not None and p is not None:
            out[p.get('interfaceid')] = t.get('dev')
    return out


def report(systems):
    doc = {}
    print('\n%-11s %-4s %7s %16s %16s %14s %4s %5s %s' % (
        '', 'end', 'pause50', 'added p50/p90/max', 'network p50/max',
        'frame->dlv p50', 'dup', '2nd', 'unprobed'))
    for s in systems:
        doc[s.name] = {}
        for k, rows in s.rows.items():
            sm = outage.summarise([r for r in rows if not r['guest_crashed']])
            sm['guest_crashed'] = [i + 1 for i, r in enumerate(rows)
                                   if r['guest_crashed']]
            sm['rows'] = rows
            ctl = [r['controller_ms_after_frame'] for r in rows
                   if not r['guest_crashed'] and
                   r.get('controller_ms_after_frame') is not None]
            if ctl:
                sm['controller_ms_after_frame'] = outage.dist(ctl)
            doc[s.name][k] = sm
            a, n = sm['added_ms'], sm['capture_network_ms']
            print('%-11s %-4s %7s %16s %16s %14s %4d %5d %d/%d %s' % (
                s.name, k, _f(sm['pause_ms']['p50']),
                '%s/%s/%s' % (_f(a['p50']), _f(a['p90']), _f(a['max'])),
                '%s/%s' % (_f(n['p50']), _f(n['max'])),
                _f(sm['first_frame_to_delivery_ms']['p50']),
                sm['duplicates'], sm['second_holes'],
                len(sm['unprobed']), sm['migrations'],
                '; '.join(['#%d %s' % (u['run'], u['why'])
                           for u in sm['unprobed']] +
                          ['#%d guest crashed' % i
                           for i in sm['guest_crashed']])))
    print("\nthe destination switch's share of frame -> delivery (captures), "
          'ms p50/p90/max: drops after the frame | delay of the first '
          'delivery')
    for s in systems:
        for k in s.rows:
            sm = doc[s.name][k]
            d, w = sm['dropped_after_frame_ms'], sm['switch_latency_ms']
            print('%-11s %-4s %16s | %s' % (
                s.name, k, '%s/%s/%s' % (_f(d['p50']), _f(d['p90']),
                                         _f(d['max'])),
                '%s/%s/%s' % (_f(w['p50']), _f(w['p90']), _f(w['max']))))
    ratios = {}
    for k in systems[0].rows:
        vw, ov = doc['virtualwire'][k], doc['ovn'][k]
        ratios[k] = {m: _ratio(ov[f][m], vw[f][m])
                     for f in ('added_ms',) for m in ('p50', 'p90', 'max')}
        ratios[k]['network_p50'] = _ratio(
            ov['capture_network_ms']['p50'], vw['capture_network_ms']['p50'])
        print('OVN / VirtualWire, %s end: added p50 %s, p90 %s, max %s; '
              'network p50 %s' % (k, ratios[k]['p50'], ratios[k]['p90'],
                                  ratios[k]['max'], ratios[k]['network_p50']))
    doc['ratio_ovn_to_virtualwire'] = ratios
    for k, sm in doc['virtualwire'].items():
        c = sm.get('controller_ms_after_frame')
        if c:
            print('VirtualWire, %s end: the controller handled the '
                  "activation p50 %s / p90 %s / max %s ms after the guest's "
                  'first frame (the switch had learned delivery itself; the '
                  'cleanup follows after the settle time)'
                  % (k, c['p50'], c['p90'], c['max']))
    return doc


def _ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return round(a / b, 2)


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
    args = ap.parse_args()
    with Lab(3, libvirt=True, ovs_nice=args.ovs_nice) as lab:
        lab.start_controller()
        api = Api(lab)
        api.wait_hosts(3)
        # Every datapath flow change logged: second holes are matched to
        # tunnel-race windows (_hole_cause).
        for h in lab.hosts:
            h.log_datapath_flow_changes()
        ovn = Ovn(lab)
        ovn.start()
        systems = setup(lab, api, ovn)
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
        doc.update({'migrations_per_system': args.migrations,
                    'rate_hz': RATE, 'downtime_limit_ms': args.downtime_ms,
                    'probe': 'udp-echo 1 kHz, SCHED_FIFO, clock-paced',
                    'ovs_nice': args.ovs_nice, 'realtime': args.realtime,
                    'captures': capdir if args.keep_captures else None})
        write_result(args.result, doc)


if __name__ == '__main__':
    main()
