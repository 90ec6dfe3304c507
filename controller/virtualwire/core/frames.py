"""What a guest's frame is, in the words the migration records use: which
kind of frame activated a live-migrated vNIC on its destination."""

ETH_RARP = 0x8035
ETH_ARP = 0x0806
ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86dd
_TAGS = (0x8100, 0x88a8, 0x9100)
_ND = {133: 'ipv6-rs', 134: 'ipv6-ra', 135: 'ipv6-ns', 136: 'ipv6-na',
       137: 'ipv6-redirect'}

# Activations that were not this vNIC's frame: read from a switch's table
# after a controller restart (the frame is gone), the source host's
# libvirt hook saying the guest left it, and the source port leaving OVSDB
# (the last resort: the migration is over, whatever the guest sent).
FOUND_IN_TABLE = 'found-in-table'
# The guest's frame on another of its vNICs' destination ports: the switch
# learned this vNIC's delivery with it (pipeline.guests).
SIBLING_FRAME = 'sibling-frame'
RELEASE_HOOK = 'release-hook'
SOURCE_LEFT = 'source-left'
# The source's vw-host-agent saw libvirt pause the guest for the last
# copy of its migration (QEMU's STOP): delivery moves to the destination
# tap, which queues frames until QEMU runs the guest there.
SOURCE_STOPPED = 'source-stopped'


def kind(frame: bytes) -> str:
    """'rarp', 'garp', 'arp', 'ipv6-na' (and the other ND types),
    'icmpv6', 'ipv6', 'ipv4', or 'ethertype 0x....' for anything else
    (VLAN/QinQ tags are looked through); 'runt' under 14 bytes."""
    if len(frame) < 14:
        return 'runt'
    off = 12
    etype = int.from_bytes(frame[off:off + 2], 'big')
    while etype in _TAGS and len(frame) >= off + 6:
        off += 4
        etype = int.from_bytes(frame[off:off + 2], 'big')
    body = frame[off + 2:]
    if etype == ETH_RARP:
        return 'rarp'
    if etype == ETH_ARP:
        # Gratuitous: sender and target protocol address are the same.
        return 'garp' if len(body) >= 28 and body[14:18] == body[24:28] \
            else 'arp'
    if etype == ETH_IPV4:
        return 'ipv4'
    if etype == ETH_IPV6:
        if len(body) >= 41 and body[6] == 58:       # next header ICMPv6
            return _ND.get(body[40], 'icmpv6')
        return 'ipv6'
    return 'ethertype %#06x' % etype
