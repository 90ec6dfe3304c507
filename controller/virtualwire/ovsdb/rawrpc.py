"""One OVSDB `transact`, encoded and decoded with the standard library's
JSON, on a connection of its own (ovs.stream: unix, tcp or ssl remotes).

Why not the IDL: the `ovs` package's pure-Python JSON parser reads a long
string value character by character: a 3 MB string took 146 s to parse
here (the C extension is not built), and the IDL parses every monitored
row it is sent, including the echo of what it wrote. The collector's
saved counters are such a value; through the IDL each save stalled the
controller for seconds and switches timed out (bench_collector, 10,000
wires). Waits go through ovs.poller, which is green under eventlet.
"""
import errno
import json
import os

import ovs.poller
import ovs.stream

from virtualwire.ovsdb.errors import DatabaseUnavailable as StoreError

_decoder = json.JSONDecoder()


def transact(remote, db, ops, timeout=10.0):
    """Run `ops` (OVSDB operations) on `db` at `remote`; returns the list
    of results, or raises StoreError (connection, or an operation's
    error)."""
    stream, failed = None, []
    # A cluster's members, in turn: any of them takes a transaction (a
    # follower hands it to the leader).
    for member in remote.split(','):
        err, stream = ovs.stream.Stream.open_block(
            ovs.stream.Stream.open(member), timeout=int(timeout * 1000))
        if not err:
            break
        failed.append('%s: %s' % (member, os.strerror(err)
                                  if isinstance(err, int) else err))
        stream = None
    if stream is None:
        raise StoreError('cannot connect to the intent database (%s)'
                         % '; '.join(failed))
    try:
        _send(stream, json.dumps({'method': 'transact', 'params': [db] + ops,
                                  'id': 0}, separators=(',', ':')).encode(),
              timeout)
        reply = _receive(stream, timeout)
    finally:
        stream.close()
    if reply.get('error') is not None:
        raise StoreError('transact on %s failed: %s' % (remote,
                                                         reply['error']))
    results = reply.get('result') or []
    for r in results:
        if isinstance(r, dict) and r.get('error'):
            raise StoreError('%s: %s' % (r['error'], r.get('details', '')))
    return results


def _wait(stream, timeout, sending):
    poller = ovs.poller.Poller()
    if sending:
        stream.send_wait(poller)
    else:
        stream.recv_wait(poller)
    poller.timer_wait(int(timeout * 1000))
    poller.block()


def _send(stream, data, timeout):
    while data:
        stream.run()
        n = stream.send(data)
        if n == -errno.EAGAIN:
            _wait(stream, timeout, True)
        elif n < 0:
            raise StoreError('sending to the database failed: %s'
                             % errno.errorcode.get(-n, n))
        else:
            data = data[n:]


def _receive(stream, timeout):
    """The reply (id 0); an echo request from the server is answered."""
    buf = b''
    while True:
        stream.run()
        err, chunk = stream.recv(1 << 20)
        if err == errno.EAGAIN:
            _wait(stream, timeout, False)
            continue
        if err or not chunk:
            raise StoreError('the database closed the connection (%s)'
                             % (errno.errorcode.get(err, err) if err
                                else 'EOF'))
        buf += chunk
        if not buf.rstrip().endswith(b'}'):
            continue                     # a message cannot end here
        try:
            text, msgs = buf.decode().strip(), []
            while text:
                msg, end = _decoder.raw_decode(text)
                msgs.append(msg)
                text = text[end:].lstrip()
        except ValueError:
            continue                     # incomplete: read more
        buf = b''
        for msg in msgs:
            if msg.get('method') == 'echo':
                _send(stream, json.dumps({'result': msg.get('params', []),
                                          'id': msg.get('id')}).encode(),
                      timeout)
            elif msg.get('id') == 0:
                return msg
