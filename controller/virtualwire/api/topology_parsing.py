"""Parsing tenants' topology files without stalling the controller.

A 1 MiB file cost 6.5 s of CPU to parse (PyYAML in Python, then the JSON
schema), in the REST server's green thread: under eventlet that is the
control loop's thread, so one tenant's dry run froze every switch's
programming for seconds, as often as it was sent. Now:

- YAML is scanned by libyaml (PyYAML's C loader; measured 7.0 -> 4.0 s
  for 1 MiB, the rest is the schema check);
- under eventlet (the services' hub) a file over INLINE bytes is parsed
  in a process of its own (`topology_worker`), waited for green: the
  loop keeps its core. A parse in an OS thread of this process was
  measured first and was not enough: the GIL, handed back only every
  5 ms, made each API answer wait up to 0.8 s during a 1 MiB parse. A
  worker gets at most CPU_LIMIT seconds of CPU. Under the native hub
  (REST handlers are threads) the parse runs in the handler's thread;
- at most PARALLEL parses run at once (others wait their turn, then are
  told 429): a flood of big files costs bounded CPU;
- a stored topology's parse is kept (by its text's digest, LRU), so a
  list does not parse every file again.

Per tenant, LIMITS bound how many topologies and how much source text are
stored (`check_quota`).
"""
import collections
import hashlib
import os
import threading

from virtualwire.core import errors, topology_file

PARALLEL = 2
WAIT = 30.0                 # s a parse waits for a turn before 429
CACHE = 256                 # parsed files kept
CACHE_BYTES = 16 << 20      # ... and their source text at most (a parsed
#                             1 MiB file holds ~3 MB: 256 of them were not
#                             a bound)
MAX_TOPOLOGIES = 64         # per tenant
MAX_TENANT_SOURCE = 8 << 20  # bytes of source text stored per tenant
CPU_LIMIT = 30              # s of CPU a worker may spend
INLINE = 32 << 10           # bytes parsed in this process (~0.1 s)


class TopologyParser:
    def __init__(self, offload=None):
        self._offload = offload or _offloader()
        self._turns = threading.BoundedSemaphore(PARALLEL)
        self._cache: 'collections.OrderedDict[tuple, object]' = \
            collections.OrderedDict()
        self._lock = threading.Lock()
        self._bytes = 0             # source text of the files kept

    def parse(self, text, source='topology'):
        """topology_file.parse(text, source), off the loop and cached;
        raises what it raises, or TooMany if no turn came."""
        if not isinstance(text, str):
            return topology_file.parse(text, source)    # says why
        key = (hashlib.sha256(text.encode()).digest(), source, len(text))
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        if not self._turns.acquire(timeout=WAIT):
            raise errors.TooMany('too many topology files being parsed; '
                                 'try again shortly')
        try:
            tf = self._offload(topology_file.parse, text, source)
        finally:
            self._turns.release()
        with self._lock:
            if key not in self._cache:
                self._cache[key] = tf
                self._bytes += len(text)
            while len(self._cache) > CACHE or self._bytes > CACHE_BYTES:
                (_digest, _source, size), _tf = self._cache.popitem(
                    last=False)
                self._bytes -= size
        return tf


def check_quota(records, tenant, name, source):
    """Refuse storing `source` as `tenant`'s topology `name` if the
    tenant would then hold more than MAX_TOPOLOGIES or MAX_TENANT_SOURCE
    bytes of files (`records`: the tenant's stored ones)."""
    others = [r for r in records if r.name != name]
    if len(others) + 1 > MAX_TOPOLOGIES:
        raise errors.TooMany('tenant %s holds %d topologies: at most %d'
                             % (tenant or '(operator)', len(others),
                                MAX_TOPOLOGIES))
    size = sum(len(r.source) for r in others) + len(source)
    if size > MAX_TENANT_SOURCE:
        raise errors.TooLarge('tenant %s\'s topology files would total %d '
                              'bytes: at most %d' % (tenant or '(operator)',
                                                     size, MAX_TENANT_SOURCE))


def _offloader():
    """Files up to INLINE bytes are parsed here (at most ~0.1 s); bigger
    ones in a process of their own (`topology_worker`) under eventlet."""
    from os_ken.lib import hub
    if getattr(hub, 'HUB_TYPE', 'native') != 'eventlet':
        return lambda fn, *args: fn(*args)

    def offload(fn, text, source):
        if fn is not topology_file.parse or len(text) <= INLINE:
            return fn(text, source)
        return _in_worker(text, source)
    return offload


def _in_worker(text, source):
    import pickle
    import subprocess           # eventlet's, under eventlet: waits green
    import sys
    p = subprocess.Popen([sys.executable, '-m',
                          'virtualwire.api.topology_worker'],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=lambda:
                         os.nice(10))
    out, err = p.communicate(pickle.dumps((text, source)))
    if p.returncode != 0:
        raise errors.Unavailable('the topology parser failed (%s)' % (
            'over its %d s of CPU' % CPU_LIMIT if p.returncode < 0 else
            err.decode(errors='replace').strip()[-300:]))
    kind, value = pickle.loads(out)
    if kind == 'error':
        raise value
    return value
