"""vw-frame-hold: a hypervisor's rings of frames towards guests that are
migrating in (`host.hold_ring`), on the switch's internal port
`vw-hold` (vw-host-setup --hold-frames makes it).

Its own process, apart from vw-host-agent: it needs packet sockets
(CAP_NET_RAW) and no credential at all, where the agent needs libvirt
and the host's token. It takes orders from nothing but the switch: the
controller's messages come as packet-outs through the switch's
authenticated OpenFlow session, and the answers go back as packet-ins
the same way. What it releases it writes to the guest's port the
release names (a guest's frames reach it only tagged, so never as a
message).
"""
import argparse
import ctypes
import errno
import json
import logging
import select
import socket
import struct
import time
from typing import Optional, Tuple

from virtualwire import version
from virtualwire.host.copy_log import MAX_AGE as LOG_MAX_AGE
from virtualwire.host.copy_log import (CopyLogs, is_log_message,
                                       mark_frame, mark_of)
from virtualwire.host.guest_facts import tap_stat
from virtualwire.host.hold_ring import (ANSWER_SLOT, DEFAULT_BYTES,
                                        BEAT_LOST, DEFAULT_FRAMES, ETHERTYPE,
                                        MAX_AGE, MAX_SLOTS, ORPHAN_AFTER,
                                        HoldRings)
from virtualwire.pipeline.host_hold import (COPY_PCP, MARK_SLOT, RUNS_PCP,
                                            message_frame)

LOG = logging.getLogger('vw-frame-hold')
PORT = 'vw-hold'
ETH_P_ALL = 0x0003
ETH_P_8021AD = 0x88A8
SOL_PACKET = 263
PACKET_AUXDATA = 8
PACKET_STATISTICS = 6
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
# What a socket bound to a port that went says (ENETDOWN once, then ENXIO
# or ENODEV on a write).
PORT_GONE = (errno.ENETDOWN, errno.ENXIO, errno.ENODEV)
RCVBUF = 4 << 20    # a pause's frames at line rate wait here for the ring
_AUX = struct.Struct('IIIHHHH')
SO_ATTACH_FILTER = 26
# Inner EtherTypes of tagged frames the port is handed that the kernel has
# no handler for: our markers and messages, and guests' own tagged frames.
# Once the outer tag is off, the kernel counts such a frame as dropped on
# the port (its rx, OVS's tx_dropped) although our socket read it: every
# marker did (measured: tx_dropped = the copy logs' samples, 1,000-4,000 a
# move). A socket for each that takes nothing is that handler.
QUIETED = (ETHERTYPE, 0x8100, ETH_P_8021AD)
_TAKE_NOTHING = struct.pack('HBBI', 0x06, 0, 0, 0)    # BPF: ret #0


def classify(data: bytes, status: int = 0, tci: int = 0, tpid: int = 0
             ) -> Optional[Tuple[str, Optional[int], bytes]]:
    """What a frame read from `vw-hold` is: ('frame', slot, the frame
    as the guest will get it), ('runs', slot, b''): the slot's guest sent
    a frame here, ('copy', slot, frame): a frame the slot's source tap was
    handed, ('mark', None, number): a copy log's marker back,
    ('message', None, payload), or None (not ours: the
    port's own traffic). The kernel takes the outer tag off
    into the packet's metadata (status, tci, tpid: PACKET_AUXDATA); one
    left in the bytes is read there."""
    if status & TP_STATUS_VLAN_VALID:
        if status & TP_STATUS_VLAN_TPID_VALID and tpid == ETH_P_8021AD:
            return _tagged(tci, data)
        return None
    if len(data) < 14:
        return None
    kind = struct.unpack('!H', data[12:14])[0]
    if kind == ETH_P_8021AD and len(data) >= 18:
        tci = struct.unpack('!H', data[14:16])[0]
        return _tagged(tci, data[:12] + data[16:])
    if kind == ETHERTYPE:
        return 'message', None, data[14:]
    return None


def _tagged(tci: int, frame: bytes):
    if tci & 0xFFF == MARK_SLOT:
        mark = mark_of(frame)
        return ('mark', None, mark) if mark is not None else None
    # Priority RUNS_PCP: a copy of the guest's own frame (it runs here).
    if tci >> 13 == RUNS_PCP:
        return 'runs', tci & 0xFFF, b''
    if tci >> 13 == COPY_PCP:
        return 'copy', tci & 0xFFF, frame
    return 'frame', tci & 0xFFF, frame


def quieting_sockets(ifname: str) -> list:
    """One packet socket per QUIETED EtherType on `ifname`, each with a
    filter that takes nothing: the kernel hands them the frames it would
    otherwise count as dropped, and they cost a filter run each."""
    prog = ctypes.create_string_buffer(_TAKE_NOTHING)
    fprog = struct.pack('HL', 1, ctypes.addressof(prog))
    out = []
    try:
        for kind in QUIETED:
            q = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                              socket.htons(kind))
            out.append(q)
            q.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
            q.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
            q.bind((ifname, kind))
    except OSError:
        for q in out:
            q.close()
        raise
    return out


def tagged(slot: int, frame: bytes) -> bytes:
    return frame[:12] + struct.pack('!HH', ETH_P_8021AD, slot) + frame[12:]


class HoldPort:
    """The packet socket on `vw-hold`; frames in, frames out."""

    def __init__(self, ifname=PORT):
        self.ifname = ifname
        try:
            self.sock = self._bound()
        except OSError as e:
            raise SystemExit('vw-frame-hold: cannot open port %s (%s): '
                             'does the bridge have it?'
                             % (ifname, e.strerror or e)) from None
        # Frames for a guest's port go straight to it, saving them a trip
        # back through the switch. (Written first against a reordering at
        # the switch-over; its cause was the switch's learn, now off where
        # a ring holds: pipeline.wire.)
        self.out = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.out.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, RCVBUF)

    def _bound(self):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                          socket.htons(ETH_P_ALL))
        try:
            s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
            s.bind((self.ifname, 0))
            self.quiet = quieting_sockets(self.ifname)
        except OSError:
            s.close()
            raise
        return s

    def close_bound(self):
        for q in [self.sock] + getattr(self, 'quiet', []):
            q.close()

    def reopen(self, every=0.2, sleep=time.sleep):
        """The port was deleted (a del-port, vw-host-setup
        --no-hold-frames) and a socket bound to it is dead for good: the
        port made again is a new device (a new ifindex). Bound again once
        it is back; what the rings held went with the old one.
        ovs-vswitchd's own restart keeps the device (measured), so that
        does not come here."""
        self.close_bound()
        LOG.warning('port %s went: waiting for it to come back',
                    self.ifname)
        while True:
            try:
                self.sock = self._bound()
            except OSError:
                sleep(every)
                continue
            LOG.info('port %s back: holding frames on it again', self.ifname)
            return

    def recv(self):
        data, anc, _flags, addr = self.sock.recvmsg(65535, 64)
        if addr[2] == socket.PACKET_OUTGOING:
            return None             # ours, written a moment ago
        status = tci = tpid = 0
        for level, kind, raw in anc:
            if level == SOL_PACKET and kind == PACKET_AUXDATA and \
                    len(raw) >= _AUX.size:
                status, _len, _snap, _mac, _net, tci, tpid = \
                    _AUX.unpack(raw[:_AUX.size])
        return classify(data, status, tci, tpid)

    def dropped(self) -> int:
        """Frames the socket dropped since last asked (its queue full)."""
        raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        return struct.unpack('II', raw)[1]

    def pending(self) -> bool:
        return bool(select.select([self.sock], [], [], 0)[0])

    @staticmethod
    def tap_counts(tap, sysfs='/sys/class/net'):
        """(reads, dropped) of a tap: its kernel transmit counts (frames
        its QEMU took; frames dropped with its queue full), None if gone."""
        reads = tap_stat(tap, 'tx_packets', sysfs)
        dropped = tap_stat(tap, 'tx_dropped', sysfs)
        return None if reads is None or dropped is None else (reads, dropped)

    @staticmethod
    def tap_reads(tap, sysfs='/sys/class/net'):
        """A tap's transmit count alone (frames its QEMU took), None if
        it is gone: the cheaper reading that times the count at STOP."""
        return tap_stat(tap, 'tx_packets', sysfs)

    def send_mark(self, frame: bytes) -> None:
        """A copy log's marker, to the switch (which hands it back)."""
        self.sock.send(tagged(MARK_SLOT, frame))

    def send(self, target, data):
        if isinstance(target, str):
            try:
                self.out.sendto(data, (target, 0))
            except OSError as e:        # the port went (its guest quit)
                LOG.warning('port %s: %s', target, e.strerror or e)
            return
        self.sock.send(tagged(target, data) if target is not None
                       else tagged(ANSWER_SLOT, message_frame(data)))


def serve(port, rings, clock=time.monotonic, tick=1.0, stop=None,
          logs=None):
    """Until stop() says so: each frame and message through the rings
    (copies through the copy logs), what they return sent, rings expired
    every `tick` seconds."""
    logs = logs if logs is not None else CopyLogs()
    last = clock()
    while stop is None or not stop():
        due = rings.next_deadline()
        soon = [t for t in (due, logs.settle_due()) if t is not None]
        wait = tick if not soon else max(0.0, min(tick, min(soon) - clock()))
        try:
            _once(port, rings, logs, due, wait, clock)
        except OSError as e:
            if e.errno not in PORT_GONE:
                raise
            port.reopen()
        now = clock()
        for slot in rings.orphaned_now:
            LOG.warning('slot %d: its guest runs here and no release came '
                        '(its controller silent for %.1f s, or %.1f s since '
                        'the guest ran: away?): passing frames on, the held '
                        'ones dropped', slot, BEAT_LOST, ORPHAN_AFTER)
        rings.orphaned_now.clear()
        if now - last >= tick:
            last = now
            for slot in rings.expire(now):
                LOG.info('slot %d dropped (never released, or idle)', slot)
            for slot in logs.expire(now):
                LOG.info('copy log %d dropped (never closed)', slot)


def _once(port, rings, logs, due, wait, clock):
    """One turn: at most one frame or message read and acted on, what
    is due settled or ticked, what that returns sent."""
    ready, _, _ = select.select([port.sock], [], [], wait)
    now = clock()
    out = []
    if ready:
        got = port.recv()
        if got is not None and got[0] == 'mark':
            _count_drops(port, logs)
            logs.marked(got[2])
        elif got is not None:
            out = _handle(port, rings, logs, got, now)
    settle = logs.settle_due()
    if settle is not None and now >= settle and not port.pending():
        _count_drops(port, logs)
        logs.settle(now)
    if due is not None and now >= due:
        out += rings.tick(now)
    for s, d in out:
        port.send(s, d)
        if s is None:
            LOG.info('answer: %s', d.decode())


def _count_drops(port, logs):
    """Before a reading is set against the copies: any the socket dropped
    (its queue full) are counted against every open log."""
    lost = port.dropped()
    if lost:
        LOG.warning('vw-hold: %d frames dropped by the socket '
                    '(copy logs open: %d)', lost, len(logs.logs))
        logs.socket_dropped(lost)


def _handle(port, rings, logs, got, now):
    """What to send for one frame read from the port."""
    kind, slot, data = got
    if kind == 'frame':
        return rings.frame(slot, data, now)
    if kind == 'runs':
        rings.runs(slot, now)
        return []
    if kind == 'copy':
        logs.copy(slot, data, now)
        tap = logs.wants_sample(slot, now)
        # The wall clock before the read: a reading stamped after QEMU's
        # STOP was taken after it (host.copy_log, the count at STOP).
        wall = time.time()
        counts = port.tap_counts(tap) if tap else None
        if counts is not None:
            mark = logs.sample(slot, counts[0], counts[1], now, wall)
            port.send_mark(mark_frame(mark))
            return []
        tap = logs.wants_stop_read(slot, now)
        reads = port.tap_reads(tap) if tap else None
        if reads is not None:
            logs.stop_read(slot, reads, now, wall)
        return []
    try:
        doc = json.loads(data.rstrip(b'\0').decode())
    except (UnicodeDecodeError, ValueError):
        doc = None
    if is_log_message(doc):
        return [(None, logs.message(doc, now, port.tap_counts))]
    return rings.message(data, now)


def main(argv=None):
    p = argparse.ArgumentParser(prog='vw-frame-hold',
                                description=__doc__.split('\n\n')[0])
    version.add_argument(p)
    p.add_argument('--port', default=PORT,
                   help='the switch\'s internal port (default: %(default)s)')
    p.add_argument('--max-slots', type=int, default=MAX_SLOTS,
                   help='moving vNICs held at once (default: %(default)s)')
    p.add_argument('--max-frames', type=int, default=DEFAULT_FRAMES,
                   help='frames held per vNIC (default: %(default)s)')
    p.add_argument('--max-bytes', type=int, default=DEFAULT_BYTES,
                   help='bytes held per vNIC (default: %(default)s)')
    p.add_argument('--max-age', type=float, default=MAX_AGE,
                   help='seconds a ring waits for its release after its '
                   'controller\'s last beat (default: %(default)s)')
    p.add_argument('--log-max-age', type=float, default=LOG_MAX_AGE,
                   help='seconds a copy log lasts after its controller '
                   'last named its tap (default: %(default)s)')
    args = p.parse_args(argv)
    for name in ('max_slots', 'max_frames', 'max_bytes', 'max_age',
                 'log_max_age'):
        if getattr(args, name) < 1:
            p.error('--%s must be at least 1' % name.replace('_', '-'))
    logging.basicConfig(level=logging.INFO,
                        format='%(asctime)s %(name)s %(levelname)s '
                               '%(message)s')
    port = HoldPort(args.port)
    LOG.info('holding frames on %s', args.port)
    serve(port, HoldRings(args.max_slots, args.max_frames, args.max_bytes,
                          max_age=args.max_age),
          logs=CopyLogs(max_age=args.log_max_age))


if __name__ == '__main__':
    main()
