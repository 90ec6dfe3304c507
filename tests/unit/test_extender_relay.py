"""A relay extender's forwarder on real UDP sockets (loopback, each side
at its own 127.x address): datagrams cross unchanged between the two
sides' ports, a side that moves (its NAT remaps) is followed, and an
address the controller did not name is refused, so it cannot pull a
side's datagrams to itself."""
import socket
import time

import pytest

from virtualwire.extender.relay import Relays
from virtualwire.testing.ports import free_ports

A, B, EVIL = '127.0.0.2', '127.0.0.3', '127.0.0.4'


def udp(ip):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, 0))
    s.settimeout(2)
    return s


def heard(r, side):
    """Wait until the relay has learned a side (`ab` 0 or 1)."""
    pair = next(iter(r.pairs.values()))
    for _ in range(200):
        if pair.learned[side] is not None:
            return pair.learned[side]
        time.sleep(0.01)
    raise AssertionError('the relay never heard side %d' % side)


@pytest.fixture
def relay():
    pa, pb = free_ports(2, socket.SOCK_DGRAM)
    r = Relays()
    r.configure([{'a': 'xa', 'b': 'xb', 'port_a': pa, 'port_b': pb,
                  'allow_a': A, 'allow_b': B}])
    yield r, pa, pb
    r.close()


def test_ciphertext_crosses_unchanged_both_ways(relay):
    r, pa, pb = relay
    a, b = udp(A), udp(B)
    b.sendto(b'hello from b', ('127.0.0.1', pb))   # nobody on a's side yet
    heard(r, 1)
    payload = bytes(range(256)) * 5
    a.sendto(payload, ('127.0.0.1', pa))
    data, src = b.recvfrom(4096)
    assert data == payload and src[1] == pb
    b.sendto(b'reply', ('127.0.0.1', pb))
    data, src = a.recvfrom(4096)
    assert data == b'reply' and src[1] == pa
    # The relay counts a datagram once its send returned, which may be
    # just after the receiver has it (CI once read b_to_a 0 here).
    want = {'a_to_b': 1, 'b_to_a': 1, 'refused': 0, 'unpaired': 1}
    for _ in range(100):
        if r.stats()['xa-xb'] == want:
            break
        time.sleep(0.01)
    assert r.stats()['xa-xb'] == want


def test_a_side_that_moves_is_followed_an_outsider_is_refused(relay):
    r, pa, pb = relay
    a, b, evil = udp(A), udp(B), udp(EVIL)
    b.sendto(b'b here', ('127.0.0.1', pb))
    heard(r, 1)
    a.sendto(b'a here', ('127.0.0.1', pa))
    assert b.recvfrom(4096)[0] == b'a here'
    # An outsider claims a's port: refused, b's next datagram still goes
    # to a.
    evil.sendto(b'send me b', ('127.0.0.1', pa))
    time.sleep(0.05)
    b.sendto(b'for a', ('127.0.0.1', pb))
    assert a.recvfrom(4096)[0] == b'for a'
    evil.settimeout(0.3)
    with pytest.raises(socket.timeout):
        evil.recvfrom(4096)
    # a's NAT gives it a new port: the relay follows it.
    a2 = udp(A)
    a2.sendto(b'a moved', ('127.0.0.1', pa))
    assert b.recvfrom(4096)[0] == b'a moved'
    assert heard(r, 0) == a2.getsockname()
    b.sendto(b'to the new a', ('127.0.0.1', pb))
    assert a2.recvfrom(4096)[0] == b'to the new a'
    assert r.stats()['xa-xb']['refused'] == 1


def test_stopping_a_relay_frees_its_ports(relay):
    r, pa, pb = relay
    assert r.busy_ports() == {pa, pb}
    r.configure([])
    assert r.busy_ports() == set()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(('0.0.0.0', pa))          # free again
    s.close()
