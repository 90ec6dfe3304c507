"""Scoped credentials (`core.credentials`) in the intent database: one per
(role, name), only the token's SHA-256 kept. Read from the IDL's replica
(every controller of a cluster sees a credential issued by another)."""
import datetime
import time

from virtualwire.core import credentials
from virtualwire.store import revocations
from virtualwire.store import txn as store_txn


class CredentialStore:
    def __init__(self, client):
        self.client = client          # the intent store's IdlClient

    def issue(self, role, name):
        """A new token for (role, name), replacing any it had. Returns
        (token, created_at); the token exists nowhere else."""
        role, name = credentials.check(role, name)
        token = credentials.new_token()
        created = datetime.datetime.now(datetime.timezone.utc) \
            .isoformat(timespec='seconds')

        def build(txn, idl):
            for r in list(idl.tables['Credential'].rows.values()):
                if (r.role, r.name) == (role, name):
                    _take_back(txn, idl, r, 'replaced')
            row = txn.insert(idl.tables['Credential'])
            row.role, row.name = role, name
            row.digest, row.created_at = credentials.digest(token), created

        store_txn.commit(self.client, build, 'issuing a credential')
        return token, created

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

    def holder(self, token):
        """(role, name) the token was issued to, or None. A listed
        revocation wins over a row (one an old backup brought back)."""
        d = credentials.digest(token)
        with self.client.lock:
            idl = self.client.idl
            for r in idl.tables['Credential'].rows.values():
                if r.digest == d:
                    if revocations.is_revoked(idl, d):
                        return None
                    return r.role, r.name
        return None

    def list(self):
        with self.client.lock:
            rows = list(self.client.idl.tables['Credential'].rows.values())
            out = [{'role': r.role, 'name': r.name,
                    'created_at': r.created_at} for r in rows]
        return sorted(out, key=lambda c: (c['role'], c['name']))


def _take_back(txn, idl, row, reason):
    revocations.record(txn, idl, 'credential', '%s %s' % (row.role, row.name),
                       row.digest, time.time(), reason)
    row.delete()
