"""What says a lab guest crashed, and the one rerun it earns."""
import pathlib

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


def test_a_crash_earns_one_rerun_in_its_own_directory(tmp_path):
    runs = []

    def run(d):
        runs.append(pathlib.Path(d).name)
        if len(runs) == 1:
            raise guest_crash.GuestCrashed('guest g1 crashed: [...]')
        return 'judged'

    with pytest.warns(UserWarning, match='g1 crashed.*run again'):
        assert guest_crash.once_more_if_the_guest_crashed(
            run, tmp_path) == 'judged'
    assert runs == ['run1', 'run2']


def test_a_second_crash_fails_and_other_failures_are_not_rerun(tmp_path):
    def crashes(_d):
        raise guest_crash.GuestCrashed('guest g1 crashed')

    with pytest.warns(UserWarning):
        with pytest.raises(guest_crash.GuestCrashed):
            guest_crash.once_more_if_the_guest_crashed(crashes, tmp_path)
    runs = []

    def loses(d):
        runs.append(d)
        raise AssertionError('stream lost 5 on the way')

    with pytest.raises(AssertionError, match='lost 5'):
        guest_crash.once_more_if_the_guest_crashed(loses, tmp_path / 'x')
    assert len(runs) == 1
