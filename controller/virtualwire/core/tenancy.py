"""Tenants (pure): who may see and wire what.

A tenant owns vNICs; the operator assigns them (`PUT /v1/vnics/ID/tenant`,
kept in the intent database's Ownership table, so an assignment made
before the guest is plugged holds, and a vNIC keeps its tenant when it
migrates). Hosts are not asked: a compromised hypervisor cannot move a
vNIC into another tenant by what it writes in its OVSDB.

A tenant's credential sees a vNIC only if the tenant owns it, and a wire
only if it owns both ends (a wire the operator made across tenants, to a
gateway or a shared service, is the operator's). Everything else answers
exactly as a nonexistent object would: the same status, the same message,
so a tenant cannot tell another tenant's vNIC or wire from one that does
not exist. What this does not hide: timing, and whether a tenant's own
vNIC is already wired (it is told so, without the wire).
"""
import re

from virtualwire.core import errors, ids

_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,63}')
# Fields of a migration a tenant is shown: not the hosts' timeline.
MIGRATION_VIEW = ('id', 'vm', 'vm_uuid', 'vnics', 'destination', 'state',
                  'started_at', 'ended_at')


def check_name(name):
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise errors.Invalid('tenant must be a name (letters, digits, '
                             '".", "_", "-"; up to 64), got %r' % (name,))
    return name


def parse_assignment(doc):
    """The tenant named by a `PUT /v1/vnics/ID/tenant` body."""
    if set(doc) != {'tenant'}:
        raise errors.Malformed('body must be {"tenant": name}')
    return check_name(doc['tenant'])


def no_wire(cid):
    """What a request about an unknown wire is told (the controller's
    own message: a hidden wire must read the same)."""
    return errors.NotFound('no wire with connector id %s'
                           % ids.fmt_connector(cid))


def no_vnic(vnic_id):
    return errors.NotFound('no vNIC %s is plugged on any host' % vnic_id)


class Scope:
    """What one tenant's credential may see: built per request from the
    ownership table (`owners`: vNIC id -> tenant)."""

    def __init__(self, tenant, owners):
        self.tenant = tenant
        self.owned = frozenset(v for v, t in owners.items() if t == tenant)

    def __repr__(self):
        return 'Scope(%s, %d vNICs)' % (self.tenant, len(self.owned))

    def sees_vnic(self, vnic_id):
        return vnic_id in self.owned

    def sees_wire(self, a, b):
        return a in self.owned and b in self.owned

    def check_vnic(self, vnic_id):
        if not self.sees_vnic(vnic_id):
            raise no_vnic(vnic_id)

    def check_wire(self, wire):
        if not self.sees_wire(wire.end_a, wire.end_b):
            raise no_wire(wire.connector_id)

    def check_ends(self, a, b):
        """Both ends of a wire it asks for must be its own: another's
        reads as one that does not exist."""
        for v in (a, b):
            if not self.sees_vnic(v):
                raise errors.NotFound('no vNIC %s in tenant %s'
                                      % (v, self.tenant))

    def taken(self, vnic, wire_ends):
        """The Conflict for its own vNIC already wired: the wire named only
        if it can see it."""
        if wire_ends is not None and self.sees_wire(*wire_ends[1:]):
            return errors.Conflict('vNIC %s is already wired (connector %s)'
                                   % (vnic, ids.fmt_connector(
                                       wire_ends[0])))
        return errors.Conflict('vNIC %s is already wired' % vnic)

    # -- filters over the controller's views --------------------------------
    def vnics(self, views):
        return [v for v in views if v['id'] in self.owned]

    def wires(self, views, a='a', b='b'):
        return [w for w in views if self.sees_wire(w[a], w[b])]

    def migrations(self, views):
        return [{k: m[k] for k in MIGRATION_VIEW if k in m} for m in views
                if m.get('vnics') and all(v in self.owned
                                          for v in m['vnics'])]

    def metrics(self, doc):
        """The metrics view with only its wires and switches (no hosts,
        links, migrations or collector figures: those are the cloud's;
        nor where its switches run)."""
        return {'wires': self.wires(doc['wires'], 'end_a', 'end_b'),
                'switches': [dict(s, host=None)
                             for s in doc.get('switches', [])
                             if s['tenant'] == self.tenant]}


def tenants_view(owners, creds):
    """GET /v1/tenants: every tenant named by an assignment or a
    credential, with its vNIC count and credential roles."""
    out: dict = {}
    for vnic, t in owners.items():
        out.setdefault(t, {'name': t, 'vnics': 0, 'credentials': []})
        out[t]['vnics'] += 1
    for c in creds:
        if c['role'] in ('tenant', 'tenant-reader'):
            out.setdefault(c['name'], {'name': c['name'], 'vnics': 0,
                                       'credentials': []})
            out[c['name']]['credentials'].append(c['role'])
    return [out[k] for k in sorted(out)]
