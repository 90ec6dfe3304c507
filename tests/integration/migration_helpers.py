"""What the live-migration integration tests share: the probe's report,
a wire's hosts and flows, the loss audit of a migration's captures, a
migration in the background and a domain's state."""
import json
import subprocess
import sys

from conftest import flows_of
from virtualwire.core import ids
from vwlab import loss_audit

# Lost datagrams are followed through packet captures (lab.loss_audit): one
# the network did not deliver must have been sent within the guest's
# STOP->RESUME window, give or take MARGIN: a datagram sent just before
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


def wire_hosts(api, wid):
    w = api.wire(wid)
    return w['state'], {w['host_a'], w['host_b']}


def vwctl(lab, *args, timeout=120):
    return subprocess.run([sys.executable, '-m', 'virtualwire.cli',
                           '--config', lab.vwctl_config] + list(args),
                          capture_output=True, text=True, timeout=timeout)


def heads(reports):
    """Payload heads (sequence numbers) of the datagrams the reports lost:
    the only ones worth reading back from the captures."""
    return {q.to_bytes(8, 'big') for r in reports
            for q, _ in r['lost_sent_at']}


def audit(lab, report, grams, guest_ip, peer_ip, taps, windows,
           overruns=None):
    """(lost runs by cause, the lost datagrams nothing excuses). The hosts
    must have been logging datapath flow changes (for OVS's own glitches);
    overruns: HostCaptures.overruns(), drops the kernel counted on starved
    switches (an overloaded lab, not a wrong flow)."""
    glitches = {h.name: loss_audit.ovs_glitches(h.vswitchd_log())
                for h in lab.hosts}
    verdicts = loss_audit.explain(
        [tuple(x) for x in report['lost_sent_at']], grams, guest_ip, peer_ip,
        7000, taps, {(h.name, 'br-phy') for h in lab.hosts}, windows, MARGIN,
        glitches, overruns)
    bad = [v for v in verdicts if v.cause == 'network' or (
        v.cause == 'guest' and not any(stop - GUEST_BEFORE_STOP <= v.at <= stop
                                       for stop, _, _, _ in windows))]
    return loss_audit.summary(verdicts, windows), bad


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
