"""One live migration seen by a sequenced 1 kHz probe: the outage the
network added to the guest's own pause, and whether the probe measured it.

The guest is away from QEMU's STOP on the source to its RESUME on the
destination (`vwlab.qemu_events`); no network can do better. What the
network adds is judged two ways, side by side:

- by send times (`holes`, `judge`): the main hole (first to last lost
  datagram around the pause) minus the pause; later holes apart. Only
  meaningful if the sender was sending at both edges: a sender the machine
  did not schedule across STOP or RESUME (a send gap over PROBE_GAP
  straddling either) probed nothing there, and the run is *unprobed*:
  reported apart, never averaged in (`probe_check`);
- from packet captures on the guest's taps (`delivery_edges`), which do not
  depend on when the sender ran: the last datagram delivered into the
  source tap before STOP, the first delivered into the destination tap
  after RESUME, and the guest's first frame on the destination (the one
  that activates it) to that first delivery.

Pure: reports, captures and times in, figures out (`first_frame_from_guest`
and `first_frames_from_guest` read a capture file).
"""
from vwlab.capture import frames

PROBE_GAP = 0.002       # s: a send gap over this at STOP or RESUME: unprobed
MARGIN = 0.005          # s: see tests/integration/test_migration.py
HOLE_GAP = 0.005        # s of delivered datagrams that part two holes

PROTO_KIND = {0x8035: 'rarp', 0x0806: 'arp', 0x0800: 'ipv4',
              0x86dd: 'ipv6'}


def edge_gap(report, t):
    """The sender's silence (s) straddling time t: the send gap that
    contains t if it is over PROBE_GAP, else 0.0; infinite if the stream
    was not running at t at all."""
    times = report['sent_times']
    if not times or not times[0] <= t <= times[-1]:
        return float('inf')
    for at, gap in report.get('send_gaps', ()):
        if at <= t <= at + gap:
            return gap if gap > PROBE_GAP else 0.0
    return 0.0


def probe_check(report, stop, resume, rate=1000):
    """{'probed': bool, 'stop_gap_ms', 'resume_gap_ms', 'why'}: did the
    sender send within PROBE_GAP/2 of STOP and of RESUME? (A slower
    stream, `rate` a second, sends 1/rate apart: its gap may be that plus
    half of PROBE_GAP.)"""
    gaps = {'stop': edge_gap(report, stop), 'resume': edge_gap(report, resume)}
    limit = max(PROBE_GAP, 1.0 / rate + PROBE_GAP / 2)
    silent = [k.upper() for k, g in gaps.items() if g > limit]
    return {'probed': not silent,
            'stop_gap_ms': _ms(gaps['stop']),
            'resume_gap_ms': _ms(gaps['resume']),
            'why': '' if not silent else 'sender silent across %s' %
            ' and '.join(silent)}


def _ms(s):
    return None if s == float('inf') else round(s * 1000, 2)


def lost_outside(report, stop, resume, margin=MARGIN):
    """Lost datagrams each sent outside STOP - margin .. RESUME + margin:
    counted one by one (a run that only starts early counts only its early
    datagrams)."""
    return sum(1 for _q, t in report['lost_sent_at']
               if t < stop - margin or t > resume + margin)


def delivery_edges(grams, guest_ip, src_taps, dst_taps, stop, resume,
                   first_frame_at=None):
    """From captured datagrams of the stream (`vwlab.capture.Datagram`),
    sender-independent, in ms:
      last_before_stop   STOP minus the last delivery into a source tap
                         before it (a gap there is lost before STOP);
      first_into_dest    the first delivery into a destination tap after
                         STOP, from RESUME (negative: queued in the tap for
                         the resuming guest, which then loses nothing);
      network            the network's share of the guest's hole: the
                         first plus whatever of the second follows RESUME;
      first_frame_to_delivery  the guest's first frame on the destination
                         (`first_frame_at`: the frame that activates it) to
                         the first delivery there after it.
    None where nothing was seen."""
    into = [g for g in grams if g.outgoing and g.dst == guest_ip]
    before = [g.time for g in into if (g.host, g.iface) in src_taps and
              g.time <= stop]
    after = sorted(g.time for g in into if (g.host, g.iface) in dst_taps
                   and g.time > stop)
    out = {'last_before_stop_ms': None, 'first_into_dest_ms': None,
           'network_ms': None, 'first_frame_to_delivery_ms': None}
    if before:
        out['last_before_stop_ms'] = round((stop - max(before)) * 1000, 2)
    if after:
        out['first_into_dest_ms'] = round((after[0] - resume) * 1000, 2)
        if first_frame_at is not None:
            later = [t for t in after if t >= first_frame_at]
            if later:
                out['first_frame_to_delivery_ms'] = round(
                    (later[0] - first_frame_at) * 1000, 2)
    if before and after:
        out['network_ms'] = round(out['last_before_stop_ms'] + max(
            0.0, out['first_into_dest_ms']), 2)
    return out


def switch_over(grams, guest_ip, dst_host, dst_taps, frame_at,
                window=0.05):
    """The destination switch's own share of frame -> delivery, from
    captures: datagrams toward the guest that reached the destination host
    (its underlay, or a co-located end's port) after the guest's first
    frame, and which of them its switch never put into the guest's tap.
      dropped_after_frame  the last such drop, ms after the frame (0: none
                           dropped once the frame was in);
      switch_latency       the first delivered one: arrival at the host to
                           the tap (what a busy switch adds, not dropping);
      arrived              how many arrived in `window` s after the frame
                           (0: nothing measured; both figures None)."""
    arrived, into = {}, {}
    for g in grams:
        if g.dst != guest_ip or g.host != dst_host or len(g.payload) < 8:
            continue
        seq = g.payload[:8]
        if g.outgoing and (g.host, g.iface) in dst_taps:
            into[seq] = min(g.time, into.get(seq, g.time))
        elif not g.outgoing and (g.host, g.iface) not in dst_taps:
            arrived[seq] = min(g.time, arrived.get(seq, g.time))
    after = sorted((t, s) for s, t in arrived.items()
                   if frame_at <= t <= frame_at + window)
    out = {'arrived': len(after), 'dropped_after_frame_ms': None,
           'switch_latency_ms': None}
    if not after:
        return out
    dropped = [t for t, s in after if s not in into]
    out['dropped_after_frame_ms'] = round(
        (max(dropped) - frame_at) * 1000, 2) if dropped else 0.0
    firsts = [(into[s], t) for t, s in after if s in into]
    if firsts:
        d, a = min(firsts)
        out['switch_latency_ms'] = round((d - a) * 1000, 2)
    return out


def first_frame_from_guest(path, ifindexes, after):
    """(time, kind) of the first frame the guest sent into one of the
    interfaces `ifindexes` at or after time `after`, from an SLL2 capture;
    None if there was none. Kind: 'rarp', 'arp', 'ipv4', 'ipv6' or the
    ethertype."""
    firsts = first_frames_from_guest(path, ifindexes, after, 0.0)
    return firsts[0] if firsts else None


def first_frames_from_guest(path, ifindexes, after, within):
    """[(time, kind)] of the guest's frames as first_frame_from_guest's,
    from the first to `within` seconds after it: the frames a switch may
    read in one batch (OVS's userspace datapath then runs each flow's
    packets together, so a packet-in can overtake an earlier frame of
    another flow)."""
    out = []
    for t, proto, ifindex, outgoing in frames(path):
        if t >= after and ifindex in ifindexes and not outgoing:
            if out and t > out[0][0] + within:
                break
            out.append((t, PROTO_KIND.get(proto, '%#06x' % proto)))
    return out



def holes(report, stop, resume, rate):
    """(main hole, other holes) of a stream's losses: runs less than
    HOLE_GAP apart are one hole; the main hole is everything from the
    first to the last run that touches STOP - MARGIN .. RESUME + MARGIN
    (as (from, to + one interval) send times, or None); the others are
    holes before or after it, as dicts (ms after RESUME, ms, datagrams)."""
    merged = []
    for r in report['lost_runs']:
        if merged and r['from'] - merged[-1][1] < HOLE_GAP:
            merged[-1][1] = r['to']
            merged[-1][2] += r['packets']
        else:
            merged.append([r['from'], r['to'], r['packets']])
    touch = [h for h in merged if h[0] <= resume + MARGIN and
             h[1] >= stop - MARGIN]
    main = (touch[0][0], touch[-1][1] + 1.0 / rate) if touch else None
    others = [{'ms_after_resume': round((h[0] - resume) * 1000, 1),
               'ms': round((h[1] - h[0]) * 1000 + 1000.0 / rate, 1),
               'datagrams': h[2]}
              for h in merged if h not in touch]
    return main, others


def judge(report, window, rate, edges=None):
    """One stream through one migration, as a row: the pause, its main
    hole and what that added to the pause by send times (negative when
    frames queued for the resuming guest shortened it), other holes,
    datagrams lost outside the pause, duplicates, whether the probe
    measured the pause, and the capture figures (`delivery_edges`) if
    given. window: (stop, source, resume, destination)."""
    stop, _src, resume, _dst = window
    main, others = holes(report, stop, resume, rate)
    lw = main[1] - main[0] if main else 0.0
    check = probe_check(report, stop, resume, rate)
    return {'pause_ms': round((resume - stop) * 1000, 2),
            'lost': report['lost'],
            # The main hole by send times, in ms from STOP.
            'main_hole_ms_from_stop': None if main is None else [
                round((main[0] - stop) * 1000, 1),
                round((main[1] - stop) * 1000, 1)],
            'lost_window_ms': round(lw * 1000, 2),
            'added_ms': round((lw - (resume - stop)) * 1000, 2)
            if check['probed'] else None,
            'other_holes': others,
            'second_hole': any(h['ms_after_resume'] > 0 for h in others),
            'lost_outside_pause': lost_outside(report, stop, resume),
            'duplicates': report['duplicates'],
            'probed': check['probed'], 'unprobed_why': check['why'],
            'stop_gap_ms': check['stop_gap_ms'],
            'resume_gap_ms': check['resume_gap_ms'],
            'first_held_echo_ms': first_held_echo(report, stop, resume),
            'capture': edges or {}}


def first_held_echo(report, stop, resume):
    """ms from RESUME to the first echo of a datagram sent while the
    guest was paused (it was held somewhere and reached the guest once it
    ran: the network's delivery plus the guest's answer and its way
    back), or None if none sent then came back."""
    sent = report.get('sent_times') or []
    ts = [t for q, t in report.get('late_echoes') or []
          if q < len(sent) and stop <= sent[q] <= resume]
    return round((min(ts) - resume) * 1000, 2) if ts else None


def _pct(values, p):
    """Nearest-rank percentile (what a reader can check by counting)."""
    v = sorted(values)
    return v[max(0, -(-len(v) * p // 100) - 1)] if v else None


def dist(values):
    v = [x for x in values if x is not None]
    return {'n': len(v), 'p50': _pct(v, 50), 'p90': _pct(v, 90),
            'max': max(v) if v else None}


def split_added(row):
    """(ms lost before STOP, ms lost after RESUME) of a probed row's main
    hole, or None: what a stalled source (before) and the switch-over
    (after) each added. Their sum is `added_ms` when both are positive."""
    hole = row.get('main_hole_ms_from_stop')
    if not row.get('probed') or hole is None:
        return None
    return (round(max(0.0, -hole[0]), 2),
            round(max(0.0, hole[1] - row['pause_ms']), 2))


def summarise(rows):
    """Figures over many migrations of one system: only probed runs count
    towards the outage distributions; unprobed ones are listed with why."""
    probed = [r for r in rows if r['probed']]
    splits = [x for x in map(split_added, probed) if x]
    return {
        'migrations': len(rows), 'probed': len(probed),
        'unprobed': [{'run': r.get('run', i + 1), 'why': r['unprobed_why']}
                     for i, r in enumerate(rows) if not r['probed']],
        'pause_ms': dist([r['pause_ms'] for r in rows]),
        'added_ms': dist([r['added_ms'] for r in probed]),
        'added_before_stop_ms': dist([b for b, _a in splits]),
        'added_after_resume_ms': dist([a for _b, a in splits]),
        'capture_network_ms': dist([r['capture'].get('network_ms')
                                     for r in rows]),
        'first_frame_to_delivery_ms': dist([
            r['capture'].get('first_frame_to_delivery_ms') for r in rows]),
        'first_into_dest_ms': dist([r['capture'].get('first_into_dest_ms')
                                    for r in rows]),
        'dropped_after_frame_ms': dist([
            r['capture'].get('dropped_after_frame_ms') for r in rows]),
        'first_held_echo_ms': dist([r.get('first_held_echo_ms')
                                    for r in rows]),
        'switch_latency_ms': dist([
            r['capture'].get('switch_latency_ms') for r in rows]),
        'duplicates': sum(r['duplicates'] for r in rows),
        'lost_outside_pause': sum(r['lost_outside_pause'] for r in rows),
        'second_holes': sum(1 for r in rows if r.get('second_hole')),
    }


def source_switch(grams, guest_ip, src_host, src_taps, stop, before=0.02):
    """Datagrams toward the guest that reached the source host's underlay
    (as tunnel frames) in the `before` s up to STOP: how long its switch
    took to hand each to the guest's tap, and how many it handed over only
    after STOP (they died with the paused guest) or never. Shows whether
    losses just before STOP are queueing in that userspace switch."""
    arrived, into = {}, {}
    for g in grams:
        if g.dst != guest_ip or len(g.payload) < 8:
            continue
        seq = g.payload[:8]
        if g.key is not None and g.host == src_host and not g.outgoing:
            arrived.setdefault(seq, g.time)
        elif g.outgoing and (g.host, g.iface) in src_taps:
            into.setdefault(seq, g.time)
    late = [s for s, t in arrived.items() if stop - before <= t <= stop]
    waits = [into[s] - arrived[s] for s in late if s in into]
    return {'arrived': len(late),
            'handed_over_after_stop': sum(1 for s in late
                                          if s in into and into[s] > stop),
            'never_handed_over': sum(1 for s in late if s not in into),
            'max_wait_ms': round(max(waits) * 1000, 2) if waits else None}
