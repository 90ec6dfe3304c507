"""Held frames on their way to a guest from the controller (a part of
control.holding): the released ones queued for the destination's next
bundle, and those reaching the destination after the guest runs there
('late'), sent behind them, never ahead; a late frame the guest read on
its source already is dropped (`core.held_frames.HeldFrames.late_read`).
"""
from typing import Dict, List, Tuple

from virtualwire.core.held_frames import HeldFrames
from virtualwire.southbound import openflow


class HeldDelivery:
    """Owns what is queued for each host and what each vNIC was given."""

    def __init__(self, shared):
        self.shared = shared
        self.stats = shared.stats
        # host -> [(ofport, frame)] to send before its next bundle
        self.releases: Dict[str, List[Tuple[int, bytes]]] = {}
        # vNIC -> (host, port) delivered
        self.released: Dict[str, Tuple[str, int]] = {}
        self.late: Dict[str, int] = {}   # vNIC -> frames delivered late
        # vNIC -> its released frames, while late ones may be some the
        # guest read already (core.held_frames.HeldFrames.late_read)
        self.filters: Dict[str, HeldFrames] = {}

    def queue(self, vnic, host, port, hf: HeldFrames, frames) -> None:
        """`frames` released to the vNIC's `port` on `host`."""
        if hf.read_after_ring or hf.late_skip:
            self.filters[vnic] = hf
        self.releases.setdefault(host, []).extend((port, f) for f in frames)
        self.released[vnic] = (host, port)

    def late_frame(self, vnic, host, port, frame) -> None:
        """A frame reaching the destination after the release."""
        f = self.filters.get(vnic)
        if f is not None and f.late_read(frame):
            self.stats['held_late_read'] += 1      # read on the source
            return
        self.stats['held_late'] += 1
        self.late[vnic] = self.late.get(vnic, 0) + 1
        if self.releases.get(host):
            # Behind the held frames not yet sent, never ahead of them.
            self.releases[host].append((port, frame))
            return
        s = self.shared.session_of(host)
        if s is not None:
            s.dp.send_msg(openflow.packet_out(port, frame))

    def report(self, moves, in_place) -> None:
        """Each poll: late counts to the records (once a poll, not per
        frame: each would be a write), and vNICs done with forgotten once
        their host confirmed the flows that need us no more."""
        for v, n in list(self.late.items()):
            m = self.shared.migrations.held_released(v, {'late': n},
                                                     update=True)
            self.shared.record(m)
            if v not in moves:
                del self.late[v]
        for v in list(self.released):
            if v not in moves and in_place(self.released[v][0]):
                del self.released[v]
                self.filters.pop(v, None)

    def busy(self) -> bool:
        return bool(self.late or self.released)

    def packet_outs_for(self, host) -> list:
        """The held frames to send `host` before its next bundle."""
        return [openflow.packet_out(port, f)
                for port, f in self.releases.pop(host, [])]
