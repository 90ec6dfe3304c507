"""Releases of frames held on destination hosts (a part of
control.holding): where a moving vNIC's destination keeps its frames
itself (`pipeline.host_hold`), its activation sends that host's ring one
message, made from the source's copies (`core.host_release`), and the
sync waits for the ring's answer (ANSWER_WAIT at most). Until the answer
the switch still sends the vNIC's frames to the ring, which passes them
on behind the released ones, written straight to the guest's port: the
flows that deliver directly go out after it (and the destination learns
no delivery of its own, `pipeline.wire`), so no frame overtakes a held
one.

Every message crosses the destination switch's authenticated OpenFlow
session (a packet-out into `vw-hold`); an answer is believed only from
that host's own session, for a release still awaited there.
"""
import json
import logging
import struct
from typing import Dict, Optional, Tuple

from virtualwire.control.migrations import DELIVERED, RELEASED
from virtualwire.core.held_frames import DEFAULT_FRAMES, HeldFrames
from virtualwire.core.host_release import release_doc
from virtualwire.core.model import Location
from virtualwire.pipeline import host_hold
from virtualwire.southbound import openflow

LOG = logging.getLogger(__name__)

# Longer than the ring waits for a run still on its way (host.hold_ring
# WAIT_FOR), so its answer, found or not, comes within it.
ANSWER_WAIT = 0.35
# Seconds between beats to a ring whose move we hold (a packet-out each):
# a fifth of host.hold_ring.BEAT_LOST, after which a ring whose guest runs
# takes us for gone and passes frames.
BEAT_EVERY = 0.1


def message_frame(doc: dict) -> bytes:
    return host_hold.message_frame(json.dumps(doc, sort_keys=True).encode())


def parse_answer(frame: bytes) -> Optional[dict]:
    """A ring's answer as the switch hands it to us (tag off), or None."""
    if len(frame) < 14 or struct.unpack('!H', frame[12:14])[0] != \
            host_hold.ETHERTYPE:
        return None
    try:
        doc = json.loads(frame[14:].rstrip(b'\0').decode())
    except (UnicodeDecodeError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def answer_from(tables, host, msg) -> Optional[dict]:
    """The JSON answer a packet-in carries from `host`'s `vw-hold` (its
    ring or copy log), or None: another port, or not an answer."""
    h = tables.hosts.get(host)
    if h is None or h.hold_port is None or \
            msg.match.get('in_port') != h.hold_port:
        return None
    return parse_answer(bytes(msg.data or b''))


def take_awaited(awaited: dict, host, doc: dict, what: str):
    """The entry {(host, slot): (vNIC, message id, ...)} this answer is
    to, removed; None (logged) if it answers nothing awaited."""
    key = (host, doc.get('slot'))
    got = awaited.get(key)
    if got is None or doc.get('id') != got[1]:
        LOG.warning('host %s: %s to nothing awaited: %s', host, what, doc)
        return None
    del awaited[key]
    return got


class HostRings:
    """Owns the releases sent to hosts' rings and not answered yet, and
    the slots still open on them."""

    def __init__(self, shared, ring_frames=DEFAULT_FRAMES):
        self.shared = shared
        self.session_of, self.clock = shared.session_of, shared.clock
        self.ring_frames = ring_frames
        # (host, slot) -> (vNIC, message id, when sent, the record's view)
        self.awaited: Dict[Tuple[str, int], Tuple[str, int, float, dict]] = {}
        self.open: Dict[str, Tuple[str, int]] = {}   # vNIC -> (host, slot)
        self.next_id = 1
        self.beaten: Dict[Tuple[str, int], float] = {}  # (host, slot) -> when
        self.no_beats: set = set()      # hosts whose rings predate beats

    @property
    def tables(self):
        return self.shared.tables

    def ring_of(self, vnic, host) -> Optional[Tuple[int, int]]:
        """(hold port, slot) if `host` keeps the vNIC's frames itself."""
        port = self.tables.placement.claims.get(vnic, {}).get(host)
        if port is None:
            return None
        return host_hold.held_on_host(self.tables.hosts, Location(host, port),
                                      self.tables.hold_on_hosts)

    def release(self, vnic, host, hf: HeldFrames, reads, why,
                cut=None) -> bool:
        """Tell `host`'s ring where the vNIC's guest stopped reading; False
        if it keeps no ring for it (the controller's own holds then).
        `cut`: (fields, view) the source's copy log made instead
        (control.source_logs)."""
        ring = self.ring_of(vnic, host)
        s = self.session_of(host)
        if ring is None or s is None:
            return False
        port, slot = ring
        fields, view = cut if cut is not None else \
            release_doc(hf, reads, self.ring_frames)
        # The guest's port there: the ring writes to it directly.
        vp = self.tables.hosts[host].vnic_map().get(vnic)
        if vp is not None and vp.port_name:
            fields['port'] = vp.port_name
        ident, self.next_id = self.next_id, self.next_id + 1
        s.dp.send_msg(openflow.packet_out(port, message_frame(dict(
            fields, op='release', slot=slot, id=ident))))
        view = {'copies': hf.n_copies, **view, 'held_on': 'host',
                'source_reads': why, 'absent': fields.get('absent')}
        self.awaited[(host, slot)] = (vnic, ident, self.clock(), view)
        self.open[vnic] = (host, slot)
        self.shared.record(self.shared.migrations.step(vnic, RELEASED))
        return True

    def beat(self, held) -> None:
        """Timer: tell each ring a vNIC of `held` ({vNIC: destination})
        waits in that we hold its move still, every BEAT_EVERY: it then
        passes frames soon after we are gone, not ORPHAN_AFTER after its
        guest ran (host.hold_ring.BEAT_LOST)."""
        now, keep = self.clock(), set()
        for vnic, host in held.items():
            ring = self.ring_of(vnic, host)
            s = self.session_of(host)
            if ring is None or s is None or host in self.no_beats:
                continue
            key = (host, ring[1])
            keep.add(key)
            if now - self.beaten.get(key, -BEAT_EVERY) >= BEAT_EVERY:
                self.beaten[key] = now
                s.dp.send_msg(openflow.packet_out(ring[0], message_frame(
                    {'op': 'beat', 'slot': ring[1]})))
        for key in set(self.beaten) - keep:
            del self.beaten[key]

    def answered(self, host, msg) -> bool:
        """Is this packet-in an answer from `host`'s ring? One to a release
        awaited there goes to the migration's record; any other (to a
        close; to nothing awaited: logged) changes nothing."""
        doc = answer_from(self.tables, host, msg)
        if doc is None:
            return False
        if doc.get('op') == 'closed':
            return True
        if doc.get('op') == 'error' and "'beat'" in str(doc.get('error')):
            # A vw-frame-hold older than beats (an upgrade in progress):
            # its rings keep ORPHAN_AFTER alone.
            if host not in self.no_beats:
                LOG.info('host %s: its vw-frame-hold takes no beats (%s)',
                         host, doc['error'])
            self.no_beats.add(host)
            return True
        got = take_awaited(self.awaited, host, doc, 'an answer from its ring')
        if got is None:
            return True
        vnic, _, sent, view = got
        self.shared.record(self.shared.migrations.step(vnic, DELIVERED))
        self._said(vnic, dict(
            view, ring_ms=round((self.clock() - sent) * 1e3, 1),
            **{k: doc[k] for k in ('delivered', 'held', 'evicted', 'found',
                                   'waited_ms', 'dropped', 'error')
               if k in doc}))
        return True

    def waiting(self) -> bool:
        """Is an answer still awaited? Those awaited past ANSWER_WAIT are
        given up, and the record says so (the ring may have acted or not:
        the switch's flows go on without it)."""
        now = self.clock()
        for key, (vnic, _, sent, view) in list(self.awaited.items()):
            if now - sent >= ANSWER_WAIT:
                del self.awaited[key]
                self._said(vnic, dict(view, ring_ms=None,
                                      error='no answer from the ring'))
        return bool(self.awaited)

    def _said(self, vnic, view):
        stats = self.shared.stats
        stats['held_delivered'] += view.get('delivered', 0)
        stats['held_evicted'] += view.get('evicted', 0)
        LOG.info('vNIC %s: its destination delivered held frames (%s)',
                 vnic, ', '.join('%s %s' % kv for kv in sorted(view.items())))
        self.shared.record(self.shared.migrations.held_released(vnic, view))

    def close_done(self, moving, in_place):
        """Close the slots of vNICs whose moves are over, once their host
        confirmed the flows that no longer use the ring."""
        for vnic, (host, slot) in list(self.open.items()):
            if vnic in moving or (host, slot) in self.awaited or \
                    not in_place(host):
                continue
            del self.open[vnic]
            ring = self.ring_of(vnic, host)
            s = self.session_of(host)
            if ring is not None and s is not None:
                ident, self.next_id = self.next_id, self.next_id + 1
                s.dp.send_msg(openflow.packet_out(ring[0], message_frame(
                    {'op': 'close', 'slot': slot, 'id': ident})))
