"""One event loop owns all mutable controller state.

OpenFlow events, OVSDB changes, REST calls and timers all become events on
one queue, run one at a time on one thread (a green thread under eventlet,
an OS thread under os-ken's native hub: both work, because nothing else
ever touches the state). After each burst of events the loop runs its
`idle` hook (the controller's sync), so a thousand OVSDB changes cost one
sync, not a thousand.

Why a loop and not locks: the state (flow tables, placement, migrations,
switch sessions) is read and written by every kind of event; with locks,
every new handler is a new chance to forget one (the old engine did).
Here a handler cannot race, and `assert_owner` makes a handler that is
called from elsewhere fail loudly in tests.
"""
import logging
import threading
import time
from typing import Optional, Tuple

from os_ken.lib import hub

from virtualwire.future import Future

__all__ = ['Future', 'Loop']

LOG = logging.getLogger(__name__)
# s: a handler (or sync) that holds the loop this long delays every event
# behind it (a migration's answers among them): logged, with its name.
SLOW = 0.05


class Loop:
    def __init__(self, name='control', clock=time.monotonic):
        self.name = name
        self.clock = clock
        self._queue = hub.Queue()
        self._owner = None                 # the thread running the loop
        self._stopped = False
        self.idle = None                   # called after each burst
        self.handled = 0
        self.lag_max = 0.0                 # worst queueing delay seen (s)
        self.observe_lag = None            # observe_lag(seconds) per event
        self._in_handler = False
        # (s, name) of the longest handler
        self.slowest: Tuple[float, Optional[str]] = (0.0, None)

    # -- from anywhere -------------------------------------------------------
    def post(self, fn, *args):
        """Run fn(*args) on the loop, later. Never blocks."""
        self._queue.put((time.monotonic(), fn, args, None))

    def call(self, fn, *args, timeout=30.0):
        """Run fn(*args) on the loop and return its result (or raise its
        exception) in the caller. Must not be called from the loop."""
        if self.on_loop():
            # Only a thread driving the loop by hand (run_pending: tests)
            # gets here; run what was queued before, as the loop would.
            if self._in_handler:
                raise AssertionError('a handler must not wait on the loop')
            self.run_pending()
            return fn(*args)
        fut = Future()
        self._queue.put((time.monotonic(), fn, args, fut))
        return fut.result(timeout)

    def every(self, seconds, fn, when=None):
        """Post fn every `seconds` (timers are events too); with `when`,
        only while when() is true: a fast timer that is mostly idle then
        costs no event (each event is followed by a sync). when() runs
        off the loop: it may only read a flag the loop sets."""
        def tick():
            while not self._stopped:
                hub.sleep(seconds)
                if when is None or when():
                    self.post(fn)
        return hub.spawn(tick)

    def after(self, seconds, fn):
        """Post fn once, `seconds` from now."""
        def later():
            hub.sleep(seconds)
            if not self._stopped:
                self.post(fn)
        return hub.spawn(later)

    def stop(self):
        self._stopped = True
        self._queue.put(None)

    def figures(self):
        """What the status shows of the loop: events run, the longest
        wait for one, the longest handler and its name."""
        return {'events': self.handled,
                'loop_lag_max_ms': round(self.lag_max * 1000, 3),
                'loop_slowest_ms': round(self.slowest[0] * 1000, 3),
                'loop_slowest': self.slowest[1]}

    # -- the loop ------------------------------------------------------------
    def on_loop(self):
        return self._owner is not None and \
            self._owner == _current()

    def assert_owner(self):
        """Controller handlers call this: state is touched only here."""
        if self._owner is not None and self._owner != _current():
            raise AssertionError('controller state touched outside the '
                                 '%s loop' % self.name)

    def run(self):
        self._owner = _current()
        while not self._stopped:
            item = self._queue.get()
            answered = False
            while item is not None:
                answered |= item[3] is not None
                self._run(item)
                try:
                    item = self._queue.get(block=False)
                except hub.QueueEmpty:
                    item = None
            if answered:
                # Let the callers just answered (REST) reply before the
                # sync builds and sends bundles: under eventlet they would
                # otherwise wait for it (docs/benchmarks.rst, the reshape).
                hub.sleep(0)
            if self.idle is not None and not self._stopped:
                self._guard(self.idle)

    def run_pending(self):
        """Run queued events now, on the caller's thread (tests drive the
        controller this way, with no threads at all)."""
        self._owner = _current()
        n = 0
        while True:
            try:
                item = self._queue.get(block=False)
            except hub.QueueEmpty:
                break
            if item is None:
                continue
            self._run(item)
            n += 1
        if self.idle is not None:
            self._guard(self.idle)
        return n

    def _run(self, item):
        queued, fn, args, fut = item
        began = self.clock()
        lag = began - queued
        self.lag_max = max(self.lag_max, lag)
        if self.observe_lag is not None:
            self.observe_lag(lag)
        self.handled += 1
        self._in_handler = True
        try:
            value = fn(*args)
        except Exception as e:          # the caller (if any) gets it
            if fut is None:
                LOG.exception('event %s failed', _name(fn))
            else:
                fut.set(error=e)
            return
        finally:
            self._in_handler = False
            self._timed(fn, began)
        if fut is not None:
            fut.set(value)

    def _guard(self, fn):
        self._in_handler = True
        began = self.clock()
        try:
            fn()
        except Exception:
            LOG.exception('%s failed', _name(fn))
        finally:
            self._in_handler = False
            self._timed(fn, began)

    def _timed(self, fn, began):
        """A handler's time on the loop (with whatever other green
        threads ran while it yielded): the longest kept, a slow one
        logged."""
        took = self.clock() - began
        if took > self.slowest[0]:
            self.slowest = (took, _name(fn))
        if took >= SLOW:
            LOG.warning('%s loop: %s held it %.0f ms', self.name, _name(fn),
                        took * 1e3)


def _name(fn) -> str:
    """A handler as a person would look it up: Class.method."""
    return getattr(fn, '__qualname__', None) or getattr(
        fn, '__name__', None) or repr(fn)


if hub.HUB_TYPE == 'eventlet':
    import eventlet.greenthread

    def _current():
        """The running green thread (all of them share one OS thread)."""
        return id(eventlet.greenthread.getcurrent())
else:
    def _current():
        return threading.get_ident()
