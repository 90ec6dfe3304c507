"""The interpreter's garbage collections, timed. A collection stops the
whole process: the control loop, every switch's session, the REST server.
A full one over a controller's state is the one stall no greenthread can
yield out of, so each is observed
(`virtualwire_gc_pause_seconds{generation}`) and one over SLOW is logged
with what it found: when a migration's answer comes late, the log says
whether the process was collecting then.

It says how long collections took; `control.quiet_collections` keeps
them off migrations and freezes what start-up built."""
import gc
import logging
import time

LOG = logging.getLogger(__name__)
SLOW = 0.05     # s: a pause a migration's answer would notice


class GcPauses:
    """A `gc.callbacks` entry: observe(generation, seconds) per
    collection; a warning for one that took SLOW or more."""

    def __init__(self, observe, slow=SLOW, clock=time.perf_counter,
                 log=LOG):
        self.observe = observe
        self.slow = slow
        self.clock = clock
        self.log = log
        self._began = None

    def __call__(self, phase, info):
        if phase == 'start':
            self._began = self.clock()
            return
        if self._began is None:         # installed mid-collection
            return
        took, self._began = self.clock() - self._began, None
        self.observe(info['generation'], took)
        if took >= self.slow:
            self.log.warning('garbage collection of generation %d took '
                             '%.0f ms (%d collected, %d uncollectable; '
                             'allocations since, by generation: %s)', info['generation'],
                             took * 1e3, info['collected'],
                             info['uncollectable'], gc.get_count())

    def install(self):
        if self not in gc.callbacks:
            gc.callbacks.append(self)
        return self

    def remove(self):
        if self in gc.callbacks:
            gc.callbacks.remove(self)
