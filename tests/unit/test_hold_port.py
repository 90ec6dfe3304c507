"""vw-frame-hold's loop when its port goes: ovs-vswitchd's restart makes
the userspace datapath's internal port again (a new device), and a packet
socket bound to the old one is dead for good."""
import errno
import socket

import pytest

from virtualwire.host.copy_log import CopyLogs
from virtualwire.host.hold_port import serve
from virtualwire.host.hold_ring import HoldRings


class PortThatGoes:
    """A readable socket whose read fails as a vanished port's does, once;
    `reopen` binds a fresh one."""

    def __init__(self, err=errno.ENETDOWN):
        self.sock, self._peer = socket.socketpair()
        self._peer.send(b'x')
        self.err, self.reopened = err, 0

    def recv(self):
        if self.reopened == 0:
            raise OSError(self.err, 'gone')
        return None

    def reopen(self):
        self.sock.close()
        self.sock, self._peer = socket.socketpair()
        self.reopened += 1

    def pending(self):
        return False

    def dropped(self):
        return 0


def _serve(port, turns):
    left = [turns]

    def stop():
        left[0] -= 1
        return left[0] < 0
    serve(port, HoldRings(4, 16, 1 << 16), tick=0.01, stop=stop,
          logs=CopyLogs())


def test_a_port_that_went_is_bound_again_and_the_loop_goes_on():
    port = PortThatGoes()
    _serve(port, 3)
    assert port.reopened == 1


def test_any_other_socket_error_is_not_taken_for_a_vanished_port():
    port = PortThatGoes(errno.EINVAL)
    with pytest.raises(OSError):
        _serve(port, 3)
    assert port.reopened == 0


def test_a_taps_counts_are_read_from_sysfs_and_none_once_it_is_gone(
        tmp_path):
    from virtualwire.host.hold_port import HoldPort
    stats = tmp_path / 'vnet7' / 'statistics'
    stats.mkdir(parents=True)
    (stats / 'tx_packets').write_text('4711\n')
    (stats / 'tx_dropped').write_text('3\n')
    assert HoldPort.tap_counts('vnet7', str(tmp_path)) == (4711, 3)
    assert HoldPort.tap_reads('vnet7', str(tmp_path)) == 4711
    assert HoldPort.tap_counts('vnet9', str(tmp_path)) is None
    assert HoldPort.tap_reads('vnet9', str(tmp_path)) is None
