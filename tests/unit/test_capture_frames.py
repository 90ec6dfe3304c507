"""Frames read back from an SLL2 capture by interface name and direction,
from the header alone: what the hang check (guest_crash.stall) reads."""
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import CookedLinuxV2
from scapy.utils import wrpcap

from vwlab import outage
from vwlab.capture import Capture, Frame

LINKTYPE_LINUX_SLL2 = 276


def _frame(ifindex, pkttype, t):
    p = CookedLinuxV2(proto=0x0800, ifindex=ifindex, pkttype=pkttype) / \
        IP(src='10.0.0.2', dst='10.0.0.1') / UDP(dport=7000) / (b'x' * 16)
    p.time = t
    return p


def test_frames_on_names_the_interface_and_direction(tmp_path):
    path = str(tmp_path / 'h2.pcap')
    # Into vnet1 (outgoing, 4), from vnet1 (other host, 3), on if 9 (not
    # asked for), and into an interface the names do not know.
    wrpcap(path, [_frame(7, 4, 1.0), _frame(7, 3, 1.5), _frame(9, 4, 2.0),
                  _frame(11, 4, 2.5)], linktype=LINKTYPE_LINUX_SLL2)
    cap = Capture('ns', 'h2', path)
    cap.names = {7: 'vnet1', 9: 'eth0'}
    assert cap.frames_on({'vnet1'}) == [Frame(1.0, 'h2', 'vnet1', True),
                                        Frame(1.5, 'h2', 'vnet1', False)]
    assert cap.frames_on({'gone'}) == []


def _from_guest(ifindex, proto, t):
    p = CookedLinuxV2(proto=proto, ifindex=ifindex, pkttype=3) / (b'x' * 28)
    p.time = t
    return p


def test_the_guests_first_frames_are_those_one_batch_may_hold(tmp_path):
    """first_frames_from_guest: the guest's frames into its tap from the
    first to `within` after it; frames before `after`, on other
    interfaces or outgoing are not the guest's."""
    path = str(tmp_path / 'rarp.pcap')
    wrpcap(path, [_from_guest(7, 0x0806, 0.9),      # before the STOP
                  _frame(7, 4, 1.0),                # to the guest
                  _from_guest(9, 0x0806, 1.0),      # another interface
                  _from_guest(7, 0x0800, 1.0004),
                  _from_guest(7, 0x0806, 1.0009),
                  _from_guest(7, 0x0800, 1.0031)],
           linktype=LINKTYPE_LINUX_SLL2)
    got = outage.first_frames_from_guest(path, {7}, 1.0, 0.001)
    assert [k for _t, k in got] == ['ipv4', 'arp']
    assert abs(got[0][0] - 1.0004) < 1e-6
    assert outage.first_frame_from_guest(path, {7}, 1.0) == got[0]
    assert outage.first_frames_from_guest(path, {8}, 0.0, 1.0) == []
    assert outage.first_frame_from_guest(path, {8}, 0.0) is None
