"""A lab host's OpenFlow flows, all or one wire's."""
import re

from virtualwire.core import ids


def flows_of(host, cookie_hex=None):
    """The host's flow lines; with a wire's cookie, that wire's flows
    (whatever their role bits, core.ids ROLE_*)."""
    out = host.dump_flows()
    lines = [l.strip() for l in out.splitlines() if 'cookie=' in l]
    if cookie_hex:
        want = int(cookie_hex, 16) & ids.COOKIE_WIRE_MASK
        lines = [l for l in lines if int(re.search(
            r'cookie=(0x[0-9a-f]+|0)', l).group(1), 16) &
            ids.COOKIE_WIRE_MASK == want]
    return lines
