"""The interpreter's automatic garbage collections, kept off a
migration's critical moments.

A collection stops the whole process (`metrics.gc_pauses`): the control
loop, every switch's session, REST. A full one took 210 ms once in a
bench run, inside `Controller.source_stopped`, right at a guest's STOP:
its held frames then reached it 140 ms after RESUME
(docs/benchmarks.rst, "the controller's stall"). Two measures:

- at start-up, after the first full read, one collection and
  `gc.freeze()`: what was built by then (modules, classes, the first
  tables) is never scanned again, so a later full collection covers
  only what came after;
- while a migration is in flight, automatic collections wait: from its
  announcement and again from its source's STOP, for at most `cap`
  seconds each, and until no migration is active. They resume after
  (the allocations they skipped then trigger one at once).

What it does not do: it frees nothing sooner (memory held by reference
cycles waits out the window, bounded by `cap`), and a collection that
began just before an announcement still runs to its end.
"""
import gc
import logging
import time

LOG = logging.getLogger(__name__)
CAP = 30.0      # s: the longest a window keeps collections off


class QuietCollections:
    """Owned by the controller, used on its loop: `quiet()` at a
    migration's announcement and STOP, `settle(busy)` after each burst
    of events."""

    def __init__(self, cap=CAP, clock=time.monotonic, collector=gc,
                 log=LOG):
        self.cap = cap
        self.clock = clock
        self.gc = collector
        self.log = log
        self._until = None      # clock() at which this window ends anyway
        self._since = None
        self.windows = 0
        self.longest = 0.0      # s, the longest window so far

    @property
    def quiet_now(self) -> bool:
        return self._until is not None

    def settle_start_up(self):
        """Collect once, then freeze what survived (start-up's heap).
        Returns how many objects were frozen."""
        self.gc.collect()
        self.gc.freeze()
        return self.gc.get_freeze_count()

    def quiet(self):
        """A migration's announcement or its source's STOP: collections
        wait for up to `cap` seconds from now."""
        now = self.clock()
        if self._until is None:
            if not self.gc.isenabled():
                return          # someone else holds them off: theirs
            self.gc.disable()
            self._since = now
            self.windows += 1
        self._until = now + self.cap

    def settle(self, busy: bool):
        """After each burst: the window ends once no migration is in
        flight (`busy` false) or its cap has passed."""
        if self._until is None:
            return
        now = self.clock()
        capped = now >= self._until
        if busy and not capped:
            return
        took = now - self._since
        self.longest = max(self.longest, took)
        self._until = self._since = None
        self.gc.enable()
        if capped:
            self.log.warning('garbage collections resumed after %.0f s '
                             'with a migration still in flight (cap)', took)

    def figures(self):
        """For the status: windows so far and the longest."""
        return {'gc_quiet_windows': self.windows,
                'gc_quiet_longest_s': round(self.longest, 3)}
