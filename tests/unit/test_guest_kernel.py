"""The lab guest's kernel extraction refuses what it cannot boot via PVH
rather than handing QEMU something else."""
import struct

from vwlab import guest_image


def _elf_with_note(name, ntype):
    desc = b'\0' * 4
    note = struct.pack('<III', len(name) + 1, len(desc), ntype) + \
        name + b'\0' * (4 - len(name) % 4) + desc
    phoff = 64
    hdr = bytearray(64)
    hdr[:5] = b'\x7fELF\x02'
    struct.pack_into('<Q', hdr, 0x20, phoff)
    struct.pack_into('<HH', hdr, 0x36, 56, 1)
    ph = struct.pack('<IIQQQQQQ', 4, 0, phoff + 56, 0, 0, len(note),
                     len(note), 4)
    return bytes(hdr) + ph + note


def test_only_a_xen_phys32_entry_note_counts_as_pvh():
    assert guest_image._has_pvh_note(_elf_with_note(b'Xen', 0x12))
    assert not guest_image._has_pvh_note(_elf_with_note(b'Xen', 0x11))
    assert not guest_image._has_pvh_note(_elf_with_note(b'GNU', 0x12))
    assert not guest_image._has_pvh_note(b'MZ' + b'\0' * 100)


def test_a_file_that_is_not_a_bzimage_is_left_alone(tmp_path):
    src = tmp_path / 'vmlinuz'
    src.write_bytes(b'\0' * 4096)
    assert not guest_image.extract_pvh_kernel(str(src),
                                              str(tmp_path / 'vmlinux'))
    assert not (tmp_path / 'vmlinux').exists()
