"""Credentials for callers that are not operators, each scoped to what
its role needs (pure: the REST edge asks `refusal`).

  extender NAME    POST /v1/extenders/NAME/report and .../rotate-key
  operator NAME    everything the root token may (an operator by name,
                   so the audit log says who; schema 1.14.0)
  hypervisor NAME  POST /v1/migrations with destination NAME, and
                   POST /v1/migrations/UUID/released, POST
                   /v1/migrations/departures (its agent) and PUT
                   /v1/guests/UUID with host NAME (the libvirt hook on NAME)
  orchestrator NAME  PUT/DELETE /v1/vnics/VNIC/placement and GET of vNICs
                   (the cloud's word on where each vNIC runs)
  reader NAME      every GET (Prometheus, dashboards, vwctl to look)
  tenant NAME      tenant NAME's vNICs, wires and topologies: list,
                   connect, disconnect, apply, destroy, stats, metrics
                   (`core.tenancy` scopes them)
  tenant-reader NAME  the same, GETs only (the tenant's Prometheus and
                   dashboard)

What this protects against: a compromised extender or hypervisor (or its
token file read by someone) can no longer create or delete wires, read
the tenants' topology, speak for another extender (its public key
and endpoints steer other extenders' links) or announce migrations to
another host; a monitoring system cannot change anything. Revoking one
credential leaves every other caller working. What it does not: the host
can still do what its role allows (a hypervisor may announce migrations
to itself, bounded by `control.migrations`: only a guest's own vNICs, none
moving under another guest's migration, at most MAX_PER_DESTINATION in
progress, each expiring), and the operator's token can do everything.
Only a SHA-256 of each token is stored: a copy of the database does not
hand out tokens. A credential may expire (`expires_in` seconds when
issued): after that it is refused like one revoked.
"""
import hashlib
import re
import secrets

from virtualwire.core import errors

ROLES = ('extender', 'hypervisor', 'operator', 'orchestrator', 'reader',
         'tenant', 'tenant-reader')
MAX_LIFETIME = 10 * 365 * 86400     # s: `expires_in` at most ten years
TENANT_ROLES = ('tenant', 'tenant-reader')
# What a tenant's credential may call at all (`core.tenancy` then hides
# what is not its own); everything else is the cloud's.
TENANT_READS = frozenset({'list_vnics', 'show_vnic', 'list_wires',
                          'show_wire', 'wire_stats', 'all_stats', 'metrics',
                          'list_migrations', 'list_topologies',
                          'show_topology', 'topology_graph', 'list_guests',
                          'list_switches', 'show_switch'})
TENANT_WRITES = frozenset({'connect', 'disconnect', 'batch',
                           'apply_topology', 'destroy_topology',
                           'create_switch', 'delete_switch',
                           'split_switch'})
_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,63}')


def new_token():
    return secrets.token_urlsafe(32)


def digest(token):
    return hashlib.sha256(token.encode()).hexdigest()


def parse_request(doc):
    """(role, name, expires_in seconds or None) of a `POST
    /v1/credentials` body, or Malformed / Invalid saying what is wrong."""
    unknown = sorted(set(doc) - {'role', 'name', 'expires_in'})
    if unknown:
        raise errors.Malformed('unknown field(s): %s' % ', '.join(unknown))
    for k in ('role', 'name'):
        if k not in doc:
            raise errors.Malformed('missing field: %s' % k)
    role, name = check(doc['role'], doc['name'])
    return role, name, check_lifetime(doc['expires_in']) \
        if 'expires_in' in doc else None


def check_lifetime(seconds):
    """Whole seconds, 1 to MAX_LIFETIME (leave the field out for no
    expiry)."""
    if isinstance(seconds, bool) or not isinstance(seconds, int) or \
            not 0 < seconds <= MAX_LIFETIME:
        raise errors.Invalid('expires_in must be whole seconds from 1 to %d '
                             '(ten years), got %r' % (MAX_LIFETIME, seconds))
    return seconds


def expired(expires_at, now):
    """Has a credential with this expiry (Unix time, or None) run out?"""
    return expires_at is not None and now >= expires_at


def check(role, name):
    if role not in ROLES:
        raise errors.Invalid('role must be one of %s, got %r'
                             % (', '.join(ROLES), role))
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise errors.Invalid('name must be a host or tenant name (letters, '
                             'digits, ".", "_", "-"; up to 64), got %r'
                             % (name,))
    return role, name


def refusal(role, name, method, action, match, body):
    """None if a credential (role, name) may make this call, else why not.
    `body` is the parsed JSON body (or None)."""
    if role == 'operator':
        return None
    if role == 'reader':
        if method == 'GET' and action not in ('list_credentials', 'audit',
                                              'list_revocations'):
            return None
        return ('reader %s may only read (GET), not the credentials, the '
                'revocations or the audit log' % name)
    if role in TENANT_ROLES:
        if action in TENANT_READS and method == 'GET':
            return None
        if role == 'tenant' and action in TENANT_WRITES:
            return None
        return ('this token is %s %s\'s: it may only %s its own vNICs, '
                'wires and switches' % (role, name, 'read'
                                        if role == 'tenant-reader' else
                                        'list, wire and disconnect'))
    if role == 'extender':
        if action in ('extender_report', 'rotate_key') and \
                match.get('name') == name:
            return None
        return ('this token is extender %s\'s: it may only report for %s '
                'and rotate its key' % (name, name))
    if role == 'orchestrator':
        if action in ('place_vnic', 'unplace_vnic') or (
                method == 'GET' and action in ('list_vnics', 'show_vnic')):
            return None
        return ('this token is orchestrator %s\'s: it may only place '
                'vNICs and read them' % name)
    if role == 'hypervisor':
        body = body if isinstance(body, dict) else {}
        if action == 'announce_migration' and \
                body.get('destination') == name:
            return None
        if action in ('migration_released', 'migration_stopped',
                      'report_guest', 'report_departure') and \
                body.get('host') == name:
            return None
        return ('this token is hypervisor %s\'s: it may only announce '
                'migrations to %s, say that a guest left (is leaving, or '
                'stopped to leave) %s and report the guests on %s'
                % (name, name, name, name))
    return 'unknown role %s' % role
