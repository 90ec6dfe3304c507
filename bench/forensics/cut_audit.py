"""Which side of the held-frames cut each lost datagram fell on.

With held frames (the default) a datagram towards a moving guest is
delivered on its source, or held in the destination's ring and released
there. The source's `vw-frame-hold` names the cut: the digests of the last
frames the guest read on its source (its `cut` answer, in the source
host's frame-hold.log); the ring delivers what follows them. A datagram
that is lost all the same died in one of three places, told apart here
from the captures and that log alone (no product change, no extra
logging in the data path):

- 'read on the source': its frame is at or before the cut's last digest
  in the source tap's order: the source counted it as read by QEMU, so
  the ring rightly did not deliver it, and the guest never answered it.
  QEMU took it and it died there (QEMU 7.2 queues a frame its guest
  cannot take and drops that queue with the source process).
- 'after the cut, released': delivered on the destination (the ring
  sent it back into `vw-hold`, or it was handed to the guest's tap
  there: the ring writes a release naming the port straight to it), and
  the guest never answered: lost past the ring.
- 'after the cut, not released': handed to the source after the last
  read frame, yet never delivered on the destination: the ring's part.
- 'not on the source tap': never handed to the source's tap.

Pure: SLL2 capture records, digests and the cut answers in; verdicts out.
The digest is the product's own (`core.held_frames.digest`) over the frame
rebuilt from the capture: SLL2 keeps the source MAC and EtherType, and the
destination is the guest NIC's MAC.
"""
import json
import struct
from collections import Counter
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from virtualwire.core.held_frames import digest
from vwlab.capture import PACKET_OUTGOING, SLL2

VLAN_TPIDS = (0x8100, 0x88A8)


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(':', ''))


def rebuilt(raw: bytes, dst_mac: bytes) -> Optional[Tuple[int, bool, bytes]]:
    """(ifindex, outgoing, the untagged Ethernet frame) of one SLL2
    record, its destination MAC `dst_mac`; None for a short record."""
    if len(raw) < SLL2.size:
        return None
    proto, _r, ifindex, _h, pkttype, _alen, addr = SLL2.unpack_from(raw)
    body = raw[SLL2.size:]
    if proto in VLAN_TPIDS and len(body) >= 4:      # the slot's tag
        proto, body = struct.unpack('!H', body[2:4])[0], body[4:]
    frame = dst_mac + addr[:6] + struct.pack('!H', proto) + body
    return ifindex, pkttype == PACKET_OUTGOING, frame


def echo_seq(frame: bytes, guest_ip: bytes, port: int) -> Optional[int]:
    """The probe's sequence number of a UDP datagram to guest_ip:port in
    an Ethernet frame, else None."""
    if len(frame) < 14 + 20 + 8 + 8 or frame[12:14] != b'\x08\x00':
        return None
    ip = frame[14:]
    ihl = (ip[0] & 0x0F) * 4
    if ip[9] != 17 or ip[16:20] != guest_ip or len(ip) < ihl + 16:
        return None
    dport = struct.unpack('!H', ip[ihl + 2:ihl + 4])[0]
    if dport != port:
        return None
    return int.from_bytes(ip[ihl + 8:ihl + 16], 'big')


def stream_order(records: Iterable[Tuple[float, bytes]], ifindexes,
                 dst_mac: bytes, guest_ip: bytes, port: int,
                 outgoing: bool) -> List[Tuple[float, int, bytes]]:
    """[(time, seq, digest)] of the probe's datagrams crossing any of
    `ifindexes` in the direction given, in capture order."""
    out = []
    for t, raw in records:
        got = rebuilt(raw, dst_mac)
        if got is None or got[0] not in ifindexes or got[1] != outgoing:
            continue
        q = echo_seq(got[2], guest_ip, port)
        if q is not None:
            out.append((t, q, digest(got[2])))
    return out


def cut_answers(log_text: str) -> List[dict]:
    """Every `cut` answer a vw-frame-hold log holds, in order."""
    out = []
    for line in log_text.splitlines():
        at = line.find('answer: ')
        if at < 0:
            continue
        try:
            doc = json.loads(line[at + len('answer: '):])
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get('op') == 'cut':
            out.append(doc)
    return out


def cut_of(answers: Sequence[dict], handed: Sequence[Tuple[float, int, bytes]]
           ) -> Optional[dict]:
    """The cut answer whose named run is in this stream's source frames
    (a guest's NICs each have their own slot and cut)."""
    mine = {d.hex() for _t, _q, d in handed}
    best, score = None, 0
    for a in answers:
        after = (a.get('fields') or {}).get('after') or []
        n = sum(1 for h in after if h in mine)
        if n > score:
            best, score = a, n
    return best


def place(lost: Iterable[int], handed: Sequence[Tuple[float, int, bytes]],
          cut: Optional[dict], released: Iterable[int]) -> Dict[int, str]:
    """{seq: verdict} for lost datagrams: `handed` the source tap's frames
    in order, `cut` the source's cut answer, `released` the seqs
    delivered on the destination (into vw-hold, or to the guest's tap)."""
    released = set(released)
    after = ((cut or {}).get('fields') or {}).get('after') or []
    last = None
    if after:
        at = [i for i, (_t, _q, d) in enumerate(handed)
              if d.hex() == after[-1]]
        last = at[-1] if at else None
    index = {q: i for i, (_t, q, _d) in enumerate(handed)}
    out = {}
    for q in lost:
        if q not in index:
            out[q] = 'not on the source tap'
        elif last is None:
            out[q] = 'no cut placed'
        elif index[q] <= last:
            out[q] = 'read on the source'
        elif q in released:
            out[q] = 'after the cut, released'
        else:
            out[q] = 'after the cut, not released'
    return out


def summary(verdicts: Dict[int, str]) -> Dict[str, int]:
    return dict(Counter(verdicts.values()))


def records(path: str) -> List[Tuple[float, bytes]]:
    """(time, raw SLL2 record) of every frame in a capture file."""
    from scapy.utils import RawPcapReader
    out = []
    with RawPcapReader(path) as pcap:
        for raw, meta in pcap:
            out.append((meta.sec + meta.usec / 1e6, raw))
    return out
