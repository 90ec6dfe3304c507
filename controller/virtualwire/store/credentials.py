"""Scoped credentials (`core.credentials`) in the intent database: one per
(role, name), only the token's SHA-256 kept. Read from the IDL's replica
(every controller of a cluster sees a credential issued by another)."""
import datetime

from virtualwire.core import credentials
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
                    r.delete()
            row = txn.insert(idl.tables['Credential'])
            row.role, row.name = role, name
            row.digest, row.created_at = credentials.digest(token), created

        store_txn.commit(self.client, build, 'issuing a credential')
        return token, created

    def revoke(self, role, name):
        """True if (role, name) had a credential."""
        return store_txn.delete_rows(
            self.client, 'Credential',
            lambda r: (r.role, r.name) == (role, name),
            'revoking a credential')

    def holder(self, token):
        """(role, name) the token was issued to, or None."""
        d = credentials.digest(token)
        with self.client.lock:
            for r in self.client.idl.tables['Credential'].rows.values():
                if r.digest == d:
                    return r.role, r.name
        return None

    def list(self):
        with self.client.lock:
            rows = list(self.client.idl.tables['Credential'].rows.values())
            out = [{'role': r.role, 'name': r.name,
                    'created_at': r.created_at} for r in rows]
        return sorted(out, key=lambda c: (c['role'], c['name']))
