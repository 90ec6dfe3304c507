"""The soak tier's judge of a migration: each lost datagram followed
through the captures to one cause (forensics.loss_audit), each duplicate
to its maker (forensics.duplicate_audit). Stricter and slower than CI's
vwtest.switchover, and it explains what it fails."""
from forensics import duplicate_audit, loss_audit
from vwtest.migration import GUEST_BEFORE_STOP, MARGIN

# Two TCG guests moving at once on 2 cores (the ensemble test): CI on
# b892fc9 saw a destination activated 19 ms after RESUME (QEMU's announce
# late under load; 4 datagrams at 15.6-18.7 ms). Issue 42 works on the tail.
ENSEMBLE_MARGIN = 0.030


def heads(reports):
    """Payload heads (sequence numbers) of the datagrams the reports lost:
    the only ones worth reading back from the captures."""
    return {q.to_bytes(8, 'big') for r in reports
            for q, _ in r['lost_sent_at']}


def duplicate_heads(reports):
    """Payload heads of the sequence numbers echoed twice."""
    return {q.to_bytes(8, 'big') for r in reports
            for q in r['duplicate_seqs']}


def check_duplicates(report, grams, guest_ip, taps, allowed=0):
    """Fail on a duplicate the network made (forensics.duplicate_audit: the
    guest handed a request twice, or its one echo doubled on the way),
    beyond `allowed` (what held frames say they could not place); one
    the guest sent twice itself is its own. Returns {seq: cause}."""
    causes = duplicate_audit.explain(report['duplicate_seqs'], grams,
                                     guest_ip, 7000, taps)
    ours = [q for q, c in causes.items() if c in duplicate_audit.OURS]
    # Beyond the 100 listed, nothing is known: all count as ours.
    ours_n = len(ours) + report['duplicates'] - len(causes)
    assert ours_n <= allowed, str((guest_ip, report['duplicates'], causes,
                                   'allowed', allowed))
    return causes


def audit(lab, report, grams, guest_ip, peer_ip, taps, windows,
           overruns=None, margin=MARGIN):
    """(lost runs by cause, the lost datagrams nothing excuses). The hosts
    must have been logging datapath flow changes (for OVS's own glitches);
    overruns: HostCaptures.overruns(), drops the kernel counted on starved
    switches (an overloaded lab, not a wrong flow)."""
    glitches = {h.name: loss_audit.ovs_glitches(h.vswitchd_log())
                for h in lab.hosts}
    verdicts = loss_audit.explain(
        [tuple(x) for x in report['lost_sent_at']], grams, guest_ip, peer_ip,
        7000, taps, {(h.name, 'br-phy') for h in lab.hosts}, windows, margin,
        glitches, overruns)
    bad = [v for v in verdicts if v.cause == 'network' or (
        v.cause == 'guest' and not any(stop - GUEST_BEFORE_STOP <= v.at <= stop
                                       for stop, _, _, _ in windows))]
    return loss_audit.summary(verdicts, windows), bad
