"""What the live-migration integration tests share: the probe's report,
a wire's hosts and flows, a migration in the background, a domain's
state, and three guests moved together (Ensemble). How a move is judged:
vwtest.switchover; why a datagram died: bench/forensics."""
import json
import subprocess
import sys

from vwtest import flows_of
from virtualwire.core import ids
from vwlab import guest_crash

# A datagram the network did not deliver must have been sent within the
# guest's STOP->RESUME window, give or take MARGIN: a datagram sent just before
# STOP can still be dropped at the paused destination, and one sent just
# after RESUME can meet the destination before it is activated. Usually
# 1-3 ms here (the switch's learn delivers within a millisecond of the
# RARP on an idle machine; on this 2-core lab under two TCG guests, the
# measured tail has reached 6-11 ms: docs/benchmarks.rst, migration): the
# margin covers that, the benchmark reports the tail itself.
MARGIN = 0.015
# One the network did deliver to the running guest and the guest never
# answered is the guest's, but only just before its STOP (QEMU stops with
# it queued): anything else says the guest is not answering at all.
GUEST_BEFORE_STOP = 0.050


def probe_report(proc):
    out = proc.communicate(timeout=120)[0]
    return json.loads(out.strip().splitlines()[-1])


def stop_probe(proc, after=1.0):
    """An echo probe's report, ended `after` seconds from now (its
    after-RESUME window) rather than at a length guessed beforehand: a
    length long enough for a loaded machine idles on an idle one, and one
    too short ends before a late move."""
    import signal
    import time
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    return probe_report(proc)


def wire_hosts(api, wid):
    w = api.wire(wid)
    return w['state'], {w['host_a'], w['host_b']}


def vwctl(lab, *args, timeout=120):
    return subprocess.run([sys.executable, '-m', 'virtualwire.cli',
                           '--config', lab.vwctl_config] + list(args),
                          capture_output=True, text=True, timeout=timeout)


def migrate_bg(guest, src, dst):
    """`virsh migrate --live` started, not waited for."""
    return subprocess.Popen(['virsh', '-c', src.libvirt.uri, 'migrate',
                             '--live', guest.name, dst.libvirt.uri],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def domstate(host, name):
    p = host.libvirt.virsh('domstate', name, check=False)
    return p.stdout.strip() if p.returncode == 0 else None


def wire_flows(lab, wid):
    """The wire's flows on every host, without counters or durations."""
    cookie = '0x%x' % ids.wire_cookie(wid)
    return sorted(l.split(' actions')[0].split('priority')[1] + ' ' +
                  l.split('actions=')[1]
                  for h in lab.hosts for l in flows_of(h, cookie))


def dual_send(far_host, hosts, wid):
    """True once far_host sends wire wid's frames to every one of `hosts`
    (a move prepared: source and destination both get them)."""
    cookie = '0x%x' % ids.wire_cookie(wid)
    return sum('set_field:%s->tun_dst' % h.tunnel_ip in line
               for h in hosts for line in flows_of(far_host, cookie)) \
        == len(hosts)


ENSEMBLE = """\
name: %s
nodes:
  g1: {vm: %s, nics: {eth0: null, eth1: null}}
  g2: {vm: %s, nics: {eth0: null, eth1: null}}
  g3: {vm: %s, nics: {eth0: null}}
  f1: {vm: %s}
  f2: {vm: %s}
  f3: {vm: %s}
links:
  - endpoints: ["g1:eth0", "f1:eth0"]
  - endpoints: ["g2:eth0", "f2:eth0"]
  - endpoints: ["g3:eth0", "f3:eth0"]
  - endpoints: ["g1:eth1", "g2:eth1"]
"""


class Ensemble:
    """Three guests of one topology on `src` (g1 and g2 with two vNICs,
    wired to each other; each guest's eth0 wired to its own far VM on
    `far_host`), applied with vwctl; `move(to)` runs `vwctl migrate
    --topology` with 1 kHz echo streams from the far VMs throughout, QEMU
    events watched and the streams' datagrams captured."""

    def __init__(self, lab, tag, src, far_host, tmp_path):
        import uuid
        from vwlab import guest_report
        self.lab, self.tag, self.src, self.tmp = lab, tag, src, tmp_path
        self.ips = ['10.7%d.1.1' % i for i in (1, 2, 3)]
        e = [[str(uuid.uuid4()) for _ in range(k)] for k in (2, 2, 1)]
        self.guests = [src.define_guest('%s-g%d' % (tag, i + 1), [
            (v, ('%s/24' % self.ips[i]) if j == 0 else
             '10.74.1.%d/24' % (i + 1)) for j, v in enumerate(e[i])])
            for i in range(3)]
        self.fars = []
        for i in range(3):
            vm = far_host.add_vm('%s-f%d' % (tag, i + 1), [(
                '%s-f%d-nic' % (tag, i + 1), '10.7%d.1.2/24' % (i + 1))])
            guest_report.report(far_host, vm)
            g, nic = self.guests[i], e[i][0]
            # The far end keeps probing a guest that stalls.
            vm.sh(['ip', 'neigh', 'replace', self.ips[i], 'lladdr',
                   g.nics[nic]['mac'], 'dev', vm.nics[list(vm.nics)[0]][
                       'ifname'], 'nud', 'permanent'])
            self.fars.append(vm)
        self.far_host = far_host
        path = tmp_path / ('%s.yaml' % tag)
        path.write_text(ENSEMBLE % ((tag,) + tuple(
            x.name for x in self.guests + self.fars)))
        p = vwctl(lab, 'topology', 'apply', str(path), '--wait')
        assert p.returncode == 0, p.stderr

    def states(self, api):
        view = api.ok('GET', '/v1/topologies/%s' % self.tag)
        return {k['link']: (k['state'], k['path']) for k in view['links']}

    def move(self, to, dst, bpf='udp port 7000', options=(), rate=1000):
        """(vwctl's result, reports, {guest: [window]}, captures, taps).
        rate: each stream's datagrams per second."""
        import time
        from vwtest import wait_until
        from vwlab.capture import HostCaptures, guest_taps
        from vwlab.guest_drops import guest_counters, guest_drops
        from vwlab.qemu_events import EventWatch, stop_resume_windows
        lab, hosts = self.lab, [self.src, dst, self.far_host]
        for vm, ip in zip(self.fars, self.ips):
            wait_until(lambda: vm.ping(ip, count=1)[1] == 1, 60,
                       what='guest answers on %s' % ip)
        for h in lab.hosts:
            h.log_datapath_flow_changes()
        caps = HostCaptures(hosts, self.tmp, bpf=bpf).__enter__()
        taps = set().union(*(guest_taps(self.src, g.name)
                             for g in self.guests))
        watch = EventWatch([self.src, dst]).__enter__()
        # Until told to stop (a report of 900 s of sends is never read).
        streams = [vm.tool_bg('udp-echo', '--dst', ip, '--rate', rate,
                              '--seconds', 900, realtime=True)
                   for vm, ip in zip(self.fars, self.ips)]
        # The guests' own drop counters around the move (switchover.check:
        # what a starved guest's kernel dropped is not the network's).
        before = [guest_counters(vm, ip)
                  for vm, ip in zip(self.fars, self.ips)]
        time.sleep(1)
        t0 = time.time()
        p = vwctl(lab, 'migrate', '--topology', self.tag, '--to', to,
                  '--vm', 'g1', '--vm', 'g2', '--vm', 'g3', '--parallel',
                  '2', *options, timeout=600)
        print('vwctl migrate --topology took %.1f s (exit %d):\n%s\n%s' % (
            time.time() - t0, p.returncode, p.stderr, p.stdout), flush=True)
        for g in self.guests:
            taps |= guest_taps(dst, g.name)
        caps.note_interfaces()
        time.sleep(1)
        for s in streams:
            s.send_signal(2)
        reports = [probe_report(s) for s in streams]
        self.guest_dropped = {
            g.name: _received_and_dropped(guest_drops(
                b, guest_counters(vm, ip))) for g, b, vm, ip in
            zip(self.guests, before, self.fars, self.ips)}
        caps.stop()
        watch.__exit__(None, None, None)
        for h in lab.hosts:
            h.log_datapath_flow_changes(False)
        windows = {g.name: stop_resume_windows(watch.events, g.name)
                   for g in self.guests}
        return p, reports, windows, caps, taps

    def judged(self, reports, windows, caps, taps, dst, rate=1000,
               api=None):
        """{guest name: vwtest.switchover row} of each guest QEMU's TCG
        fault did not break; GuestCrashed if it broke them all. With
        `api`, each row also says when the controller's steps came
        (switchover.controller_steps)."""
        from vwtest import switchover
        broken = self.broken()
        if len(broken) == len(self.guests):
            raise guest_crash.GuestCrashed('every guest broke: %s' % broken)
        grams = caps.datagrams(switchover.heads_near(
            reports, [w for ws in windows.values() for w in ws]))
        races = switchover.races(self.lab.hosts)
        # Each guest's latest migration (the list is newest first).
        records = {} if api is None else {
            m['vm']: m for m in reversed(
                api.ok('GET', '/v1/migrations')['migrations'])}
        src_taps = {t for t in taps if t[0] == self.src.name}
        dst_taps = {t for t in taps if t[0] == dst.name}
        out = {}
        for g, r, ip in zip(self.guests, reports, self.ips):
            if g.name not in broken:
                [w] = windows[g.name]
                out[g.name] = switchover.judge(r, grams, ip, src_taps,
                                               dst_taps, w, races, rate)
                out[g.name]['guest_dropped'] = getattr(
                    self, 'guest_dropped', {}).get(g.name)
                rec = records.get(g.name)
                if rec is not None:
                    out[g.name].update(switchover.controller_steps(rec, w))
        return out

    def broken(self):
        """Guests QEMU's TCG fault crashed (guest_crash: their console)."""
        return [g.name for g in self.guests
                if guest_crash.crash_lines(g.console_text())]

    def remove(self, api):
        api.req('DELETE', '/v1/topologies/%s' % self.tag)
        for g in self.guests:
            self.lab.destroy_guest(g)
        for vm in self.fars:
            self.far_host.remove_vm(vm)


def _received_and_dropped(drops):
    """Of `vwlab.guest_drops.guest_drops`: datagrams the guest's kernel
    received and dropped (UDP InErrors, which includes its buffer-full
    RcvbufErrors; its NICs' rx_dropped); None if unknown."""
    if drops is None:
        return None
    return drops.get('InErrors', 0) + sum(
        n for k, n in drops.items() if k.endswith(' rx_dropped'))
