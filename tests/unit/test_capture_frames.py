"""Frames read back from an SLL2 capture by interface name and direction,
from the header alone: what the hang check (guest_crash.stall) reads."""
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import CookedLinuxV2
from scapy.utils import wrpcap

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
