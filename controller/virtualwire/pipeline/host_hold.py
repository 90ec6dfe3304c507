"""Flows that keep a moving vNIC's frames on its destination host (pure).

A host whose bridge has the internal port `vw-hold` (`core.model.Host`
`hold_port`) runs vw-frame-hold on it (`host.hold_ring`). While a vNIC
migrates in, its held flow pushes an 802.1ad tag with the vNIC's *slot*
and outputs the frame there, instead of sending it to the controller
(`pipeline.wire`); the ring sends back, tagged with the same slot, what
the guest never read on its source, and a flow pops the tag and hands
the frame to the vNIC's port. The slot is the destination port's own
number: unique on its host while the port exists, known to the pure flow
computation and to the controller alike, and the same after a restart
of either.

Every flow on `vw-hold` matches its VLAN id alone, never an EtherType:
OVS's userspace datapath sends a receive batch's frames out grouped by
datapath flow, and a release split over two such flows came out
reordered (host.hold_ring).
"""
import struct
from typing import Optional, Tuple

from virtualwire.core.model import Location

ETH_TYPE_8021AD = 0x88a8
OFPVID_PRESENT = 0x1000
ETHERTYPE = 0x88B5          # IEEE 802 local experimental: the ring's messages
# The answers' tag (a VLAN id no slot takes), and what the switch does
# with them: tag off, to the controller.
ANSWER_SLOT = 4094
# A copy log's markers (host.copy_log), which the switch hands straight
# back to vw-hold: when one returns, every copy the switch wrote before it
# was sent is ahead of it.
MARK_SLOT = 4093
OFPP_IN_PORT = 0xfffffff8
MARK_ACTIONS = [('output', OFPP_IN_PORT)]
# The tag's priority on a copy of the guest's own frame (runs_signal):
# the guest runs on this host. The frames towards it carry priority 0.
RUNS_PCP = 7
# The tag's priority on a copy of a frame the switch hands a moving
# guest's *source* tap (`to_log`): the source host's own vw-frame-hold
# keeps its digest (host.copy_log), so no copy crosses to the controller.
COPY_PCP = 6
ANSWER_ACTIONS = [('pop_vlan',), ('output', 0xfffffffd)]
# The messages' addresses: locally administered, never a guest's (the
# switch tells them apart by their tag alone, ANSWER_SLOT or none).
MESSAGE_DST = bytes.fromhex('027677000001')
MESSAGE_SRC = bytes.fromhex('027677000002')


def message_frame(payload: bytes) -> bytes:
    """A message between the controller and a ring, as a frame."""
    return MESSAGE_DST + MESSAGE_SRC + struct.pack('!H', ETHERTYPE) + \
        payload


def slot_of(loc: Location) -> Optional[int]:
    """The slot of a vNIC's port, if it can have one (a VLAN id)."""
    if loc.kind != 'vnic' or not 1 <= loc.ofport < MARK_SLOT:
        return None
    return loc.ofport


def held_on_host(hosts, loc: Location, enabled=True
                 ) -> Optional[Tuple[int, int]]:
    """(hold port, slot) if frames towards `loc` wait on its own host."""
    h = hosts.get(loc.host) if enabled else None
    slot = slot_of(loc)
    if h is None or h.hold_port is None or slot is None:
        return None
    return h.hold_port, slot


def copies_on_host(hosts, source: Location, dest: Location, enabled=True
                   ) -> Optional[Tuple[int, int]]:
    """(hold port, slot) on the source's host if the copies of what a
    moving vNIC's source tap is handed stay there: both its hosts keep
    frames themselves (a ring on the destination is what uses them)."""
    if held_on_host(hosts, dest, enabled) is None:
        return None
    return held_on_host(hosts, source, enabled)


def to_log(hold_port: int, slot: int):
    """The actions that copy a frame into the slot's copy log, leaving
    the frame as it was for the actions after them."""
    return [('push_vlan', ETH_TYPE_8021AD),
            ('set_field', 'vlan_vid', OFPVID_PRESENT | slot),
            ('set_field', 'vlan_pcp', COPY_PCP),
            ('output', hold_port), ('pop_vlan',)]


def to_ring(hold_port: int, slot: int):
    """The actions that put a frame in the slot's ring."""
    return [('push_vlan', ETH_TYPE_8021AD),
            ('set_field', 'vlan_vid', OFPVID_PRESENT | slot),
            ('output', hold_port)]


def runs_signal(hold_port: int, slot: int):
    """The actions that tell the slot's ring its guest runs here: a copy
    of the guest's own frame, tagged with the slot and priority RUNS_PCP
    (the ring reads the tag, never the frame). Last in a flow's actions:
    they leave the frame tagged."""
    return [('push_vlan', ETH_TYPE_8021AD),
            ('set_field', 'vlan_vid', OFPVID_PRESENT | slot),
            ('set_field', 'vlan_pcp', RUNS_PCP),
            ('output', hold_port)]


def from_ring(hold_port: int, slot: int) -> dict:
    """The match of frames the ring sends back for the slot."""
    return {'in_port': hold_port, 'vlan_vid': OFPVID_PRESENT | slot}


def answers(hold_port: int) -> dict:
    """The match of the ring's answers (to the controller)."""
    return from_ring(hold_port, ANSWER_SLOT)


def markers(hold_port: int) -> dict:
    """The match of a copy log's markers (back to it)."""
    return from_ring(hold_port, MARK_SLOT)
