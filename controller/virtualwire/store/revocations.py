"""The revocation list in the intent database (schema 1.13.0): the
digest of every credential taken back (an API token revoked or replaced,
a join token spent or replaced; host certificates by fingerprint next).

Deleting a credential's row is what stops it; this list is what keeps it
stopped when an older copy of the database comes back: a restore
(`store.intent_db_restore`) carries the list over and drops every row it
names, and every check refuses a listed digest even if its row were
there. What it does not do: a restore from a backup alone, with the
cluster and every newer backup lost, knows only the backup's list.

Called inside the stores' own transactions (`build(txn, idl)`), so a
credential goes and its revocation is recorded in one commit. Against a
database older than 1.13.0 (mid-upgrade) there is no list: the row is
still deleted, as before."""

import time

from virtualwire.core import errors
from virtualwire.core.revocation import certificate_digest
from virtualwire.store import txn as store_txn

TABLE = 'Revocation'


def record(txn, idl, kind, name, digest, now, reason, expires_at=None):
    """List `digest` (once) as revoked. `expires_at`: after it, the
    credential is refused anyway (a join token), so the entry may go."""
    if TABLE not in idl.tables:
        return
    for r in idl.tables[TABLE].rows.values():
        if r.digest == digest:
            return
    row = txn.insert(idl.tables[TABLE])
    row.kind, row.name, row.digest = kind, name, digest
    row.revoked_at, row.reason = now, reason
    row.expires_at = [] if expires_at is None else [expires_at]


def prune(idl, now):
    """Drop entries whose credential has expired on its own."""
    if TABLE not in idl.tables:
        return
    for r in list(idl.tables[TABLE].rows.values()):
        if r.expires_at and r.expires_at[0] <= now:
            r.delete()


def is_revoked(idl, digest):
    if TABLE not in idl.tables:
        return False
    return any(r.digest == digest for r in idl.tables[TABLE].rows.values())


def listing(idl):
    """Every entry, oldest first (for `vwctl` and REST)."""
    if TABLE not in idl.tables:
        return []
    return sorted(({'kind': r.kind, 'name': r.name, 'digest': r.digest,
                    'revoked_at': r.revoked_at, 'reason': r.reason}
                   for r in idl.tables[TABLE].rows.values()),
                  key=lambda e: e['revoked_at'])


def host_entry(name, reason, now=None):
    """The entry that takes back every certificate of `name` until now."""
    now = now or time.time()
    return {'kind': 'host', 'name': name, 'digest': 'host:%s:%.6f'
            % (name, now), 'revoked_at': now, 'reason': reason}


def certificate_entry(name, fingerprint, reason, now=None):
    """The entry that takes back one certificate (a SHA-256 fingerprint,
    hex, colons allowed)."""
    fp = fingerprint.lower().replace(':', '')
    if len(fp) != 64 or any(c not in '0123456789abcdef' for c in fp):
        raise errors.Invalid('a certificate is named by its SHA-256 '
                             'fingerprint: 64 hex digits, got %r'
                             % fingerprint)
    return {'kind': 'certificate', 'name': name,
            'digest': certificate_digest(fp), 'revoked_at': now or time.time(),
            'reason': reason}


class RevocationStore:
    """Host certificates taken back (`core.revocation`), and the list."""

    def __init__(self, client):
        self.client = client          # the intent store's IdlClient

    def revoke_host(self, name, reason, now=None):
        """Every certificate of `name` valid before now is refused."""
        return self._record(host_entry(name, reason, now))

    def revoke_certificate(self, name, fingerprint, reason, now=None):
        return self._record(certificate_entry(name, fingerprint, reason, now))

    def _record(self, e):
        def build(txn, idl):
            if TABLE not in idl.tables:
                raise errors.Unavailable('the intent database predates '
                                         'revocation (schema 1.13.0): '
                                         'upgrade it first')
            record(txn, idl, e['kind'], e['name'], e['digest'],
                   e['revoked_at'], e['reason'])

        store_txn.commit(self.client, build, 'revoking a ' + e['kind'])
        return e

    def entries(self):
        with self.client.lock:
            return listing(self.client.idl)
