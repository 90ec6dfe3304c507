"""Reading an ovs-vswitchd log file: each line's time, module, level and
text, the datapath flow changes dpif_netdev logs at debug level, and the
windows in which OVS 3.1's userspace tunnel race (docs/benchmarks.rst)
had a host's tunnel datapath flows without their tunnel action."""
import calendar
import re
import time

_LINE = re.compile(r'^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z\|[^|]*\|'
                   r'([^|]+)\|(\w+)\|(.*)$')
_FLOW_MOD = re.compile(r'^flow_mod: .*old_actions:(.*), actions:(.*)$')


def lines(log_text):
    """(Unix time, module, level, text) of each line of a vswitchd log."""
    for line in log_text.splitlines():
        m = _LINE.match(line)
        if m:
            t = calendar.timegm(time.strptime(m.group(1),
                                              '%Y-%m-%dT%H:%M:%S')) \
                + int(m.group(2)) / 1e3
            yield t, m.group(3), m.group(4), m.group(5)


def flow_change(module, level, text):
    """(old actions, new actions) if the line is a revalidator's datapath
    flow change (dpif_netdev at debug level), else None."""
    if not module.startswith('dpif_netdev(revalidator') or level != 'DBG':
        return None
    m = _FLOW_MOD.match(text)
    return (m.group(1), m.group(2)) if m else None


FLIP_BACK = 0.100       # a legitimate rewire does not undo itself this fast


def _tunnelled(actions):
    return 'tnl_push(' in actions or 'tnl_pop(' in actions


def _tunnels(actions):
    return actions.count('tnl_push(') + actions.count('tnl_pop(')


def _undone_within(log_text, lost, regained):
    """[(start, end)], merged, during which a vswitchd (dpif_netdev debug
    log) re-translated datapath flows so that lost(old, new) held and then
    regained(old, new) within FLIP_BACK seconds."""
    lost_at, out = [], []
    for t, module, level, text in lines(log_text):
        change = flow_change(module, level, text)
        if change is None:
            continue
        old, new = change
        if lost(old, new):
            lost_at.append(t)
        elif regained(old, new):
            starts = [s for s in lost_at if t - s <= FLIP_BACK]
            if starts:
                out.append((min(starts), t))
            lost_at = [s for s in lost_at if s > t]
    merged = []
    for s, e in sorted(out):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return merged


def ovs_glitches(log_text):
    """[(start, end)] during which a vswitchd had re-translated tunnel
    datapath flows without their tunnel action and put it back within
    FLIP_BACK seconds."""
    return _undone_within(
        log_text, lambda o, n: _tunnelled(o) and not _tunnelled(n),
        lambda o, n: not _tunnelled(o) and _tunnelled(n))


def tunnel_dips(log_text):
    """[(start, end)] during which a vswitchd re-translated datapath flows
    with fewer tunnel outputs than before (a sister sending to both hosts
    of a moving vNIC briefly sending to one, or a tunnel flow to none) and
    had them back within FLIP_BACK: the general form of ovs_glitches."""
    return _undone_within(log_text,
                          lambda o, n: _tunnels(n) < _tunnels(o),
                          lambda o, n: _tunnels(n) > _tunnels(o))
