"""Provider switches' intent (`core.switches`) in the intent database's
ProviderSwitch table: one row per switch, its name and its number each a
unique index, so two writers can never make two switches of one name or
one number. A port's index is stored with it (`ports`: name -> index),
so the flows of the other ports never change when one is added.
Read from the IDL's replica, as credentials are."""
import datetime
from typing import Dict, Optional

import ovs.db.idl

from virtualwire.core import errors
from virtualwire.core.switches import (IDLE_TIMEOUT, MAC_LIMIT, NUMBER_MAX,
                                       ProviderSwitch)
from virtualwire.store import txn as store_txn
from virtualwire.store.errors import StoreError

TABLE = 'ProviderSwitch'


class SwitchExists(errors.Conflict):
    """A switch of that name is already there."""


def _switch(row) -> ProviderSwitch:
    by_index = sorted((i, p) for p, i in row.ports.items())
    host = row.host[0] if row.host else None
    # (A 1.16.0 database has no parts: every switch is central.)
    parts = getattr(row, 'parts', None) or {}
    return ProviderSwitch(row.name, row.tenant, row.number, host,
                          tuple(p for _i, p in by_index), row.mac_limit,
                          row.idle_timeout, tuple(sorted(parts.items())))


def rows(idl):
    """The table's rows; none while the database's schema predates it
    (1.16.0: a cluster mid-upgrade, before its conversion)."""
    table = idl.tables.get(TABLE)
    return list(table.rows.values()) if table is not None else []


class SwitchStore:
    def __init__(self, client):
        self.client = client          # the intent store's IdlClient

    def switches(self) -> Dict[str, ProviderSwitch]:
        with self.client.lock:
            return {r.name: _switch(r) for r in rows(self.client.idl)}

    def get(self, name) -> Optional[ProviderSwitch]:
        return self.switches().get(name)

    def create(self, name, tenant, host, ports, mac_limit=MAC_LIMIT,
               idle_timeout=IDLE_TIMEOUT) -> ProviderSwitch:
        """Insert a switch with the lowest number no switch has. Checked
        (ProviderSwitch) before anything is written; SwitchExists if the
        name is taken, by whoever wrote first."""
        ProviderSwitch(name, tenant, 1, host, tuple(ports), mac_limit,
                       idle_timeout)
        at = datetime.datetime.now(datetime.timezone.utc) \
            .isoformat(timespec='seconds')
        made: list = []

        if TABLE not in self.client.idl.tables:
            raise errors.Unavailable('the intent database predates provider '
                                     'switches (schema 1.16.0): convert it '
                                     'first (virtualwire-intent-db upgrade)')

        def build(txn, idl):
            made.clear()
            have = rows(idl)
            if any(r.name == name for r in have):
                return
            used = {r.number for r in have}
            number = next((n for n in range(1, NUMBER_MAX + 1)
                           if n not in used), None)
            if number is None:
                raise errors.Conflict('every switch number (1-%d) is in '
                                      'use' % NUMBER_MAX)
            row = txn.insert(idl.tables[TABLE])
            row.name, row.tenant, row.number = name, tenant, number
            row.host = [host] if host else []
            row.ports = {p: i + 1 for i, p in enumerate(ports)}
            row.mac_limit, row.idle_timeout = mac_limit, idle_timeout
            row.created_at = at
            made.append(ProviderSwitch(name, tenant, number, host,
                                       tuple(ports), mac_limit,
                                       idle_timeout))

        status, txn = self.client.transact(build)
        if made and status == ovs.db.idl.Transaction.SUCCESS:
            return made[-1]
        if name in self.switches():
            raise SwitchExists('a switch named %s exists' % name)
        raise StoreError('storing switch %s failed: %s (%s)'
                         % (name, status, txn.get_error()))

    def place(self, name, host) -> bool:
        """The switch's flows now belong on `host` (None: nowhere). False
        if there is no such switch."""
        found: list = []

        def build(txn, idl):
            found.clear()
            for r in rows(idl):
                if r.name == name:
                    r.host = [host] if host else []
                    found.append(r)

        store_txn.commit(self.client, build, 'placing switch %s' % name)
        return bool(found)

    def split(self, name, parts) -> bool:
        """The ports `parts` ({port: host}) live on those hosts' parts;
        the others on the switch's host ({}: a central switch again).
        False if there is no such switch."""
        found: list = []

        def build(txn, idl):
            found.clear()
            for r in rows(idl):
                if r.name == name:
                    r.parts = dict(parts)
                    found.append(r)

        store_txn.commit(self.client, build, 'splitting switch %s' % name)
        return bool(found)

    def delete(self, name) -> bool:
        """True if there was such a switch."""
        if TABLE not in self.client.idl.tables:
            return False
        return store_txn.delete_rows(self.client, TABLE,
                                     lambda r: r.name == name,
                                     'deleting switch %s' % name)
