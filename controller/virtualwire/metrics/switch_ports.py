"""Per-port counters of provider switches (`core.switches`), as the
collectors read them with the wires' counters.

A switch's flows carry its own cookie mark ("VS", `ids.SWITCH_COOKIE_MARK`)
beside the wires' ("VW"). The two marks differ in one bit, so one masked
flow-stats request (`READ_MARK`, `READ_MASK`) returns both: a reading
costs no second request, and OVS walks its table once.

Per port: frames that entered the switch there and those of them flooded
(`pipeline.switch` counts each in a flow of its own), the MACs learned
there (one learned flow each) and, from the wire plugged into the port,
the frames the switch delivered out of it. The switch's counts are OVS's
own: they start again from zero when the switch moves to another host (a
Prometheus counter reset, which `rate()` takes in its stride).
"""
from typing import Dict, Iterable, Optional, Tuple

from virtualwire.core import ids

READ_MARK = ids.SWITCH_COOKIE_MARK
READ_MASK = ids.COOKIE_MARK_MASK & ~(ids.COOKIE_MARK ^ ids.SWITCH_COOKIE_MARK)
assert ids.COOKIE_MARK & READ_MASK == READ_MARK

# A port's counts: (entered, flooded, learned MACs)
Counts = Tuple[int, int, int]
HostCounts = Dict[int, Dict[int, Counts]]      # number -> port -> counts


def is_switch_flow(cookie) -> bool:
    return cookie & ids.COOKIE_MARK_MASK == ids.SWITCH_COOKIE_MARK


def split(body):
    """A reading's flow-stats entries in one pass: (the wires' entries,
    [(cookie, packets)] of the provider switches')."""
    wires, switches = [], []
    for st in body:
        if is_switch_flow(st.cookie):
            switches.append((st.cookie, st.packet_count))
        else:
            wires.append(st)
    return wires, switches


def host_counts(readings: Iterable[Tuple[int, int]]) -> HostCounts:
    """{switch number: {port index: Counts}} from [(cookie, packets)] of
    one host's flows (others' cookies are passed over)."""
    out: Dict[int, Dict[int, list]] = {}
    for cookie, packets in readings:
        if not is_switch_flow(cookie):
            continue
        k = cookie & 0xFFFF
        if k == 0:
            continue                   # the switch's, not a port's
        c = out.setdefault((cookie >> 16) & 0xFFFF, {}).setdefault(
            k, [0, 0, 0])
        roles = ids.roles_of_cookie(cookie)
        if roles & ids.SW_ENTERED:
            c[0] += packets
        if roles & ids.SW_FLOODED:
            c[1] += packets
        if roles & ids.SW_LEARNED:
            c[2] += 1
    return {n: {k: (c[0], c[1], c[2]) for k, c in ports.items()}
            for n, ports in out.items()}


class SwitchPorts:
    """Each host's switch counts as last read, and the generation each
    last changed in (what a collector's feed sends again)."""

    def __init__(self):
        self.hosts: Dict[str, HostCounts] = {}
        self.changed: Dict[str, int] = {}

    def take(self, host, readings, gen=0):
        counts = host_counts(readings)
        if counts != self.hosts.get(host, {}):
            self.hosts[host] = counts
            self.changed[host] = gen

    def of(self, host, number) -> Optional[Dict[int, Counts]]:
        """A switch's counts on `host`; None if that host was not read
        (`{}`: read, and no port of the switch has counted yet)."""
        h = self.hosts.get(host)
        return None if h is None else h.get(number, {})

    def feed(self, since=None) -> dict:
        """{host: {number: {port: [entered, flooded, macs]}}} of the hosts
        that changed after generation `since` (every host: None)."""
        return {h: {str(n): {str(k): list(c) for k, c in ports.items()}
                    for n, ports in counts.items()}
                for h, counts in self.hosts.items()
                if since is None or self.changed.get(h, 0) > since}

    def apply(self, feed: dict, full: bool):
        """A feed from a collector process (`feed`), into this mirror."""
        if full:
            self.hosts = {}
        for h, counts in feed.items():
            self.hosts[h] = {int(n): {int(k): (c[0], c[1], c[2])
                                      for k, c in ports.items()}
                             for n, ports in counts.items()}


def port_counters(view, counts: Optional[Dict[int, Counts]],
                  sent_by) -> None:
    """Into each port of a switch's view (`provider_switches.view`): its
    `counters` (None when its host has not been read).
    `sent_by(cid, end)`: frames wire `cid` took in at `end` (the
    collector's), None if not known."""
    for p in view['ports']:
        if counts is None:
            p['counters'] = None
            continue
        entered, flooded, macs = counts.get(p['index'], (0, 0, 0))
        p['counters'] = {'entered_packets': entered,
                         'delivered_packets': 0 if p['wire'] is None
                         else sent_by(p['wire'], p['end']),
                         'flooded_packets': flooded,
                         'learned_macs': macs}
