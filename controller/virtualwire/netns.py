"""The southbound network namespace (a management VRF): OpenFlow, host
OVSDB and rendezvous sockets open there, REST stays where the controller
started, and so do the intent database's connections, reconnections
included (`ovsdb.tls_remote` opens its sockets through `at_home`).

A socket belongs to the namespace its creating thread is in when it is
made, so `at_home` switches the thread there for the socket() call only;
nothing yields in between (one OS thread under eventlet).
"""
import contextlib
import ctypes
import os

CLONE_NEWNET = 0x40000000
_home = None                    # fd of the namespace we started in


def _setns(fd):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, 'setns: %s' % os.strerror(err))


def enter(name):
    """Move this thread into namespace `name` (or a path), remembering
    the one it was in."""
    global _home
    if _home is None:
        _home = os.open('/proc/thread-self/ns/net', os.O_RDONLY)
    fd = os.open(name if name.startswith('/') else '/run/netns/' + name,
                 os.O_RDONLY)
    try:
        _setns(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def at_home():
    """Run the block in the namespace the controller started in."""
    if _home is None:
        yield
        return
    here = os.open('/proc/thread-self/ns/net', os.O_RDONLY)
    try:
        _setns(_home)
        try:
            yield
        finally:
            _setns(here)
    finally:
        os.close(here)
