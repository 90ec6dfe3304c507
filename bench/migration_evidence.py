"""What the migration benches read from the hosts and the controller
besides the probe and the captures: the guest's taps, when the source's
tap left its switch, what a second hole coincided with, when the
controller handled each vNIC's activation, and which side of the held
frames' cut each lost datagram fell on."""
import os
import re
import socket

from forensics import cut_audit
from vwlab import ovs_log
from vwlab.capture import ifindexes_of

def controller_log(lab):
    path = os.path.join(lab.dir, 'controller', 'controller.log')
    with open(path, errors='replace') as f:
        return f.read()


def tap_deleted_at(host, taps, since):
    """When the last of `taps` ((host, iface)) left host's switch (its
    vswitchd log)."""
    at = None
    for t, module, level, text in ovs_log.lines(host.vswitchd_log()):
        m = _DELETED.match(text)
        if m and module == 'bridge' and level == 'INFO' and t >= since and \
                (host.name, m.group(1)) in taps:
            at = t
    return at


_DELETED = re.compile(r'^bridge [^:]+: deleted interface (\S+) on port')


def hole_cause(hole, resume, races, gone):
    """What a loss after the main hole coincided with: a tunnel-race window
    on either host (within 10 ms: the echo's way back is later than its
    send time), and when the source's tap had left, relative to RESUME."""
    start = resume + hole['ms_after_resume'] / 1000.0
    end = start + hole['ms'] / 1000.0
    hit = sorted(h for h, ws in races.items()
                 if any(a - 0.010 <= end and start <= b + 0.010
                        for a, b in ws))
    return {'ms_after_resume': hole['ms_after_resume'],
            'tunnel_race_on': hit,
            'source_tap_left_ms_after_resume': (
                None if gone is None else round((gone - resume) * 1000, 1))}


def last_record(sysm):
    """The controller's record of the guest's last migration (ours only)."""
    if sysm.api is None:
        return {}
    recs = [m for m in sysm.api.call('GET', '/v1/migrations')['migrations']
            if set(m.get('vnics', ())) & {n for _v, _i, n in
                                          sysm.ends.values()}]
    return max(recs, key=lambda m: m.get('started_at') or 0) if recs else {}


def activated_at(sysm):
    """{vNIC: when the controller handled its activation} of the guest's
    last migration (ours only)."""
    return dict(last_record(sysm).get('activated') or {})


def nics_by_id(host, domain):
    """{interfaceid: (tap, MAC)} of a libvirt guest on host (from its live
    XML; MAC None if the XML names none)."""
    import xml.etree.ElementTree as ET
    root = ET.fromstring(host.libvirt.virsh('dumpxml', domain).stdout)
    out = {}
    for itf in root.findall('./devices/interface'):
        t, p = itf.find('target'), itf.find('virtualport/parameters')
        m = itf.find('mac')
        if t is not None and p is not None:
            out[p.get('interfaceid')] = (
                t.get('dev'), m.get('address') if m is not None else None)
    return out


def taps_by_nic(host, domain):
    """{interfaceid: tap} of a libvirt guest on host (from its live XML)."""
    return {i: tap for i, (tap, _mac) in nics_by_id(host, domain).items()}


def audit_cut(src, tap_mac, caps, dst, dst_tap, ip, report, stop, resume):
    """Each lost datagram sent near the pause, placed against the
    source's cut (forensics.cut_audit): [(seq, ms from STOP, verdict)].
    Delivered on the destination: sent back into its vw-hold (tagged) or
    handed to the guest's tap there (the ring writes a release naming the
    port straight to it, and later frames come the same way)."""
    lost = sorted((q, t) for q, t in report['lost_sent_at']
                  if stop - 0.1 <= t <= resume + 0.1)
    if not lost or tap_mac is None or tap_mac[1] is None:
        return []
    tap, mac = tap_mac
    scap = [c for c in caps.caps if c.host == src.name][0]
    dcap = [c for c in caps.caps if c.host == dst.name][0]
    guest = socket.inet_aton(ip)
    handed = cut_audit.stream_order(
        cut_audit.records(scap.path), ifindexes_of(scap, {tap}),
        cut_audit.mac_bytes(mac), guest, 7000, outgoing=True)
    released = [q for _t, q, _d in cut_audit.stream_order(
        cut_audit.records(dcap.path), ifindexes_of(
            dcap, {'vw-hold'} | ({dst_tap} if dst_tap else set())),
        cut_audit.mac_bytes(mac), guest, 7000, outgoing=True)]
    try:
        with open(os.path.join(src.dir, 'frame-hold.log')) as f:
            answers = [a for a in cut_audit.cut_answers(f.read())
                       if abs(((a.get('view') or {}).get('stopped_at') or 0)
                              - stop) < 5]
    except OSError:
        answers = []
    verdicts = cut_audit.place([q for q, _t in lost], handed,
                               cut_audit.cut_of(answers, handed), released)
    return [(q, round((t - stop) * 1000, 1), verdicts[q]) for q, t in lost]
