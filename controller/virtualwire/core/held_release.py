"""What a moving vNIC's held frames came to at its release (the record
`core.held_frames` returns and the migration's record carries)."""
from dataclasses import dataclass
from typing import List, Optional


@dataclass
class Release:
    """What the destination gets at activation, and what it cost."""
    frames: List[bytes]                 # to deliver, in order
    held: int                           # frames the ring held
    read_on_source: int                 # held frames the guest read there
    evicted: int                        # unread frames the bound dropped
    skipped: int                        # unread, not held (never reached
                                        # the destination, or us)
    aligned: bool                       # the cut was found in the ring
    # Copies between the last poll that saw the guest reading and the
    # first that saw its final count (the read at activation counts as a
    # poll; None when the count released came from no poll).
    stop_window: Optional[int] = None
    source_dropped: int = 0             # the source tap's, during the move
    # Of those: before the cut, which moved it on; and where the polls
    # cannot tell (see the module's docstring).
    drops_placed: int = 0
    drops_unplaced: int = 0
    # Unread frames not held yet at the cut, though the last read one is:
    # on their way to the destination still (delivered as they come).
    pending: int = 0
    # Held since the STOP was said, not delivered: the source was handed
    # them (release_from_stop).
    withheld: int = 0
    # Frames past the last copy the cut was placed by counting (their
    # copies had not come: copies_reach).
    extrapolated: int = 0
    # A count too far past the copies to place (COUNT_PAST): by how much.
    count_unplaced: int = 0

    def view(self):
        return {'delivered': len(self.frames), 'held': self.held,
                'read_on_source': self.read_on_source,
                'evicted': self.evicted, 'skipped': self.skipped,
                'aligned': self.aligned, 'stop_window': self.stop_window,
                'source_dropped': self.source_dropped,
                'drops_placed': self.drops_placed,
                'drops_unplaced': self.drops_unplaced,
                'pending': self.pending, 'withheld': self.withheld,
                'extrapolated': self.extrapolated,
                'count_unplaced': self.count_unplaced}
