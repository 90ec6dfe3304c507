"""The refusals log: what the controller turned away, counted and the last
ones kept for `/v1/status` (admission's switches and host reports, the
extenders' keys). Parts append; nothing else changes it."""
import collections
import logging
import time

LOG = logging.getLogger(__name__)
KEEP_REFUSALS = 50


class Refusals:
    def __init__(self, stats):
        self.stats = stats              # the controller's counters
        self.recent: collections.deque = collections.deque(
            maxlen=KEEP_REFUSALS)

    def refuse(self, counter, kind, peer, why):
        self.stats[counter] = self.stats.get(counter, 0) + 1
        self.recent.append({'at': time.time(), 'kind': kind,
                            'peer': peer, 'why': why})
        LOG.warning('refused %s from %s: %s', kind, peer, why)
