"""What the switches and the controller did around a loss.

A second hole in a migration bench (loss after the main one) is matched to
the OVS tunnel race by its datapath flow log (loss_audit.ovs_glitches).
That match says *that* tunnel flows lost their tunnel action, not *what*
made the switch re-translate them then: a link event, or the controller's
own bundle. This reads both logs for a window around the hole, so the row
carries the evidence.

Pure: log texts in, [(ms after a reference time, short text)] out.
"""
import re
import time

from vwlab import ovs_log

# logging's default asctime: local time, milliseconds after a comma.
_CTL = re.compile(r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) \w+ \S+: (.*)$')
# The controller's lines worth a place: its bundles and activations.
_CTL_KEEP = re.compile(r'^host \S+: [+]\d+ ~\d+ -\d+ flows|activated on')


def _short(actions, width=60):
    actions = actions.strip()
    return actions if len(actions) <= width else actions[:width - 3] + '...'


def vswitchd_events(log_text, start, end, ref):
    """A vswitchd log's datapath flow changes (old -> new actions) and
    bridge/route/interface messages within [start, end] (Unix seconds), as
    [(ms after ref, text)]."""
    out = []
    for t, module, level, text in ovs_log.lines(log_text):
        if not start <= t <= end:
            continue
        change = ovs_log.flow_change(module, level, text)
        if change:
            text = 'flow_mod %s -> %s' % (_short(change[0]),
                                          _short(change[1]))
        elif not module.startswith(('bridge', 'route', 'netdev', 'tnl')):
            continue
        out.append((round((t - ref) * 1000, 1), '%s: %s' % (module, text)))
    return out


def controller_events(log_text, start, end, ref):
    """The controller log's bundles ('host X: +a ~b -c flows') and
    activations within [start, end], as [(ms after ref, text)]. Its
    timestamps are local time, as logging writes them."""
    out = []
    for line in log_text.splitlines():
        m = _CTL.match(line)
        if not m or not _CTL_KEEP.search(m.group(3)):
            continue
        t = time.mktime(time.strptime(m.group(1), '%Y-%m-%d %H:%M:%S')) \
            + int(m.group(2)) / 1e3
        if start <= t <= end:
            out.append((round((t - ref) * 1000, 1), m.group(3)))
    return out


def around(hole_start, hole_end, ref, logs, controller_log=None,
           margin=0.030, limit=40):
    """{host: vswitchd events, 'controller': its events} within `margin`
    of the hole; `logs`: {host: vswitchd log text}. Each list keeps its
    first `limit` entries (the flow log can be long)."""
    start, end = hole_start - margin, hole_end + margin
    ctx = {h: vswitchd_events(text, start, end, ref)[:limit]
           for h, text in logs.items()}
    if controller_log is not None:
        ctx['controller'] = controller_events(controller_log, start, end,
                                              ref)[:limit]
    return ctx
