"""Reading an ovs-vswitchd log file: each line's time, module, level and
text, and the datapath flow changes dpif_netdev logs at debug level."""
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
