"""What says a lab guest crashed or stalled (the retry: test_guest_retry)."""
import pytest

from vwlab import guest_crash

BOOT = '[    0.01] ACPI BIOS Error\nvw-guest: ready eth0=10.81.0.1/24\n'
PANIC = ('[    9.88] invalid opcode: 0000 [#1] PREEMPT SMP NOPTI\n'
         '[    9.89] Kernel panic - not syncing: Fatal exception\n')


class FakeGuest:
    name = 'g1'

    def __init__(self, text):
        self.text = text

    def console_text(self):
        return self.text


def test_a_panic_and_the_reboot_after_it_count():
    booted = guest_crash.marks(BOOT)
    assert guest_crash.marks(BOOT + PANIC) > booted
    # The panic scrolled away: the second boot alone says it.
    assert guest_crash.marks(BOOT + BOOT) > booted
    assert guest_crash.crash_lines(BOOT + PANIC) == PANIC.splitlines()
    assert guest_crash.crash_lines(BOOT) == []


def test_a_broken_virtio_ring_counts():
    text = BOOT + 'virtio_net virtio0: output.0:id 39 is not a head!\n'
    assert guest_crash.marks(text) > guest_crash.marks(BOOT)


def test_check_guest_names_the_guest_and_the_lines():
    guest_crash.check_guest(FakeGuest(BOOT), guest_crash.marks(BOOT))
    with pytest.raises(guest_crash.GuestCrashed) as e:
        guest_crash.check_guest(FakeGuest(BOOT + PANIC),
                                guest_crash.marks(BOOT))
    assert 'guest g1 crashed' in str(e.value)
    assert 'invalid opcode' in str(e.value)


def _gram(t, host, iface, into):
    from vwlab.capture import Frame
    return Frame(t, host, iface, into)


TAPS = {('h2', 'vnet1'), ('h2', 'vnet2')}
MOVE = [(10.0, 'h1', 10.2, 'h2')]


def _stream(start, end, answered_on=('vnet1', 'vnet2'), step=0.01):
    out, t = [], start
    while t < end:
        for nic in ('vnet1', 'vnet2'):
            out.append(_gram(t, 'h2', nic, True))
            if nic in answered_on:
                out.append(_gram(t + 0.001, 'h2', nic, False))
        t += step
    return out


def test_a_guest_that_answers_is_not_stalled():
    assert guest_crash.stall(_stream(10.21, 14.0), TAPS, MOVE) is None


def test_a_guest_silent_while_handed_datagrams_is_stalled():
    grams = _stream(10.21, 11.0) + _stream(11.0, 13.0, answered_on=()) + \
        _stream(13.0, 14.0)
    since, seconds, handed = guest_crash.stall(grams, TAPS, MOVE)
    assert 10.99 <= since <= 11.002 and 1.9 < seconds < 2.1
    assert 380 <= handed <= 420
    with pytest.raises(guest_crash.GuestStalled,
                       match='sent nothing for 2.0 s .* handed 4.. frames'):
        guest_crash.check_running(FakeGuest(''), grams, TAPS, MOVE)


def test_one_nic_answering_is_not_a_stall():
    # A wire that fails alone is the network's to answer for.
    assert guest_crash.stall(_stream(10.21, 14.0, answered_on=('vnet1',)),
                             TAPS, MOVE) is None


def test_silence_while_paused_or_not_handed_anything_is_no_stall():
    # Nothing handed: a network that delivers nothing is not the guest's.
    assert guest_crash.stall(_stream(10.21, 11.0), TAPS, MOVE) is None
    # Paused 1.5 s on a second move, its taps handed the stream meanwhile.
    moves = MOVE + [(12.0, 'h2', 13.5, 'h2')]
    grams = _stream(10.21, 12.0) + _stream(12.0, 13.5, answered_on=()) + \
        _stream(13.5, 14.0)
    assert guest_crash.stall(grams, TAPS, moves) is None
    # ... but the same silence with the guest running is one.
    assert guest_crash.stall(grams, TAPS, MOVE)[1] > 1.4
