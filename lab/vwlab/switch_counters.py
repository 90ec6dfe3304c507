"""What a userspace switch counted as dropped or failed during a window:
OVS's coverage counters (`coverage/show`: rconn_overflow is a packet-in
dropped because the controller's queue was full, datapath_drop_* frames
the datapath gave up on) and the datapath's own `miss with failed
upcall` (a frame that matched no datapath flow and could not be handed up
to be translated). A loss audit reads them to tell a frame our flows lost
from one the switch could not process; and each port's drop and error
statistics."""
import json
import re
from typing import Dict

_COVERAGE = re.compile(r'^(\S+)\s.*total: (\d+)$')
_PMD = re.compile(r'^\s+(miss with failed upcall|packets received): (\d+)$')
# Counters that say something was dropped or failed, not mere activity.
_WORTH = re.compile(r'drop|overflow|fail|error|lost|ukey_contention')
# ... but not this one: OVS 3.1's userspace datapath counts every frame a
# `userspace()` action hands up (a controller action's packet-in: the
# upcall returns EAGAIN, "consumed") as an error. It moved by 1,217-1,807
# on both hosts in every move of the held-frame probe (run4) whose frames
# all reached the controller: it counts packet-ins, not losses.
_ROUTINE = {'datapath_drop_userspace_action_error'}


def parse_coverage(text) -> Dict[str, int]:
    """{counter: total} from `ovs-appctl coverage/show`."""
    out = {}
    for line in text.splitlines():
        m = _COVERAGE.match(line.strip())
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def parse_pmd(text) -> Dict[str, int]:
    """{'miss with failed upcall': n, 'packets received': n} summed over
    the datapath's threads, from `ovs-appctl dpif-netdev/pmd-stats-show`."""
    out: Dict[str, int] = {}
    for line in text.splitlines():
        m = _PMD.match(line)
        if m:
            out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out


def parse_ports(doc) -> Dict[str, int]:
    """{'port NAME COUNTER': n} of each port's drop and error statistics,
    from `ovs-vsctl --format=json --columns=name,statistics list
    interface`. (`vw-hold`'s tx_dropped once counted every copy log's
    marker the kernel had handed our socket: host.hold_port.QUIETED.)"""
    out = {}
    for name, stats in doc['data']:
        for k, n in stats[1]:
            if 'drop' in k or 'error' in k:
                out['port %s %s' % (name, k)] = n
    return out


def snapshot(host) -> Dict[str, int]:
    out = parse_coverage(host.appctl('coverage/show'))
    out.update(parse_pmd(host.appctl('dpif-netdev/pmd-stats-show')))
    out.update(parse_ports(json.loads(host.vsctl(
        '--format=json', '--columns=name,statistics', 'list', 'interface'))))
    return out


def worth_reporting(before, after) -> Dict[str, int]:
    """The drop and failure counters that moved, by how much."""
    return {k: n - before.get(k, 0) for k, n in sorted(after.items())
            if _WORTH.search(k) and k not in _ROUTINE and
            n > before.get(k, 0)}


class SwitchCounters:
    """with SwitchCounters(hosts) as c: ...; c.moved() -> {host: {counter:
    increase}} of the drop and failure counters."""

    def __init__(self, hosts):
        self.hosts = list(hosts)
        self.before: Dict[str, Dict[str, int]] = {}
        self.after: Dict[str, Dict[str, int]] = {}

    def __enter__(self):
        self.before = {h.name: snapshot(h) for h in self.hosts}
        return self

    def __exit__(self, *exc):
        self.after = {h.name: snapshot(h) for h in self.hosts}

    def moved(self) -> Dict[str, Dict[str, int]]:
        return {h: worth_reporting(self.before[h], self.after[h])
                for h in self.after}
