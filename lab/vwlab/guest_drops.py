"""Where a datagram towards a migrating guest can die after the network
handed it over: the destination tap's transmit queue (the host kernel
drops what the guest's QEMU does not read in time) and the guest's own
kernel (its UDP socket buffer, its NIC). A loss audit reads them to tell
such a loss from one on the way (bench_migration: datagrams lost on the
way in with no switch counter moved)."""
import json
from typing import Dict, Optional

from vwlab.shell import LabError, sh

# The guest kernel's counters that say it dropped a received datagram.
UDP_DROPS = ('RcvbufErrors', 'InErrors', 'NoPorts')


def tap_counters(host, tap) -> Optional[Dict[str, int]]:
    """The host kernel's counters of a tap, towards the guest ('tx': what
    it queued for QEMU) or None if the tap is gone."""
    try:
        out = sh(['ip', '-j', '-s', 'link', 'show', 'dev', tap], ns=host.ns)
    except LabError:
        return None
    [link] = json.loads(out)
    tx = link['stats64']['tx']
    return {'tx_packets': tx['packets'], 'tx_dropped': tx['dropped']}


def guest_counters(vm, guest_ip) -> Optional[dict]:
    """The guest's UDP and NIC counters, asked from `vm` over a wire (the
    lab guest's responder answers VWSTATS?); None without an answer."""
    try:
        return vm.tool('guest-stats', '--dst', guest_ip, timeout=15)
    except LabError:
        return None


def guest_drops(before, after) -> Optional[Dict[str, int]]:
    """What the guest's kernel dropped between two `guest_counters`."""
    if not before or not after:
        return None
    out = {k: after['udp'].get(k, 0) - before['udp'].get(k, 0)
           for k in UDP_DROPS}
    for nic, c in after['dev'].items():
        was = before['dev'].get(nic, {}).get('rx_dropped', 0)
        out['%s rx_dropped' % nic] = c['rx_dropped'] - was
    return {k: n for k, n in out.items() if n}
