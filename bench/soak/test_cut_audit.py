"""The cut audit places each lost datagram against the held frames' cut:
read on the source, or after it (released by the ring or not)."""
import socket
import struct

from forensics.cut_audit import (cut_answers, cut_of, echo_seq, place,
                                 rebuilt, stream_order, summary)
from virtualwire.core.held_frames import digest

GUEST_MAC, PEER_MAC = '52:54:00:00:00:01', '52:54:00:00:00:02'
GUEST = socket.inet_aton('10.0.0.1')
PEER = socket.inet_aton('10.0.0.2')
TAP, HOLD = 7, 9


def ip_udp(q, dport=7000):
    payload = q.to_bytes(8, 'big') + bytes(8)
    udp = struct.pack('!HHHH', 40000, dport, 8 + len(payload), 0) + payload
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), q & 0xFFFF,
                     0, 64, 17, 0, PEER, GUEST)
    return ip + udp


def sll2(body, ifindex, outgoing=True, proto=0x0800):
    return struct.pack('!HHIHBB8s', proto, 0, ifindex, 1,
                       4 if outgoing else 0, 6,
                       bytes.fromhex(PEER_MAC.replace(':', '')) + bytes(2)
                       ) + body


def frame(q):
    return bytes.fromhex(GUEST_MAC.replace(':', '') +
                         PEER_MAC.replace(':', '')) + b'\x08\x00' + ip_udp(q)


def handed(seqs):
    recs = [(float(q), sll2(ip_udp(q), TAP)) for q in seqs]
    return stream_order(recs, {TAP}, bytes.fromhex(GUEST_MAC.replace(
        ':', '')), GUEST, 7000, outgoing=True)


def cut(last_read):
    return {'op': 'cut', 'fields': {'after': [
        digest(frame(q)).hex() for q in last_read]}}


def test_the_frame_is_rebuilt_as_the_product_digests_it():
    mac = bytes.fromhex(GUEST_MAC.replace(':', ''))
    _i, out, f = rebuilt(sll2(ip_udp(5), TAP), mac)
    assert out and f == frame(5) and echo_seq(f, GUEST, 7000) == 5
    # The ring's tagged release: the tag comes off.
    tagged = sll2(struct.pack('!HH', 3, 0x0800) + ip_udp(5), HOLD,
                  proto=0x88A8)
    assert rebuilt(tagged, mac)[2] == frame(5)
    assert echo_seq(frame(5), GUEST, 7001) is None
    assert echo_seq(frame(5), PEER, 7000) is None


def test_each_lost_datagram_gets_its_side_of_the_cut():
    h = handed(range(10))
    v = place([3, 6, 8, 12], h, cut([2, 3, 4]), released=[5, 6, 7])
    assert v == {3: 'read on the source', 6: 'after the cut, released',
                 8: 'after the cut, not released',
                 12: 'not on the source tap'}
    assert summary(v)['read on the source'] == 1


def test_without_a_cut_nothing_is_placed():
    assert place([3], handed(range(5)), None, []) == {3: 'no cut placed'}
    # A cut naming frames this stream never had: not placed either.
    assert place([3], handed(range(5)), cut([99]), []) == {
        3: 'no cut placed'}


def test_the_streams_own_cut_is_chosen_and_read_from_the_log():
    log = '\n'.join([
        'x vw-frame-hold INFO holding frames on vw-hold',
        'x vw-frame-hold INFO answer: ' + __import__('json').dumps(
            dict(cut([100, 101]), slot=1)),
        'x vw-frame-hold INFO answer: ' + __import__('json').dumps(
            dict(cut([3, 4]), slot=2)),
        'x vw-frame-hold INFO answer: {"op": "released", "slot": 2}',
        'x vw-frame-hold INFO answer: {not json'])
    answers = cut_answers(log)
    assert [a['slot'] for a in answers] == [1, 2]
    assert cut_of(answers, handed(range(10)))['slot'] == 2
