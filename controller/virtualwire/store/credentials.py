"""Scoped credentials (`core.credentials`) in the intent database: one per
(role, name), only the token's SHA-256 kept. Read from the IDL's replica
(every controller of a cluster sees a credential issued by another)."""
import datetime

import ovs.db.idl

from virtualwire.core import credentials
from virtualwire.store.errors import StoreError


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

        self._commit(build, 'issuing a credential')
        return token, created

    def revoke(self, role, name):
        """True if (role, name) had a credential."""
        found = []

        def build(txn, idl):
            for r in list(idl.tables['Credential'].rows.values()):
                if (r.role, r.name) == (role, name):
                    found.append(r)
                    r.delete()

        self._commit(build, 'revoking a credential')
        return bool(found)

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

    def _commit(self, build, what):
        status, txn = self.client.transact(build)
        if status not in (ovs.db.idl.Transaction.SUCCESS,
                          ovs.db.idl.Transaction.UNCHANGED):
            raise StoreError('%s failed: %s (%s)' % (what, status,
                                                     txn.get_error()))
