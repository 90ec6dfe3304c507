"""Tenant isolation, tried as an attacker would: every operation of the
OpenAPI document, once naming another tenant's objects and once naming
objects that do not exist. The two answers must be the same (status and
body, the names swapped), and the answers about nonexistent objects must
not mention any of the other tenant's objects. Used by the unit tests
(fake fabric) and the integration tests (the lab, over HTTPS).

`send(method, path, body) -> (status, text)` makes one request with the
attacker's credential."""
import re
import time
import uuid

from virtualwire.api.openapi import openapi_document
from virtualwire.core import ids

GHOST_WIRE = 0x7A11ED00        # a connector id nobody holds (checked)


class Objects:
    """Names for one side: the victim's real objects or their ghosts."""

    def __init__(self, tenant, vnics, wire, vm_uuid, host,
                 topology='no-topology', switch='no-switch'):
        self.tenant, self.vnics, self.wire = tenant, list(vnics), wire
        self.vm_uuid, self.host, self.topology = vm_uuid, host, topology
        self.switch = switch

    @classmethod
    def ghosts(cls, victim):
        return cls('ghost-tenant', ['ghost-vnic-%d' % i
                                    for i in range(len(victim.vnics))],
                   GHOST_WIRE, str(uuid.UUID(int=0x5EED)), 'ghost-host',
                   'ghost-topology', 'ghost-switch')

    def words(self):
        """What an answer about nothing must not mention (the host is
        the cloud's, not the tenant's: a tenant's own vNICs show theirs)."""
        return [self.tenant, self.vm_uuid, ids.fmt_connector(self.wire),
                '%x' % self.wire, self.topology, self.switch] + self.vnics


def _fill(path, objs):
    values = {'vnic_id': objs.vnics[0], 'wire_id': str(objs.wire),
              'name': objs.host, 'role': 'tenant', 'vm_uuid': objs.vm_uuid,
              'a': objs.host, 'b': objs.host}
    if path.startswith('/v1/credentials/'):
        values['name'] = objs.tenant
    if path.startswith('/v1/topologies/'):
        values['name'] = objs.topology
    if path.startswith('/v1/switches/'):
        values['name'] = objs.switch
    return re.sub(r'\{(\w+)\}', lambda m: values[m.group(1)], path)


def _bodies(method, path, objs, own_free):
    """Bodies that name the objects (several for a connect)."""
    if method == 'post' and path == '/v1/wires':
        return [{'a': own_free, 'b': objs.vnics[0]},
                {'a': objs.vnics[0], 'b': objs.vnics[1]},
                {'a': own_free, 'b': 'sw:%s/p1' % objs.switch}]
    if method == 'post' and path == '/v1/switches':
        # Its name taken, in its tenant: each reads as unknown.
        return [{'name': objs.switch, 'ports': 1, 'tenant': objs.tenant}]
    if method == 'post' and path == '/v1/wires/batch':
        return [{'create': [{'a': own_free, 'b': objs.vnics[0]}]},
                {'delete': [objs.wire]}]
    if method == 'put' and path.startswith('/v1/topologies/'):
        # Its topology's name, its vNICs, its VM: each reads as unknown.
        head = 'name: %s\nnodes:\n' % objs.topology
        return [{'source': head + '  x: {nics: {eth0: {vnic: %s}}}\n  y: '
                 '{nics: {eth0: {vnic: %s}}}\nlinks:\n  - endpoints: '
                 '[x:eth0, y:eth0]\n' % tuple(objs.vnics[:2])},
                {'source': head + '  x: {vm: %s}\n' % objs.vm_uuid,
                 'dry_run': True}]
    if method == 'put':
        return [{'tenant': 'attacker-claims'}]
    if path == '/v1/migrations' and method == 'post':
        return [{'vm': 'g', 'vm_uuid': objs.vm_uuid, 'vnics': objs.vnics,
                 'destination': objs.host}]
    if path == '/v1/credentials' and method == 'post':
        return [{'role': 'tenant', 'name': objs.tenant}]
    if path.startswith('/v1/migrations/'):
        return [{'host': objs.host}]
    if path == '/v1/extender-links' and method == 'post':
        return [{'a': objs.host, 'b': objs.host + 'x'}]
    if method in ('post', 'put'):
        return [{}]
    return [None]


def requests(victim, ghost, own_free):
    """(label, victim's request, ghost's request) for every operation."""
    doc = openapi_document()
    for path, ops in sorted(doc['paths'].items()):
        for method in ('get', 'post', 'put', 'delete'):
            if method not in ops:
                continue
            for vb, gb in zip(_bodies(method, path, victim, own_free),
                              _bodies(method, path, ghost, own_free)):
                yield ('%s %s' % (method.upper(), path),
                       (method.upper(), _fill(path, victim), vb),
                       (method.upper(), _fill(path, ghost), gb))


def _swap(text, victim, ghost):
    """The answer with either side's names replaced by what they name."""
    for name, what in sorted(_pairs(victim) + _pairs(ghost),
                             key=lambda p: len(p[0]), reverse=True):
        text = text.replace(name, '<%s>' % what)
    return text


def _pairs(objs):
    named = [(objs.tenant, 'tenant'), (objs.vm_uuid, 'vm'),
             (objs.topology, 'topology'), (objs.switch, 'switch'),
             (objs.host, 'host'), (ids.fmt_connector(objs.wire), 'wire'),
             (str(objs.wire), 'wire'), ('%x' % objs.wire, 'wire')]
    named += [(v, 'vnic%d' % i) for i, v in enumerate(objs.vnics)]
    return named


def probe(send, victim, own_free):
    """Every operation tried both ways; returns a list of what differed or
    leaked (empty when isolated) and the answers seen, by label."""
    ghost = Objects.ghosts(victim)
    send = _patient(send)
    problems: list = []
    seen: dict = {}
    for label, real_req, ghost_req in requests(victim, ghost, own_free):
        real = send(*real_req)
        fake = send(*ghost_req)
        seen.setdefault(label, []).append((real[0], fake[0]))
        # A request that names nothing (GET /v1/stats) is the same request
        # twice: its answers may differ only as live counters move, and
        # what matters is that neither mentions the victim (below).
        same = real_req == ghost_req
        if real[0] != fake[0] or not same and _swap(
                real[1], victim, ghost) != _swap(fake[1], victim, ghost):
            problems.append('%s: %s %r vs nonexistent %s %r'
                            % (label, real[0], real[1][:300], fake[0],
                               fake[1][:300]))
        leaked = [w for w in victim.words() if w in fake[1] or
                  same and w in real[1]]
        if leaked:
            problems.append('%s: the answer about nothing names %s'
                            % (label, leaked))
    return problems, seen


def _patient(send):
    """`send`, as a good client: told it is over its credential's rate
    (api.rate_limit), it waits and asks again, so the answers compared
    are the operations', never the limiter's."""
    def go(*req):
        for _ in range(60):
            got = send(*req)
            if got[0] != 429 or 'requests a second' not in got[1]:
                return got
            time.sleep(1.0)
        return got
    return go
