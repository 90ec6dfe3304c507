"""What the guest's kernel dropped during a move, from two readings of its
counters (the lab guest's responder answers /proc/net/snmp and
/proc/net/dev)."""
from vwlab.echo_probe import parse_guest_stats
from vwlab.guest_drops import guest_drops

SNMP = ('Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors '
        'SndbufErrors InCsumErrors IgnoredMulti MemErrors\n'
        'Udp: %d 0 %d %d %d 0 0 0 0\n')
DEV = ('Inter-|   Receive                            |  Transmit\n'
       ' face |bytes packets errs drop fifo frame compressed multicast|'
       'bytes packets errs drop fifo colls carrier compressed\n'
       '  eth0: 6400 %d 0 %d 0 0 0 0 6400 100 0 0 0 0 0 0\n'
       '  eth1: 6400 100 0 0 0 0 0 0 6400 100 0 0 0 0 0 0\n')


def _reading(received, in_errors, rcvbuf, eth0_rx, eth0_dropped):
    return parse_guest_stats(SNMP % (received, in_errors, received, rcvbuf)
                             + DEV % (eth0_rx, eth0_dropped))


def test_a_full_socket_buffer_and_a_nic_drop_are_told():
    before = _reading(1000, 0, 0, 1000, 0)
    after = _reading(3000, 7, 7, 3010, 3)
    assert guest_drops(before, after) == {
        'RcvbufErrors': 7, 'InErrors': 7, 'eth0 rx_dropped': 3}


def test_nothing_dropped_is_an_empty_answer_and_no_reading_is_none():
    r = _reading(1000, 0, 0, 1000, 0)
    assert guest_drops(r, _reading(2000, 0, 0, 2000, 0)) == {}
    assert guest_drops(None, r) is None and guest_drops(r, None) is None
