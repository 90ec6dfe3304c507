"""A small wrapper around the `ovs` Python IDL: one pump loop per database.

The IDL is not thread-safe, so every access goes through `lock`; the pump
runs `idl.run()` and sleeps in the IDL's poller (green under eventlet, a
real thread under the native hub).
"""
import logging
import time

import ovs.db.idl
import ovs.jsonrpc
import ovs.poller
import ovs.stream

from os_ken.lib import hub

from virtualwire.ovsdb import fast_json
from virtualwire.ovsdb.pump import Pump

LOG = logging.getLogger(__name__)
fast_json.install()


def fetch_schema(remote, db_name, timeout=5.0):
    """Read a database's schema from its server (so we work with whatever
    OVS version the host runs); of a cluster (remotes separated by
    commas), from the first member that answers."""
    errors = []
    for member in remote.split(','):
        try:
            return _fetch_schema(member, db_name, timeout)
        except ConnectionError as e:
            errors.append(str(e))
    raise ConnectionError('; '.join(errors))


def _fetch_schema(remote, db_name, timeout):
    err, stream = ovs.stream.Stream.open_block(
        ovs.stream.Stream.open(remote), timeout=int(timeout * 1000))
    if err:
        raise ConnectionError('cannot connect to %s: %s' % (remote,
                                                           os_strerror(err)))
    rpc = ovs.jsonrpc.Connection(stream)
    try:
        req = ovs.jsonrpc.Message.create_request('get_schema', [db_name])
        err, reply = rpc.transact_block(req)
        if err or reply.error:
            raise ConnectionError('get_schema %s from %s failed: %s' % (
                db_name, remote, err or reply.error))
        return reply.result
    finally:
        rpc.close()


def os_strerror(err):
    import os
    return os.strerror(err) if isinstance(err, int) and err > 0 else str(err)


class IdlClient(Pump):
    def __init__(self, remote, helper, on_change=None, name=None,
                 idl_class=ovs.db.idl.Idl):
        self.remote = remote
        self.name = name or remote
        self.lock = hub.Semaphore()
        self.idl = idl_class(remote, helper)
        self.on_change = on_change
        self._seqno = None
        self._stopped = False
        self._thread = None
        self._ran = hub.Event()      # set each time the pump ran the IDL
        self.observe = None          # observe(seconds) per transaction
        self.on_run = None           # on_run(self) after every IDL run

    def _close(self):
        self.idl.close()

    @property
    def ran(self):
        """An event the pump sets each time it ran the IDL (clear it
        under `lock`, then wait on it outside)."""
        return self._ran

    def peer_names(self):
        """The names of the connected server's verified certificate (an
        ssl: remote), else None. Call with `lock` held, right after the
        IDL delivered what this connection sent."""
        from virtualwire.tls import peer_names
        rpc = getattr(getattr(self.idl, '_session', None), 'rpc', None)
        stream = getattr(rpc, 'stream', None)
        return peer_names(getattr(stream, 'socket', None))

    def connected(self):
        """Whether the session is up now (not only ever was)."""
        session = getattr(self.idl, '_session', None)
        return bool(session is not None and session.is_connected())

    def wait_connected(self, timeout=10.0):
        waited = 0.0
        while waited < timeout:
            with self.lock:
                self.idl.run()
                if self.idl.has_ever_connected():
                    return True
            hub.sleep(0.02)
            waited += 0.02
        return False

    def _pump(self):
        while not self._stopped:
            changed = False
            with self.lock:
                if self._stopped:
                    return
                self.idl.run()
                self._ran.set()
                if self.idl.change_seqno != self._seqno:
                    self._seqno = self.idl.change_seqno
                    changed = True
                poller = ovs.poller.Poller()
                self.idl.wait(poller)
            if changed and self.on_change is not None:
                try:
                    self.on_change(self)
                except Exception:
                    LOG.exception('change handler for %s failed', self.name)
            if self.on_run is not None:     # e.g. a lock lost, not a change
                try:
                    self.on_run(self)
                except Exception:
                    LOG.exception('run handler for %s failed', self.name)
            poller.timer_wait(500)
            poller.block()

    def transact(self, build, timeout=10.0):
        """Run build(txn, idl) in a transaction and commit it, retrying on
        TRY_AGAIN. Returns the commit status."""
        t0 = time.monotonic()
        try:
            return self._transact(build, timeout)
        finally:
            if self.observe is not None:
                self.observe(time.monotonic() - t0)

    def _transact(self, build, timeout):
        deadline = 0.0
        while True:
            with self.lock:
                txn = ovs.db.idl.Transaction(self.idl)
                try:
                    build(txn, self.idl)
                except BaseException:
                    # A build that refuses (a domain error) leaves no open
                    # transaction behind: the next would assert.
                    txn.abort()
                    raise
                status = txn.commit()
                while status == txn.INCOMPLETE:
                    # The pump owns the socket wait (eventlet allows one
                    # waiter per fd): let it read the reply, then look again.
                    self._ran.clear()
                    self.lock.release()
                    try:
                        self._ran.wait(0.05)
                    finally:
                        self.lock.acquire()
                    self.idl.run()
                    status = txn.commit()
                if status != txn.TRY_AGAIN:
                    return status, txn
            deadline += 0.05
            if deadline > timeout:
                return status, txn
            hub.sleep(0.05)
