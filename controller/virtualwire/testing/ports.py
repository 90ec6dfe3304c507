"""Free loopback ports for tests that start servers of their own."""
import socket


def free_ports(n, kind=socket.SOCK_STREAM):
    """n ports nobody was bound to a moment ago (held together, so they
    differ), of `kind` (TCP or UDP)."""
    socks = [socket.socket(socket.AF_INET, kind) for _ in range(n)]
    try:
        for s in socks:
            s.bind(('127.0.0.1', 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
