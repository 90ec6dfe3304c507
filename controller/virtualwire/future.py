"""A result another thread will produce, to wait on under either os-ken
hub (the control loop answers REST calls with these; the runtime store's
writer answers durable writes)."""
import threading

from os_ken.lib import hub


class Future:
    """A result the loop will produce; wait on it from any other thread."""

    def __init__(self):
        # os-ken's native-hub Event ignores a wait's timeout (its Timeout
        # fires only when the wait ends by itself): use the thread's own.
        self._event = threading.Event() \
            if getattr(hub, 'HUB_TYPE', 'native') == 'native' else hub.Event()
        self._value = None
        self._error = None

    def set(self, value=None, error=None):
        self._value, self._error = value, error
        self._event.set()

    def done(self):
        return self._event.is_set()

    def result(self, timeout=None):
        if not self._event.wait(timeout=timeout):
            raise TimeoutError('no result within %ss' % timeout)
        if self._error is not None:
            raise self._error
        return self._value
