"""What kind of frame activated a migrated vNIC, as the records name it."""
from virtualwire.core import frames

DST_SRC = b'\xff' * 6 + bytes.fromhex('020000000001')
IP = bytes([10, 0, 0, 1])


def arp(spa, tpa):
    return DST_SRC + b'\x08\x06' + bytes.fromhex('0001080006040001') + \
        bytes(6) + spa + bytes(6) + tpa


def test_kinds():
    assert frames.kind(DST_SRC + b'\x80\x35' + bytes(28)) == 'rarp'
    assert frames.kind(arp(IP, IP)) == 'garp'
    assert frames.kind(arp(IP, bytes([10, 0, 0, 2]))) == 'arp'
    assert frames.kind(DST_SRC + b'\x08\x00' + bytes(20)) == 'ipv4'
    v6 = DST_SRC + b'\x86\xdd' + bytes.fromhex('6000000000203aff') + bytes(32)
    assert frames.kind(v6 + bytes([136]) + bytes(31)) == 'ipv6-na'
    assert frames.kind(v6 + bytes([133]) + bytes(31)) == 'ipv6-rs'
    assert frames.kind(v6 + bytes([128]) + bytes(31)) == 'icmpv6'
    assert frames.kind(DST_SRC + b'\x88\xcc' + bytes(10)) == 'ethertype 0x88cc'
    assert frames.kind(b'\x01\x02') == 'runt'


def test_tags_are_looked_through():
    tagged = DST_SRC + b'\x88\xa8\x00\x05' + b'\x81\x00\x00\x07' + arp(
        IP, IP)[12:]
    assert frames.kind(tagged) == 'garp'
    assert frames.kind(DST_SRC + b'\x81\x00\x00\x07') == 'ethertype 0x8100'
