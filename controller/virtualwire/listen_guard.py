"""What every listener (OpenFlow, REST, the collector's) needs before a
peer has proven who it is, so that no unauthenticated peer can stop it:

- `GuardedListener.accept()` survives running out of file descriptors
  (EMFILE and kin): it sheds the waiting connection with a spare
  descriptor kept for that (a client sees a close, not a hang) and keeps
  serving. Uncaught, one such error once stopped the OpenFlow listener for
  good.
- `Deadline` closes a connection whose TLS handshake or request head has
  not *finished* in time. A timeout per read is not that: one byte every
  9 s held a handshake open forever.
- `Limits` caps connections held per client address and in all, closing
  more at once rather than queueing them; when all places are taken, a
  newcomer takes the place of the oldest connection that has proven
  nothing yet, so a flood cannot keep a real client out. `budget` sizes
  the caps from the process's file limit so that a flood on one listener
  leaves descriptors for switches' sessions and the host databases.
- `Refusals` counts every refusal by listener and reason for /metrics.

What this does not stop: a flood that opens connections faster than a
real client finishes its handshake (it evicts that client too; at the
lab's measured rate it cannot), and a peer that completes its handshake
within the deadline: what it may then do is admission's and the
credentials' job.
"""
import _socket
import collections
import errno
import logging
import os
import resource
import threading
import time

LOG = logging.getLogger(__name__)

# A TLS handshake and an HTTP request head each must finish within this
# (seconds from the first byte awaited, not per read).
DEADLINE = 10.0
PER_CLIENT = 64
# Descriptor errors accept() survives (the peer is shed, the loop goes on).
FD_ERRNOS = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS,
                       errno.ENOMEM))


class Refusals:
    """Connections refused before authentication, by (listener, reason):
    over_cap, evicted, deadline, no_descriptor, handshake. One per
    process."""

    def __init__(self):
        self.counts: collections.Counter = collections.Counter()
        self._lock = threading.Lock()
        self._logged = {}

    def count(self, listener, reason, detail=''):
        with self._lock:
            self.counts[(listener, reason)] += 1
            now = time.monotonic()
            # A flood is one line per listener and reason every 10 s.
            if now - self._logged.get((listener, reason), -60.0) < 10.0:
                return
            self._logged[(listener, reason)] = now
            n = self.counts[(listener, reason)]
        LOG.warning('%s: connection refused (%s%s); %d so far', listener,
                    reason, ': ' + detail if detail else '', n)

    def families(self):
        from prometheus_client.core import CounterMetricFamily
        fam = CounterMetricFamily(
            'virtualwire_listener_refused',
            'Connections a listener closed before the peer proved who it '
            'is: over_cap (client or total limit), deadline (handshake or '
            'request head not finished in time), no_descriptor (the '
            "process's file limit), handshake (TLS refused)",
            labels=['listener', 'reason'])
        with self._lock:
            for (listener, reason), n in sorted(self.counts.items()):
                fam.add_metric([listener, reason], n)
        yield fam

    def collect(self):          # a prometheus_client collector
        return self.families()

    def describe(self):
        return []


class Limits:
    """Connections held per client address and in all; one per listener.

    When all places are taken, a new connection takes the place of the
    oldest one that has not yet proven anything (no finished handshake or
    request head): that one is cut. So a flood from many addresses cannot
    keep a real client out; it only shortens its own connections' lives.
    A client address over its own limit is refused outright."""

    def __init__(self, per_client=PER_CLIENT, total=4096):
        self.per_client, self.total = per_client, total
        self.active: collections.Counter = collections.Counter()
        self.held = 0           # sum of `active`, kept as it changes
        self.refused = 0
        self.evicted = 0
        self._unproven: collections.OrderedDict = collections.OrderedDict()
        self._evicted: set = set()
        self._lock = threading.Lock()
        self.on_evict = None    # called for each connection cut for room

    def take(self, addr, conn=None):
        """The client's key if it may have one more connection, else None.
        `conn` is evictable until `proven(conn)`."""
        ip = addr[0] if isinstance(addr, tuple) else str(addr)
        victim = None
        with self._lock:
            if self.active[ip] >= self.per_client:
                self.refused += 1
                return None
            if self.held >= self.total:
                if not self._unproven:
                    self.refused += 1
                    return None
                victim = self._unproven.popitem(last=False)[1]
                self._evicted.add(id(victim))
                self.evicted += 1
            self.active[ip] += 1
            self.held += 1
            if conn is not None:
                self._unproven[id(conn)] = conn
        if victim is not None:
            cut(victim)         # its owner ends and gives its place back
            if self.on_evict is not None:
                self.on_evict()
        return ip

    def proven(self, conn):
        """`conn` finished its handshake or head: no longer evictable."""
        with self._lock:
            self._unproven.pop(id(conn), None)

    def give(self, ip, conn=None):
        """The place back; True if `conn` was cut to make room (its end
        is no failure of its own: counted as evicted, not again)."""
        with self._lock:
            evicted = False
            if conn is not None:
                self._unproven.pop(id(conn), None)
                evicted = id(conn) in self._evicted
                self._evicted.discard(id(conn))
            self.held -= 1
            self.active[ip] -= 1
            if self.active[ip] <= 0:
                del self.active[ip]
            return evicted


def raise_file_limit(ceiling=1 << 20):
    """The soft descriptor limit raised to the hard one (systemd's default
    soft limit is 1,024); returns the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else ceiling
    want = min(want, ceiling)
    if want > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError) as e:
            LOG.warning('cannot raise the file limit to %d: %s', want, e)
    return soft


def budget(nofile=None):
    """Caps from the file limit: REST may hold a quarter of it (at most
    4,096) and unauthenticated OpenFlow handshakes an eighth (at most
    1,024), so that at least 5/8 stay for switches' sessions, the host
    databases and files whatever a flood does."""
    if nofile is None:
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return {'rest': max(16, min(4096, nofile // 4)),
            'openflow_handshakes': max(16, min(1024, nofile // 8))}


def cut(conn):
    """Shut a connection down under whoever reads it (that reader sees
    EOF and ends): works on plain, TLS and eventlet sockets alike."""
    raw = conn if isinstance(conn, _socket.socket) else \
        getattr(conn, 'fd', None)
    if isinstance(raw, _socket.socket):
        try:
            _socket.socket.shutdown(raw, _socket.SHUT_RDWR)
        except OSError:
            pass


class Deadline:
    """Cuts `conn` unless `done()` is called within `seconds` of `since`
    (a time.monotonic() reading: when the connection was accepted), or
    of now. From the accept, not from when its handler first ran: under
    a flood the handlers of 1,000 connections accepted at once start
    seconds later, and CI saw drip-fed handshakes live 13.5 s against a
    10 s deadline."""

    def __init__(self, hub, seconds, conn, on_expiry=None, since=None):
        self.expired = False
        self._conn, self._on_expiry = conn, on_expiry
        if since is not None:
            seconds = max(0.0, seconds - (time.monotonic() - since))
        self._timer = hub.spawn_after(seconds, self._expire)

    def _expire(self):
        if self._conn is None:
            return
        self.expired = True
        if self._on_expiry is not None:
            self._on_expiry()
        cut(self._conn)

    def done(self):
        if self._conn is not None:
            self._conn = None
            self._timer.cancel()


def stamp(conn):
    """Mark when `conn` was accepted, for its first deadline (`since`)."""
    try:
        conn._vw_accepted = time.monotonic()
    except AttributeError:      # a socket type that takes no attribute
        pass


def accepted_at(conn):
    """When `conn` was accepted (once: None after the first call, so a
    kept-alive connection's later requests count from when they are
    awaited)."""
    at = getattr(conn, '_vw_accepted', None)
    if at is not None:
        conn._vw_accepted = None
    return at


class GuardedListener:
    """A listening socket whose accept() never raises for lack of
    descriptors. `wrap(conn)` (e.g. TLS without handshaking) is applied
    to each accepted connection. Other attributes are the socket's."""

    def __init__(self, sock, name, refusals, hub, wrap=None):
        self._sock, self._name, self._refusals = sock, name, refusals
        self._hub, self._wrap = hub, wrap
        self._spare = _spare()

    def accept(self):
        while True:
            try:
                conn, addr = self._sock.accept()
            except OSError as e:
                if e.errno not in FD_ERRNOS:
                    raise
                self._refusals.count(self._name, 'no_descriptor',
                                     os.strerror(e.errno))
                self._shed()
                continue
            conn = self._wrap(conn) if self._wrap else conn
            stamp(conn)
            return conn, addr

    def _shed(self):
        """Free the spare descriptor, accept the waiting peer with it and
        close it (it sees a close, the backlog moves), take it back. With
        no spare, wait a moment: descriptors free as connections end."""
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None
            try:
                self._sock.accept()[0].close()
            except OSError:
                pass
            self._spare = _spare()
        self._hub.sleep(0.05)

    def __getattr__(self, name):
        return getattr(self._sock, name)


def _spare():
    try:
        return os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return None
