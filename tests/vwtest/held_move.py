"""A live migration under a 1 kHz echo stream with held frames, as the
held-frame test and bench/probe_held_frames.py both do it: the probe's
report, the controller's record of what it held, STOP and RESUME, and
which losses OVS's own userspace tunnel race explains."""
import time

from vwtest import wait_until
from vwtest.migration import probe_report
from vwlab import guest_crash, ovs_log
from vwlab.overruns import Overruns
from vwlab.qemu_events import EventWatch, stop_resume_windows
from vwlab.switch_counters import SwitchCounters

# A datagram lost within this of an OVS tunnel race on the destination
# (ovs_log.ovs_glitches: a datapath flow briefly re-translated without
# its tunnel action) never reached the destination's switch as ours.
RACE_SLACK_S = 0.02


def brief(r, held, stop, resume, g):
    """What a failed assertion shows: the figures, times from STOP."""
    return {'held': held, 'pause_ms': round((resume - stop) * 1e3, 1),
            'report': {k: r[k] for k in ('sent', 'echoed', 'lost',
                                         'lost_on_the_way_in', 'duplicates',
                                         'reordered')},
            'lost_ms_from_stop': [round((t - stop) * 1e3, 1)
                                  for _q, t in r['lost_sent_at']][:20],
            'reordered_ms_from_stop': [round((t - stop) * 1e3, 1) for _q, t
                                       in r['reordered_sent_at']],
            'console_broken': guest_crash.crash_lines(g.console_text())}


def held_record(api, guest_name, since):
    ms = [m for m in api.ok('GET', '/v1/migrations')['migrations']
          if m['vm'] == guest_name and m['held'] and
          m['started_at'] >= since]
    return max(ms, key=lambda m: m['started_at']) if ms else None


def move(lab, api, g, far, ip, src, dst, size):
    """Migrate g src -> dst under a 1 kHz echo stream of `size`-byte
    datagrams from `far`: (the probe's report, the migration record, STOP,
    RESUME); GuestCrashed if the guest's QEMU broke (TCG fault). The
    record gains `switches`: what both switches counted dropped (the
    kernel's overruns of their sockets, OVS's drop and failure counters),
    which tells a frame the switch lost from one our flows did."""
    watch = EventWatch([src, dst]).__enter__()
    overruns = Overruns([src, dst]).__enter__()
    counters = SwitchCounters([src, dst]).__enter__()
    stream = far.tool_bg('udp-echo', '--dst', ip, '--rate', 1000,
                         '--seconds', 60, '--size', size, realtime=True)
    since = time.time()
    try:
        time.sleep(1)
        lab.migrate(g, src, dst)
        time.sleep(2)
    finally:
        stream.send_signal(2)
    r = probe_report(stream)
    watch.__exit__(None, None, None)
    overruns.__exit__(None, None, None)
    counters.__exit__(None, None, None)
    broken = guest_crash.crash_lines(g.console_text())
    if broken:
        raise guest_crash.GuestCrashed('guest %s crashed: %s' % (
            g.name, broken[:2]))
    [(stop, _s, resume, _d)] = stop_resume_windows(watch.events, g.name)
    time.sleep(0.2)                    # a poll says the late ones
    m = wait_until(lambda: held_record(api, g.name, since), 10,
                   what='the move records its held frames')
    m = dict(m, switches={
        'overruns': {'%s %s' % k: n for k, n in overruns.counted().items()},
        'counters': counters.moved()})
    return r, m, stop, resume


def raced(lost, dst):
    """The lost datagrams [(seq, sent_at)] sent while the destination's
    switch was in an OVS tunnel race (its log must hold datapath flow
    changes: Host.log_datapath_flow_changes), and the race windows."""
    races = ovs_log.ovs_glitches(dst.vswitchd_log())
    hit = [(q, t) for q, t in lost if any(
        a - RACE_SLACK_S <= t <= b + RACE_SLACK_S for a, b in races)]
    return hit, races
