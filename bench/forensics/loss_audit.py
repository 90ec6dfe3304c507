"""Where did each lost datagram of an echo stream die?

A live migration pauses the guest; datagrams lost while it is paused are the
guest's own outage, not the network's. Judging that by send time alone is
wrong on a loaded host: a datagram sent 15 ms before QEMU's STOP can reach
the source tap 1 ms before it and die with the source QEMU. So each lost
datagram is followed through packet captures (vwlab.capture) and
given one cause:

- 'guest':   it reached a tap of the guest where the guest was running at
             that moment, and the guest never answered (QEMU stopped with it
             queued, or the guest dropped it);
- 'pause':   it reached the source tap while the guest was paused, or it was
             not delivered and was sent within STOP - margin .. RESUME +
             margin (the guest could not have taken it anywhere);
- 'ovs-race': it vanished inside a host's OVS while that host's
             vswitchd had just re-translated its tunnel datapath flows
             without the tunnel (push or pop) and restored them a few ms
             later, or its tunnel frame was handed to the underlay bridge's
             kernel interface: OVS 3.1's userspace datapath rebuilds its
             tunnel routes on every interface event on the host (libvirt
             plugging a tap), racing its revalidators (docs/benchmarks.rst);
- 'overrun': it was last seen arriving on a host's interface whose
             ovs-vswitchd socket the kernel counted drops on (vwlab.overruns):
             the userspace switch was starved of CPU and its receive buffer
             overflowed. Never more such verdicts per interface than drops
             counted there;
- 'network': anything else: the network lost it outside the pause.

Pure: captures, windows and the lost list in, verdicts out.
"""
from collections import Counter, namedtuple

from vwlab.ovs_log import ovs_glitches, tunnel_dips  # noqa: F401 (re-exported)

# seen: where the datagram (or the guest's answer) was captured last,
# 'host iface in|out', or '' if no capture saw it: what a 'network' verdict
# needs to be looked into.
Verdict = namedtuple('Verdict', 'seq cause at host seen', defaults=('',))


def _where(d):
    return '%s %s %s' % (d.host, d.iface, 'out' if d.outgoing else 'in') \
        if d is not None else ''


def _seq(payload):
    return int.from_bytes(payload[:8], 'big') if len(payload) >= 8 else None


def guest_state(windows, t):
    """(host the guest runs on, or None while paused) at time t, from the
    STOP->RESUME windows [(stop, src, resume, dst)] in order."""
    where = windows[0][1] if windows else None
    for stop, src, resume, dst in windows:
        if t < stop:
            return src
        if t < resume:
            return None
        where = dst
    return where


def _paused_at(windows, t):
    """The window the guest is paused in at t, or None."""
    for w in windows:
        if w[0] <= t < w[2]:
            return w
    return None




def explain(lost, datagrams, guest_ip, peer_ip, port, guest_taps,
            underlay_ifaces, windows, margin, glitches=None, overruns=None):
    """lost: [(seq, sent_at)] of an echo stream peer -> guest:port;
    datagrams: capture records from every host; guest_taps: {(host, iface)}
    of the guest's NICs; underlay_ifaces: {(host, iface)} of the underlay
    bridges' kernel interfaces; glitches: {host: ovs_glitches(its log)};
    overruns: {(host, iface): drops the kernel counted on vswitchd's
    socket} (vwlab.overruns). Returns [Verdict] in seq order."""
    want = {q for q, _ in lost}
    requests, replies, misdecap = {}, {}, set()
    for d in datagrams:
        if d.dst == guest_ip and d.src == peer_ip and d.dport == port:
            book = requests
        elif d.src == guest_ip and d.dst == peer_ip and d.sport == port:
            book = replies
        else:
            continue
        q = _seq(d.payload)
        if q not in want:
            continue
        book.setdefault(q, []).append(d)
        if d.key is not None and (d.host, d.iface) in underlay_ifaces:
            misdecap.add(q)
    out = []
    budget = dict(overruns or {})
    for q, sent in sorted(lost):
        seen = requests.get(q, []) + replies.get(q, [])
        last = max(seen, key=lambda d: d.time) if seen else None
        raced = q in misdecap or (last is not None and any(
            s - GLITCH_SLACK <= last.time <= e + GLITCH_SLACK
            for s, e in (glitches or {}).get(last.host, ())))
        v = _one(q, sent, requests.get(q, []), replies.get(q, []),
                 raced, guest_taps, windows, margin)
        if v.cause == 'network' and last is not None and \
                not last.outgoing and budget.get((last.host, last.iface)):
            budget[(last.host, last.iface)] -= 1
            v = v._replace(cause='overrun', host=last.host)
        out.append(v._replace(seen=_where(last)))
    return _one_hole_one_cause(out)


def _one_hole_one_cause(verdicts):
    """A run of consecutive lost datagrams that the log ties to the OVS
    race in part is the race's as a whole: the log line comes after the
    datapath changed, and the hole can begin a few ms before it (seen: 5
    datagrams unexplained right before 23 the log explained)."""
    out = list(verdicts)
    i = 0
    while i < len(out):
        j = i
        while j + 1 < len(out) and out[j + 1].seq == out[j].seq + 1:
            j += 1
        run = out[i:j + 1]
        causes = {v.cause for v in run}
        if 'ovs-race' in causes and causes <= {'ovs-race', 'network'}:
            out[i:j + 1] = [v._replace(cause='ovs-race') for v in run]
        i = j + 1
    return out


# The log has millisecond stamps and is written after the datapath changed.
GLITCH_SLACK = 0.005


def _one(q, sent, requests, replies, raced, guest_taps, windows, margin):
    left = [d for d in replies
            if (d.host, d.iface) in guest_taps and not d.outgoing]
    if left:                        # the guest answered; the answer died
        d = min(left, key=lambda d: d.time)
        return _undelivered(q, d.time, raced, windows, margin, d.host)
    reached = sorted((d for d in requests
                      if (d.host, d.iface) in guest_taps and d.outgoing),
                     key=lambda d: d.time)
    for d in reached:
        running = guest_state(windows, d.time)
        if running == d.host:
            return Verdict(q, 'guest', d.time, d.host)
        w = _paused_at(windows, d.time)
        if w is not None and d.host == w[1]:
            return Verdict(q, 'pause', d.time, d.host)
    return _undelivered(q, sent, raced, windows, margin, None)


def _undelivered(q, t, raced, windows, margin, host):
    if any(stop - margin <= t <= resume + margin
           for stop, _, resume, _ in windows):
        return Verdict(q, 'pause', t, host)
    if raced:
        return Verdict(q, 'ovs-race', t, host)
    return Verdict(q, 'network', t, host)


def summary(verdicts, windows):
    """{cause: [(count, first ms, last ms) relative to the nearest STOP]}:
    runs of consecutive verdicts with the same cause, for messages; a
    'network' run also says where its datagrams were last captured."""
    out = {}
    for v in verdicts:
        stop = min((w[0] for w in windows), key=lambda s: abs(s - v.at),
                   default=0.0)
        ms = round((v.at - stop) * 1e3, 1)
        runs = out.setdefault(v.cause, [])
        if runs and runs[-1][3] == v.seq - 1:
            runs[-1] = (runs[-1][0] + 1, runs[-1][1], ms, v.seq)
        else:
            runs.append((1, ms, ms, v.seq))
    seen = {}
    for v in verdicts:
        if v.cause == 'network':
            seen[v.seen or 'never captured'] = \
                seen.get(v.seen or 'never captured', 0) + 1
    out = {k: [r[:3] for r in runs] for k, runs in out.items()}
    if seen:
        out['network last seen'] = sorted(seen.items())
    return out


def handed_to_guest(lost, datagrams, guest_taps, after):
    """The (seq, sent) of `lost` sent after `after` whose last sighting on
    `guest_taps` was the switch handing the datagram (either leg of an
    echo routed through the guest) into the guest: the network delivered
    it and the guest never passed it on. For a stream through a router
    guest, where `explain`'s peer -> guest model does not fit."""
    last = {}
    for d in sorted(datagrams, key=lambda d: d.time):
        if (d.host, d.iface) in guest_taps:
            last[_seq(d.payload)] = d
    return [(q, t) for q, t in lost if t > after and q in last and
            last[q].outgoing]


def last_seen(lost_seqs, datagrams, guest_ip):
    """{where a capture saw it last: count} of lost datagrams towards
    `guest_ip` ('host iface in|out'; '' if no capture saw it): with
    captures on both hosts of a move, says whether a datagram lost during
    the pause reached the destination's underlay, its tap, or neither."""
    last = {}
    for d in datagrams:
        q = _seq(d.payload) if d.dst == guest_ip else None
        if q in lost_seqs and (q not in last or d.time > last[q].time):
            last[q] = d
    return dict(Counter(_where(last.get(q)) for q in lost_seqs))
