"""Where a ring on the destination host cuts (pure): the release message
the controller sends `vw-frame-hold` (host.hold_ring) for one moving vNIC,
from the source's copies and read count in `core.held_frames.HeldFrames`.

The controller holds no frame here, only the copies' digests: it names the
last frames the guest read on its source (the digests of the copies
before the cut), and the ring delivers what it holds after them. What is
not known here is decided by `absent`, for a ring that holds no such run:
  - the guest read none of the copied frames: everything held goes;
  - more frames were handed and never read than the ring holds: the run
    was evicted, everything left goes ("all");
  - else the run has not reached the destination yet (its path from the
    far end is the longer one): the ring waits for it ("wait").
No count at all (the source's switch and agent both silent): every frame
the source was handed counts as read, the rest goes. A frame the guest
never read is then lost rather than one it read delivered twice, as the
controller's own ring does (`HeldFrames.release_from_stop`).
"""
from typing import List, Optional, Tuple

from virtualwire.core.held_frames import HeldFrames

MAX_AFTER = 16          # digests named (the ring's bound: host.hold_ring)


def release_doc(hf: HeldFrames, reads: Optional[int], ring_frames: int
                ) -> Tuple[dict, dict]:
    """(the message's after/absent fields, what the record says of the
    cut) for a ring of at most `ring_frames` frames."""
    if hf.base is None or (reads is None and not hf.copies):
        # No copy, or no count and no copy: nothing tells a read frame.
        return {'after': [], 'absent': 'all'}, {'aligned': False}
    if reads is None:
        cut, placed, unplaced = hf.n_copies, 0, 0
    else:
        cut, placed, unplaced = hf._past_drops(max(0, reads - hf.base))
    read: List[bytes] = [d for i, d in hf.copies if i < cut][-MAX_AFTER:]
    unread = max(0, hf.n_copies - cut)
    view = {'aligned': reads is not None, 'read_copies': min(
        cut, hf.n_copies), 'unread_copies': unread,
        'drops_placed': placed, 'drops_unplaced': unplaced,
        'extrapolated': max(0, cut - hf.n_copies)}
    if not read:
        return {'after': [], 'absent': 'all'}, view
    # Read past the last copy come (the controller is behind): the ring
    # holds those frames after the run, in the same order.
    return {'after': [d.hex() for d in read], 'skip': view['extrapolated'],
            'absent': 'all' if unread >= ring_frames else 'wait'}, view
