"""Live migration across clouds over a slow WAN: QEMU's plain pre-copy
(profile `default`) against `vwctl migrate --profile wan` (multifd with
zstd and auto-converge: controller/virtualwire/cli/migration_profile.py;
runs 1-3 measured an earlier `wan`, now `deltas`: page deltas, auto-converge
and in runs 1-2 zlib on two threads), side by side in one run,
alternating (--kinds picks the profiles).

The lab: two clouds (bench/cloud_lab.py) whose NATs send at most
--wan-rate (tc tbf: a 100 Mbit/s WAN link each way); the extenders shape
their link to --link-rate, the wires' frames first. Each move is a fresh
guest (256 MiB, TCG) that keeps writing memory (vw-dirty: a --dirty
working set of 64-byte records, one record's counter bumped in each page
it writes: lab/vwlab/guest/vw-dirty.c), from h1 (cloud-a) to h2
(cloud-b), with the migration options of its profile as `virsh migrate`
flags (the hook path; vwctl asks libvirt for the same). Per move:

  link_mb          the migration's TCP stream as it left cloud-a (counted
                   at cloud-a's extender, before encryption), MB
  qemu_mib         what QEMU says it sent (libvirt's completed job)
  took_s           `virsh migrate` start to end
  pause_ms         QEMU STOP (source) -> RESUME (destination), QMP events
  added_ms         the probe wire's outage beyond the pause (a 250 Hz echo
                   stream from h3 to the guest, vwlab.outage)
  stream_mbit_s    the migration stream's mean rate on the link
  wire_delivered   a second wire (h3 -> h2, across the same link) sending
  wire_delay_ms    --wire-pps datagrams of 1000 B for --wire-seconds inside
                   the migration: the share that arrived, and their one-way
                   delay (the shaper keeps them ahead of the migration's
                   stream)

Then --unshaped moves with the extenders' shaping removed: the same wire
stream without the shaper, for contrast.

    python bench/bench_wan_migration.py [--runs 5] [--unshaped 1]
"""
import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cloud_migration import GUEST, FAR, one_move     # noqa: E402
from cloud_lab import two_clouds, wait                    # noqa: E402
from common import write_result                           # noqa: E402

from virtualwire.cli import migration_profile as mp      # noqa: E402
from vwlab import guest_crash                            # noqa: E402
from vwlab.migration_options import virsh_options         # noqa: E402
from vwlab.shell import sh                                # noqa: E402
from vwlab.switch_counters import (parse_coverage,        # noqa: E402
                                   parse_ports)

MEMORY_MB = 256
PROBE_RATE = 250          # 1 kHz through userspace WireGuard starves a move
WIRE_A, WIRE_B = '10.94.0.1', '10.94.0.2'


def forward_bytes(x):
    """Bytes of the TCP the extender has forwarded to the other cloud (the
    first FORWARD rule, put there by count_migration)."""
    out = sh(['iptables', '-nvxL', 'FORWARD', '1'], ns=x.ns).split()
    return int(out[1])


def count_migration(lab, x):
    sh(['iptables', '-I', 'FORWARD', '1', '-p', 'tcp', '-d',
        lab.clouds.ul_net('cloud-b') + '.0/24'], ns=x.ns)


def drops(lab):
    """{where: packets dropped so far}: each site's WAN bucket, and each
    extender's devices (their qdiscs, the link's HTB among them, and
    the kernel's transmit drops, a WireGuard tun's full queue among
    them): where a frame lost between the clouds may have died."""
    out = {'wan %s' % s: lab.clouds.wan_drops(s) for s in lab.clouds.order}
    for x in lab.extenders:
        for q in json.loads(sh(['tc', '-s', '-j', 'qdisc', 'show'],
                               ns=x.ns)):
            if q.get('drops'):
                k = '%s qdisc %s' % (x.name, q.get('dev'))
                out[k] = out.get(k, 0) + q['drops']
        for link in json.loads(sh(['ip', '-s', '-j', 'link', 'show'],
                                  ns=x.ns)):
            n = link.get('stats64', {}).get('tx', {}).get('dropped', 0)
            if n:
                out['%s tx %s' % (x.name, link['ifname'])] = n
    # UDP sockets' full queues and bad datagrams: a WireGuard daemon's,
    # the VXLAN device's, and what the NATs themselves receive.
    spaces = [(x.name, x.ns) for x in lab.extenders] + [
        ('nat ' + s, lab.clouds.nat_ns(s)) for s in lab.clouds.order]
    for name, ns in spaces:
        for k, n in udp_errors(ns).items():
            if n:
                out['%s udp %s' % (name, k)] = n
    # The switches' own: each port's drops and errors, and the userspace
    # datapath's drop counters (coverage), on every host and extender.
    seen = {}
    for h in list(lab.hosts) + list(lab.extenders):
        seen.setdefault(h.name, h)
    for h in seen.values():
        out.update(switch_drops(h))
    return out


def switch_drops(h):
    """{'HOST KIND NAME': n} of one switch's non-zero drop counters."""
    doc = json.loads(h.vsctl('--format=json', '--columns=name,statistics',
                             'list', 'interface'))
    out = {'%s %s' % (h.name, k): n for k, n in parse_ports(doc).items()
           if n}
    out.update({'%s coverage %s' % (h.name, k): n for k, n in
                parse_coverage(h.appctl('coverage/show')).items()
                if n and 'drop' in k})
    return out


def udp_errors(ns):
    """The namespace's UDP error counters (/proc/net/snmp)."""
    lines = [ln.split() for ln in sh(['cat', '/proc/net/snmp'],
                                      ns=ns).splitlines()
             if ln.startswith('Udp:')]
    head, vals = lines[0][1:], [int(v) for v in lines[1][1:]]
    return {k: v for k, v in zip(head, vals)
            if k in ('InErrors', 'RcvbufErrors', 'SndbufErrors')}


class Meter:
    """Counters and the wire stream around one migration."""

    def __init__(self, lab, xa, a, b, pps, seconds, workdir):
        self.lab, self.xa, self.seconds = lab, xa, seconds
        self.fwd = forward_bytes(xa)
        self.wan = {s: lab.clouds.wan_bytes(s) for s in lab.clouds.order}
        self.drops = drops(lab)
        ready = os.path.join(workdir, 'recv.ready')
        if os.path.exists(ready):
            os.unlink(ready)
        self.recv = b.tool_bg('udp-recv', '--port', 9100, '--seconds',
                              seconds + 6, '--ready-file', ready)
        wait(lambda: os.path.exists(ready), 10)
        self.t0 = time.time()
        self.send = a.tool_bg('udp-send', '--dst', WIRE_B, '--port', 9100,
                              '--rate', pps, '--seconds', seconds,
                              '--size', 1000)

    def finish(self, took):
        sent = json.loads(self.send.communicate(timeout=120)[0]
                          .splitlines()[-1])['sent']
        sender_s = time.time() - self.t0
        got = json.loads(self.recv.communicate(timeout=120)[0]
                         .splitlines()[-1])
        return {
            'link_mb': round((forward_bytes(self.xa) - self.fwd) / 1e6, 1),
            'wan_mb': {s: round((self.lab.clouds.wan_bytes(s) -
                                 self.wan[s]) / 1e6, 1) for s in self.wan},
            'drops': {k: n - self.drops.get(k, 0)
                      for k, n in drops(self.lab).items()
                      if n > self.drops.get(k, 0)},
            'wire_sent': sent, 'wire_received': got['received'],
            'wire_delay_ms': got.get('delay_ms'),
            'stream_mbit_s': round((forward_bytes(self.xa) - self.fwd) * 8 /
                                   took / 1e6, 1),
            'wire_delivered': round(got['received'] / sent, 4) if sent
            else None,
            # The stream ran within the migration: it judged the move.
            'wire_inside_migration': took >= self.seconds + 0.5,
            'wire_sender_s': round(sender_s, 1)}


def completed_job(host, name):
    import libvirt
    st = host.libvirt.conn().lookupByName(name).jobStats(
        libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED)
    return {'qemu_mib': round(st.get('data_processed', 0) / (1 << 20), 1),
            'qemu_downtime_ms': st.get('downtime'),
            'passes': st.get('memory_iteration'),
            'xbzrle_mib': round(st.get('compression_bytes', 0) / (1 << 20),
                                1),
            'throttle_pct': st.get('auto_converge_throttle')}


def kind_profile(kind):
    """A --kinds entry: a profile's name, '-unshaped' after it for the
    unshaped moves, '/N' for N multifd streams instead of its own."""
    name, _, streams = kind.split('-')[0].partition('/')
    profile = mp.PROFILES[name]
    return dataclasses.replace(profile, zstd_streams=int(streams)) \
        if streams else profile


def unshape(x):
    for dev in sh(['ip', '-o', 'link', 'show', 'type', 'vxlan'],
                  ns=x.ns).split('\n'):
        if dev.strip():
            name = dev.split(':')[1].strip().split('@')[0]
            sh(['tc', 'qdisc', 'del', 'dev', name, 'root'], ns=x.ns,
               check=False)


def dist(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {'n': len(vals), 'min': min(vals), 'median':
            round(statistics.median(vals), 2), 'max': max(vals)}


def summarise(rows):
    ok = [r for r in rows if not r['guest_crashed']]
    keys = ('link_mb', 'qemu_mib', 'took_s', 'pause_ms', 'added_ms',
            'wire_delivered', 'passes', 'throttle_pct', 'stream_mbit_s')
    out = {k: dist([r.get(k) for r in ok]) for k in keys}
    out['wire_delay_p99_ms'] = dist([(r.get('wire_delay_ms') or {}).get(
        'p99') for r in ok])
    # The network's part of the outage, from the captures (added_ms also
    # holds a TCG guest that does not answer for seconds after RESUME).
    out['network_ms'] = dist([r['capture'].get('network_ms') for r in ok])
    out['guest_crashed_runs'] = [r['run'] for r in rows if r['guest_crashed']]
    out['wire_inside_migration'] = all(r['wire_inside_migration']
                                       for r in ok)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=5, help='moves per profile')
    ap.add_argument('--kinds', default='default,wan',
                    help='profiles, alternated, --runs times each (wan/1: '
                         'wan with one multifd stream)')
    ap.add_argument('--unshaped', type=int, default=1,
                    help='wan moves with the extenders unshaped, after')
    ap.add_argument('--wan-rate', default='100mbit')
    ap.add_argument('--link-rate', default='88mbit',
                    help="the agents' --link-rate: below --wan-rate by the "
                         'tunnel overhead (about 110 B a packet)')
    ap.add_argument('--dirty', default='64:1200:sparse',
                    help='the guest working set, MIB:PAGES_PER_S:MODE')
    ap.add_argument('--wire-pps', type=int, default=500)
    ap.add_argument('--wire-seconds', type=float, default=12)
    ap.add_argument('--result', default='wan_migration',
                    help='bench/results/NAME.json and .txt (default: '
                         '%(default)s)')
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix='vw-wanmig-')
    order = [k for _ in range(args.runs) for k in args.kinds.split(',')] + \
        ['wan-unshaped'] * args.unshaped
    rows = []
    with two_clouds(link_rate=args.link_rate, wan_rate=args.wan_rate) as (
            lab, api):
        h1, h2, h3 = lab.hosts[:3]
        xa = [x for x in lab.extenders if x.site == 'cloud-a'][0]
        count_migration(lab, xa)
        nic = str(uuid.uuid4())
        far = h3.add_vm('wmf', [('wmf-nic', FAR + '/24')])
        a = h3.add_vm('wwa', [('wwa-nic', WIRE_A + '/24')])
        b = h2.add_vm('wwb', [('wwb-nic', WIRE_B + '/24')])
        api.call('POST', '/v1/wires', {'a': nic, 'b': 'wmf-nic'})
        api.call('POST', '/v1/wires', {'a': 'wwa-nic', 'b': 'wwb-nic'})
        if not wait(lambda: a.ping(WIRE_B, count=1)[1] == 1, 60):
            raise SystemExit('the wire across the clouds does not answer')
        for i, kind in enumerate(order):
            if kind == 'wan-unshaped' and (i == 0 or
                                           order[i - 1] != kind):
                for x in lab.extenders:
                    unshape(x)
            profile = kind_profile(kind)
            g = h1.define_guest('wan%d' % i, [(nic, GUEST + '/24')],
                                memory_mb=MEMORY_MB,
                                cmdline=['vw.dirty=' + args.dirty])
            if not wait(lambda: 'vw-dirty: ' in g.console_text(), 120):
                raise SystemExit('vw-dirty did not start in the guest')
            far.sh(['ip', 'neigh', 'replace', GUEST, 'lladdr',
                    g.nics[nic]['mac'], 'dev', far.nics['wmf-nic']['ifname'],
                    'nud', 'permanent'])
            if not wait(lambda: far.ping(GUEST, count=1)[1] == 1, 90):
                raise SystemExit('the guest does not answer before move %d'
                                 % (i + 1))
            time.sleep(3)      # the writer at its rate
            opts = virsh_options(h1, g, profile)
            booted = guest_crash.marks(g.console_text())
            row = one_move(lab, g, far, h1, h2, opts, workdir,
                           rate=PROBE_RATE, during=lambda: Meter(
                               lab, xa, a, b, args.wire_pps,
                               args.wire_seconds, workdir))
            row.update(completed_job(h2, g.name), run=i + 1, profile=kind,
                       options=opts)
            time.sleep(1.0)
            row['guest_crashed'] = guest_crash.marks(
                g.console_text()) > booted
            rows.append(row)
            print('%2d %-12s link %6.1f MB qemu %6.1f MiB took %5.1f s '
                  '(%s Mbit/s) passes %s pause %6.1f ms added %s wire '
                  'delivered %s delay %s%s%s'
                  % (i + 1, kind, row['link_mb'], row['qemu_mib'],
                     row['took_s'], row['stream_mbit_s'], row['passes'],
                     row['pause_ms'], row['added_ms'], row['wire_delivered'],
                     row['wire_delay_ms'],
                     '' if row['wire_inside_migration'] else
                     ' (wire stream outlasted the move)',
                     ' GUEST CRASHED (virtio ring)' if row['guest_crashed']
                     else ''), flush=True)
            lab.destroy_guest(g)
            subprocess.run(['sync'])
    by = {k: summarise([r for r in rows if r['profile'] == k])
          for k in dict.fromkeys(order)}
    d, w = by.get('default', {}), by.get('wan', {})

    def ratio(key):
        if not (d.get(key) and w.get(key)):
            return None
        return round(w[key]['median'] / d[key]['median'], 3)
    ratios = {k: ratio(k) for k in ('link_mb', 'qemu_mib', 'took_s',
                                    'pause_ms')}
    doc = {'runs': args.runs, 'unshaped': args.unshaped,
           'wan_rate': args.wan_rate, 'link_rate': args.link_rate,
           'guest': {'memory_mb': MEMORY_MB, 'dirty': args.dirty},
           'wire_stream': {'pps': args.wire_pps, 'bytes': 1000,
                           'seconds': args.wire_seconds},
           'probe_rate': PROBE_RATE, 'summary': by,
           'wan_over_default_medians': ratios, 'rows': rows,
           'goal': {'link_bytes_ratio_max': 0.5, 'pause_not_longer': True}}
    write_result(args.result, doc)
    for k, s in by.items():
        print('%-12s link MB %s; took s %s; pause ms %s; added ms %s; wire '
              'delivered %s, delay p99 %s; crashed %s' % (
                  k, s['link_mb'], s['took_s'], s['pause_ms'], s['added_ms'],
                  s['wire_delivered'], s['wire_delay_p99_ms'],
                  s['guest_crashed_runs']))
    print('wan / default (medians): %s' % ratios)


if __name__ == '__main__':
    main()
