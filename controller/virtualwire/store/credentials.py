"""Scoped credentials (`core.credentials`) in the intent database: one per
(role, name), only the token's SHA-256 kept. Read from the IDL's replica
(every controller of a cluster sees a credential issued by another)."""
import datetime
import time

from virtualwire.core import credentials, errors
from virtualwire.store import revocations
from virtualwire.store import txn as store_txn


class CredentialStore:
    def __init__(self, client):
        self.client = client          # the intent store's IdlClient

    def issue(self, role, name, expires_in=None, now=None):
        """A new token for (role, name), replacing any it had, valid for
        `expires_in` seconds (None: until revoked). Returns (token,
        created_at, expires_at or None); the token exists nowhere else."""
        role, name = credentials.check(role, name)
        token = credentials.new_token()
        now = time.time() if now is None else now
        created = datetime.datetime.fromtimestamp(
            now, datetime.timezone.utc).isoformat(timespec='seconds')
        expires = None if expires_in is None else now + expires_in

        def build(txn, idl):
            table = idl.tables['Credential']
            if (expires is not None or role == 'operator') and \
                    'expires_at' not in table.columns:
                raise errors.Unavailable(
                    'the intent database predates expiring and operator '
                    'credentials (schema 1.14.0): upgrade it with '
                    '`virtualwire-intent-db upgrade`')
            for r in list(table.rows.values()):
                if (r.role, r.name) == (role, name):
                    _take_back(txn, idl, r, 'replaced')
            row = txn.insert(table)
            row.role, row.name = role, name
            row.digest, row.created_at = credentials.digest(token), created
            if expires is not None:
                row.expires_at = [expires]

        store_txn.commit(self.client, build, 'issuing a credential')
        return token, created, expires

    def revoke(self, role, name):
        """True if (role, name) had a credential."""
        found: list = []

        def build(txn, idl):
            found.clear()
            for r in list(idl.tables['Credential'].rows.values()):
                if (r.role, r.name) == (role, name):
                    found.append(r)
                    _take_back(txn, idl, r, 'revoked')

        store_txn.commit(self.client, build, 'revoking a credential')
        return bool(found)

    def holder(self, token, now=None):
        """(role, name) the token was issued to, or None. A listed
        revocation wins over a row (one an old backup brought back), and
        an expired credential is no credential."""
        d = credentials.digest(token)
        now = time.time() if now is None else now
        with self.client.lock:
            idl = self.client.idl
            for r in idl.tables['Credential'].rows.values():
                if r.digest == d:
                    if revocations.is_revoked(idl, d) or \
                            credentials.expired(_expiry(r), now):
                        return None
                    return r.role, r.name
        return None

    def list(self):
        with self.client.lock:
            rows = list(self.client.idl.tables['Credential'].rows.values())
            out = [{'role': r.role, 'name': r.name,
                    'created_at': r.created_at, 'expires_at': _expiry(r)}
                   for r in rows]
        return sorted(out, key=lambda c: (c['role'], c['name']))


def _expiry(row):
    try:
        v = row.expires_at          # a column from schema 1.14.0 on
    except AttributeError:
        return None
    return v[0] if v else None


def _take_back(txn, idl, row, reason):
    revocations.record(txn, idl, 'credential', '%s %s' % (row.role, row.name),
                       row.digest, time.time(), reason)
    row.delete()
