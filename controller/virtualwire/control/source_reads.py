"""A moving vNIC's source tap counters, asked of its switch (a part of
control.holding, where the source keeps no copy log of its own): port
stats, with the controller's lag behind that switch measured on the way
(control.lag_guard)."""
from typing import Callable, Optional

from virtualwire.southbound import openflow

UNAVAILABLE = (1 << 64) - 1   # a port counter OVS cannot read

# done(reads, dropped, why, lag): reads None when there is no count.
Done = Callable[[Optional[int], Optional[int], str, float], None]


def ask(shared, lag, vnic, host, done: Done) -> None:
    """Ask `host` for the vNIC's tap counters. Why there is no count: 'no
    answer' (no port, no switch), or 'tap gone' (OVS still has the port
    but its device went, and reports every counter as all ones,
    OpenFlow's 'unavailable', as it does once the source QEMU quits and
    takes its tap along)."""
    port = shared.tables.placement.claims.get(vnic, {}).get(host)
    s = shared.session_of(host)
    if port is None or s is None or s.installed is None:
        done(None, None, 'no answer', 0.0)
        return
    asked = lag.asked(vnic, s)

    def answered(body):
        behind = lag.answered(vnic, asked)
        tap = next((p for p in body if p.port_no == port), None)
        if tap is None:
            done(None, None, 'no answer', behind)
        elif tap.tx_packets == UNAVAILABLE:
            done(None, None, 'tap gone', behind)
        else:
            done(int(tap.tx_packets), tap.tx_dropped
                 if tap.tx_dropped != UNAVAILABLE else None, 'answered',
                 behind)
    # Every port (not just this one): a port gone since would be an
    # error, and an error makes us dump the switch again.
    s.request(openflow.port_stats_request(), answered)
