"""Identifiers: vNIC ids, connector ids and the flow cookies derived from them."""
import re

from virtualwire.core.errors import Invalid

# libvirt's interfaceid is a UUID, but operators also use readable ids; allow
# what OVS external_ids can hold without quoting trouble.
_VNIC_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}')

CONNECTOR_MIN = 1            # 0 is reserved for the controller's own flows
CONNECTOR_MAX = 0xFFFFFFFF   # the whole 32-bit GRE key

# High 16 bits of every cookie we install ("VW"): lets us tell our flows
# from anybody else's; the low 32 bits are the connector id.
COOKIE_MARK = 0x5657 << 48
COOKIE_MARK_MASK = 0xFFFF << 48
COOKIE_WIRE_MASK = 0xFFFF0000FFFFFFFF

# Bits 32-47 say what a flow's packet counter counts, so a read-only
# collector can turn flow counters into per-wire figures from the cookie
# alone (`metrics.counters`). A wire flow may carry several: the flow of a
# collapsed wire both takes frames in from one end and delivers them to
# the other. OVS keeps counters when a flow is replaced with a new cookie
# (an add over the same match) or learned over (the learn action changes
# the cookie), so the collector follows a cookie change per flow instead
# of trusting it for the flow's whole history.
ROLE_ENTERS_A = 1 << 32      # frames entering the wire from end a
ROLE_ENTERS_B = 1 << 33
ROLE_DELIVERS_A = 1 << 34    # frames handed to end a's port
ROLE_DELIVERS_B = 1 << 35
ROLE_HELD_A = 1 << 36        # dropped on a migration's destination of end
ROLE_HELD_B = 1 << 37        # a/b until the guest runs there (activation)
# Infrastructure flows (connector 0):
ROLE_REJECTED = 1 << 40      # carrier frames no wire accepts from that source
ROLE_UNWIRED = 1 << 41       # frames from ports no wire has (table miss)
ROLE_MASK = 0xFFFF << 32

# A provider switch's flows (core.switches): "VS", the switch's number in
# bits 16-31 and the port's index in bits 0-15, what the counter counts in
# bits 32-47.
SWITCH_COOKIE_MARK = 0x5653 << 48
SW_ENTERED = 1 << 32         # frames entering the switch on the port
SW_FLOODED = 1 << 33         # frames from the port flooded (unknown dst)
SW_LEARNED = 1 << 34         # a MAC learned on the port (one flow each)
SW_BAD_SOURCE = 1 << 35      # frames dropped for a multicast source


# A flow-stats request or delete for one switch's flows: its mark and
# number (with `switch_cookie(number)`).
ONE_SWITCH_MASK = COOKIE_MARK_MASK | (0xFFFF << 16)


def switch_cookie(number, port=0, role=0):
    return SWITCH_COOKIE_MARK | role | (number << 16) | port


# Connector ids of the wires joining a split switch's parts (never a
# user's: new wires' ids are drawn outside the range): the switch's
# number and the pair of parts.
MESH_CONNECTOR_BASE = 0xF0000000
MESH_PAIRS_MAX = 1 << 12


def mesh_connector(number, pair):
    assert 0 <= pair < MESH_PAIRS_MAX and 1 <= number <= 0xFFFF
    return MESH_CONNECTOR_BASE | (number << 12) | pair


_CONNECTOR_RE = re.compile(r'(?:0[xX][0-9a-fA-F]{1,8}|[0-9]{1,10})')


class InvalidId(Invalid):
    """An identifier that cannot be valid, whatever the state."""


def check_vnic_id(value):
    if not isinstance(value, str) or not _VNIC_RE.fullmatch(value):
        raise InvalidId('vNIC id must be 1-128 characters of letters, digits '
                        'and _.:@- starting with a letter or digit, got %r'
                        % (value,))
    return value


# A gateway end: HOST/PORT (the whole physical port) or HOST/PORT/VLAN (one
# VLAN on a trunk port). '/' is never in a vNIC id, so the two never mix.
_GW_RE = re.compile(r'([A-Za-z0-9][A-Za-z0-9_.-]{0,63})/'
                    r'([A-Za-z0-9][A-Za-z0-9_.:-]{0,14})(?:/([0-9]{1,4}))?')


# ':' is never in a host name, so a switch end never reads as a gateway's.
SWITCH_END_PREFIX = 'sw:'


def parse_gateway_end(value):
    """(host, port, vlan or None) of a gateway end, None for anything that
    is not written as one; InvalidId if it is but cannot be valid."""
    if not isinstance(value, str) or '/' not in value or \
            value.startswith(SWITCH_END_PREFIX):
        return None
    m = _GW_RE.fullmatch(value)
    if not m:
        raise InvalidId('a gateway end is HOST/PORT or HOST/PORT/VLAN (port '
                        'names up to 15 characters), got %r' % (value,))
    vlan = int(m.group(3)) if m.group(3) is not None else None
    if vlan is not None and not 1 <= vlan <= 4094:
        raise InvalidId('VLAN must be 1-4094, got %d in %s' % (vlan, value))
    return m.group(1), m.group(2), vlan


# A provider switch's port (core.switches): sw:SWITCH/PORT.
SWITCH_NAME_PATTERN = r'[a-z0-9][a-z0-9_.-]{0,31}'
SWITCH_PORT_PATTERN = r'[A-Za-z0-9][A-Za-z0-9_.-]{0,14}'
SWITCH_NAME_RE = re.compile(SWITCH_NAME_PATTERN)
SWITCH_PORT_RE = re.compile(SWITCH_PORT_PATTERN)
_SW_END_RE = re.compile(r'sw:(%s)/(%s)' % (SWITCH_NAME_PATTERN,
                                            SWITCH_PORT_PATTERN))


def parse_switch_end(value):
    """(switch, port) of a switch end, None for an end that is not written
    as one; InvalidId if it is but cannot be valid."""
    if not isinstance(value, str) or not value.startswith(SWITCH_END_PREFIX):
        return None
    m = _SW_END_RE.fullmatch(value)
    if not m:
        raise InvalidId('a switch end is sw:SWITCH/PORT (a switch name of '
                        'lower-case letters, digits and _.-, a port name '
                        'up to 15 characters), got %r' % (value,))
    return m.group(1), m.group(2)


def check_end(value):
    if parse_switch_end(value) is None and \
            parse_gateway_end(value) is None:
        check_vnic_id(value)
    return value


def check_wire_ends(end_a, end_b):
    """A wire joins two different, valid ends: vNIC ids, gateway ends or
    switch ports
    (whether either is already wired is the intent database's to say: it
    is the arbiter between writers)."""
    check_end(end_a)
    check_end(end_b)
    if end_a == end_b:
        raise InvalidId('a wire needs two different ends, got %s twice'
                        % end_a)


def parse_connector_id(value):
    """Accept an int, a decimal string or a 0x-prefixed hex string."""
    if isinstance(value, bool):
        raise InvalidId('connector id must be an integer, got %r' % (value,))
    if isinstance(value, int):
        cid = value
    elif isinstance(value, str):
        # int() would also take ' 5', '5_0' and '+5': an id in a URL is
        # exactly digits (or 0x and hex digits), nothing around them.
        if not _CONNECTOR_RE.fullmatch(value):
            raise InvalidId('connector id must be an integer (decimal or '
                            '0x hex), got %r' % (value,))
        cid = int(value, 16) if value[:2].lower() == '0x' else int(value)
    else:
        raise InvalidId('connector id must be an integer, got %r' % (value,))
    if not CONNECTOR_MIN <= cid <= CONNECTOR_MAX:
        raise InvalidId('connector id must be between 1 and 0xffffffff, '
                        'got %r' % (value,))
    return cid


def wire_cookie(connector_id):
    return COOKIE_MARK | connector_id


def roles_of_cookie(cookie):
    return cookie & ROLE_MASK


def connector_of_cookie(cookie):
    """The connector id a cookie belongs to, 0 for infrastructure flows,
    None for a flow that is not ours."""
    if cookie & COOKIE_MARK_MASK != COOKIE_MARK:
        return None
    return cookie & 0xFFFFFFFF


def fmt_connector(cid):
    return '0x%08x' % cid


def derived_dpid(name: str) -> int:
    """The datapath id `vw-host-setup` gives host `name` by default: the
    first 64 bits of SHA-256 of the name. Under certificates a host must
    use it (`control.admission`): an id can then be claimed only by the
    holder of a certificate naming its host."""
    import hashlib
    return int(hashlib.sha256(name.encode()).hexdigest()[:16], 16)
