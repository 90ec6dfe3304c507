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


def held_deliveries(lines):
    """Of a wire's flow lines, those that hand a vNIC what vw-frame-hold
    sends it (in_port=vw-hold, one per end on a host that keeps frames:
    pipeline.host_hold), and the rest: ([held], [others])."""
    held = [l for l in lines if 'in_port=65003,' in l]
    return held, [l for l in lines if l not in held]
