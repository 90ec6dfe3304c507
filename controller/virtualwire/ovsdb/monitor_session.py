"""One OVSDB `monitor` (RFC 7047) over a reconnecting JSON-RPC session:
what `host_monitor` and `store.wire_replica` share.

The session (reconnection with back-off, echo, unix/tcp/ssl streams with
the process-wide certificates) is the `ovs` package's; this asks for the
monitor once per connection and hands its reply (every row, anew) and
each `update` notification to the caller's store. Not thread-safe: its
owner calls it under its own lock, from its own pump.
"""
import logging
from typing import Any

import ovs.jsonrpc

LOG = logging.getLogger(__name__)


class MonitorSession:
    def __init__(self, db, monitor_id, requests, name):
        self.db, self.monitor_id = db, monitor_id
        self.requests = requests        # {table: {'columns': [...]}}
        self.name = name
        self.remote = None
        self.session: Any = None        # ovs.jsonrpc.Session
        self._seqno = None
        self._request_id = None

    def open(self, remote, backoff_ms=None):
        self.close()
        self.remote, self._seqno = remote, None
        self.session = ovs.jsonrpc.Session.open(remote)
        if backoff_ms is not None:
            self.session.reconnect.set_backoff(backoff_ms, backoff_ms)

    def close(self):
        if self.session is not None:
            self.session.close()
            self.session = None

    def run(self, on_reply, on_update, burst=100):
        """Connect or ask as needed, then read up to `burst` messages:
        on_reply(result) for the monitor's reply, on_update(updates) for
        each notification. True if either was called."""
        if self.session is None:
            return False
        self.session.run()
        # The seqno moves when the session starts to connect or drops:
        # ask once per connection, once it is up.
        seqno = self.session.get_seqno()
        if seqno != self._seqno and self.session.is_connected():
            self._seqno = seqno
            msg = ovs.jsonrpc.Message.create_request('monitor', [
                self.db, self.monitor_id, self.requests])
            self._request_id = msg.id
            self.session.send(msg)
        changed = False
        for _ in range(burst):
            msg = self.session.recv()
            if msg is None:
                break
            if msg.type == msg.T_REPLY and msg.id == self._request_id:
                on_reply(msg.result)
                changed = True
            elif msg.type == msg.T_ERROR and msg.id == self._request_id:
                LOG.warning('%s refused the monitor: %s', self.name,
                            msg.error)
            elif msg.type == msg.T_NOTIFY and msg.method == 'update' and \
                    len(msg.params) == 2 and \
                    msg.params[0] == self.monitor_id:
                on_update(msg.params[1])
                changed = True
        return changed

    def wait(self, poller):
        if self.session is not None:
            self.session.wait(poller)
            self.session.recv_wait(poller)

    def socket(self):
        """The connection's socket (for its peer's certificate), or None."""
        stream = getattr(getattr(self.session, 'rpc', None), 'stream', None)
        return getattr(stream, 'socket', None)
