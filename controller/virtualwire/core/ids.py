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


_CONNECTOR_RE = re.compile(r'(?:0[xX][0-9a-fA-F]{1,8}|[0-9]{1,10})')


class InvalidId(Invalid):
    """An identifier that cannot be valid, whatever the state."""


def check_vnic_id(value):
    if not isinstance(value, str) or not _VNIC_RE.fullmatch(value):
        raise InvalidId('vNIC id must be 1-128 characters of letters, digits '
                        'and _.:@- starting with a letter or digit, got %r'
                        % (value,))
    return value


def check_wire_ends(end_a, end_b):
    """A wire joins two different, valid vNIC ids (whether either is
    already wired is the intent database's to say: it is the arbiter
    between writers)."""
    check_vnic_id(end_a)
    check_vnic_id(end_b)
    if end_a == end_b:
        raise InvalidId('a wire needs two different vNICs, got %s twice'
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


def connector_of_cookie(cookie):
    """The connector id a cookie belongs to, 0 for infrastructure flows,
    None for a flow that is not ours."""
    if cookie & COOKIE_MARK_MASK != COOKIE_MARK:
        return None
    return cookie & 0xFFFFFFFF


def fmt_connector(cid):
    return '0x%08x' % cid
