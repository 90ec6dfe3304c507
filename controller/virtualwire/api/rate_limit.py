"""Requests per credential, bounded (a token bucket each).

A scoped credential (a tenant's, a hook's, a reader's, an operator's by
name) may make RATE requests a second on average, BURST at once; beyond
that it is answered 429 with Retry-After, and nothing else is done for
it. So one credential, stolen or looping, cannot take the controller's
time from every other caller (each request costs a turn on the control
loop). The root token (the break-glass credential) is not limited.

The busiest legitimate callers, measured: an extender's agent reports
10 times a second during a key rotation (once a second otherwise), a
Prometheus scrape and a dashboard make a few requests a second, a hook a
handful per migration.
"""
import collections
import threading
import time
from typing import Optional

RATE = 20.0             # requests a second, on average
BURST = 60.0            # at once
KEEP = 10_000           # credentials remembered (the least recent go)


class RateLimits:
    def __init__(self, rate=RATE, burst=BURST, clock=time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: 'collections.OrderedDict[object, list]' = \
            collections.OrderedDict()
        self._lock = threading.Lock()
        self.refused = 0

    def wait(self, who) -> Optional[float]:
        """None if `who` may make a request now (one is taken), else the
        seconds until it may."""
        now = self.clock()
        with self._lock:
            b = self._buckets.pop(who, None) or [self.burst, now]
            b[0] = min(self.burst, b[0] + (now - b[1]) * self.rate)
            b[1] = now
            self._buckets[who] = b
            while len(self._buckets) > KEEP:
                self._buckets.popitem(last=False)
            if b[0] >= 1.0:
                b[0] -= 1.0
                return None
            self.refused += 1
            return (1.0 - b[0]) / self.rate

    def refusal(self, who):
        """None, or the 429 answer for credential `who` (role, name)."""
        late = self.wait(who)
        if late is None:
            return None
        from virtualwire.api.render import error
        resp = error(429, 'this credential (%s %s) is making more than %g '
                     'requests a second; try again in %.1f s'
                     % (who[0], who[1], self.rate, late))
        resp.headers['Retry-After'] = str(max(1, round(late)))
        return resp
