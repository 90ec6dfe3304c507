"""A connection read by a background thread until stopped: the IDL
client, a host's monitor and the wire replica each pump one. Stopping
closes the connection under the owner's lock and, under the native hub,
joins the thread (a non-daemon thread left running keeps the process
alive after main() returns); a green thread ends on its own at the
pump's next wake-up (<= 0.5 s) and never holds the process."""
from typing import Any, Optional

from os_ken.lib import hub


class Pump:
    """Subclasses set `lock` (a hub.Semaphore) and implement `_pump` (the
    loop, ending once `_stopped`) and `_close` (the connection's)."""
    lock: Any
    _stopped = False
    _thread: Optional[Any] = None

    def start(self):
        self._thread = hub.spawn(self._pump)
        return self

    def stop(self, timeout=5.0):
        with self.lock:
            self._stopped = True
            self._close()
        join = getattr(self._thread, 'join', None)
        if join is not None:
            join(timeout)
        self._thread = None

    def _pump(self):
        raise NotImplementedError

    def _close(self):
        raise NotImplementedError
