"""When a guest's QEMU read its tap, sampled from the host kernel's count.

A tap's transmit counter moves when QEMU *reads* a frame (the kernel
counts it in tun_put_user, not when the switch hands it over), so its
timeline says when a guest took what the network gave it: the last read
on a migration's source (STOP), the first on its destination (RESUME).
A sampler in the host's namespace reads the counter from sysfs every
SAMPLE_S and prints each change with its time (the same clock as QEMU's
QMP events on this machine).

    with TapReads(host, tap) as reads: ...
    reads.changes       # [(time, count)]: the first when sampling began,
                        # then each time the count moved
    reads.first_after(t), reads.last_before(t)

A tap not there yet is sampled once it comes (a migration's destination
tap appears while the guest is copied): TapReads(host, 'vnet', prefix=True)
follows every tap whose name starts so, `reads.of(tap)` after.
"""
import subprocess
import sys
import threading
from typing import Dict, List, Optional, Tuple

SAMPLE_S = 0.0002

# Run inside the namespace: its own sysfs shows its own taps.
_SAMPLER = r'''
import os, sys, time
name, step, prefix = sys.argv[1], float(sys.argv[2]), sys.argv[3] == '1'
last, listed, names = {}, 0.0, [name]
print('ready', flush=True)
while True:
    now = time.time()
    if prefix and now - listed > 0.01:     # taps that came since
        names = [n for n in os.listdir('/sys/class/net')
                 if n.startswith(name)]
        listed = now
    for n in names:
        try:
            with open('/sys/class/net/%s/statistics/tx_packets' % n) as f:
                c = int(f.read())
        except (OSError, ValueError):
            if not prefix:
                sys.exit(0)         # the tap went (its QEMU quit)
            continue
        if c != last.get(n):
            print('%.6f %s %d' % (time.time(), n, c), flush=True)
            last[n] = c
    time.sleep(step)
'''


class TapReads:
    def __init__(self, host, tap, sample_s=SAMPLE_S, prefix=False):
        self.host, self.tap, self.sample_s = host, tap, sample_s
        self.prefix = prefix
        self.by_tap: Dict[str, List[Tuple[float, int]]] = {}
        self._proc: Optional[subprocess.Popen] = None

    @property
    def changes(self) -> List[Tuple[float, int]]:
        return self.by_tap.get(self.tap, [])

    def of(self, tap) -> 'TapReads':
        """The readings of one tap (of those a prefix followed)."""
        one = TapReads(self.host, tap)
        one.by_tap = {tap: self.by_tap.get(tap, [])}
        return one

    def __enter__(self):
        self._proc = subprocess.Popen(
            ['ip', 'netns', 'exec', self.host.ns, sys.executable, '-c',
             _SAMPLER, self.tap, str(self.sample_s),
             '1' if self.prefix else '0'],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._proc.stdout.readline()           # 'ready': it is sampling
        # Drained as it prints: a full pipe would stop the sampler (at
        # 1 kHz it fills in seconds), and its timeline with it.
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        return self

    def _drain(self):
        for line in self._proc.stdout:
            self._take(line)

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self._proc is None:
            return
        self._proc.terminate()
        self._proc.wait(timeout=10)
        self._reader.join(timeout=10)
        self._proc = None

    def _take(self, line):
        t, tap, n = line.split()
        self.by_tap.setdefault(tap, []).append((float(t), int(n)))

    def first_after(self, t) -> Optional[Tuple[float, int]]:
        """The first read after time t: (when, count after it)."""
        return next(((w, n) for w, n in self.changes[1:] if w > t), None)

    def last_before(self, t) -> Optional[Tuple[float, int]]:
        """The last read at or before time t."""
        moved = [(w, n) for w, n in self.changes[1:] if w <= t]
        return moved[-1] if moved else None

    def count_at(self, t) -> Optional[int]:
        at = [n for w, n in self.changes if w <= t]
        return at[-1] if at else None
