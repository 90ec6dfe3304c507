"""The collector's own way into the intent database: listeners with the
role `collector`, which ovsdb-server's RBAC lets write the `Counters`
table (the counter base) and nothing else (schema 1.15.0 on).

Why: one CA signs controllers, database members and the collector, and
ovsdb-server checks no name per listener, so on the controllers' listener
the collector's key could write wires and credentials. On its own
listener every other write is refused by the server itself ("permission
error"); reads, monitors and locks stay open (the collector needs them).
RBAC identifies a client by its certificate, so these listeners are
pssl: only (over a unix socket every write is refused).

What it does not stop: the collector's key used on the controllers'
listener. Keep that listener where only controllers and members reach
it (docs/security.rst, "What each certificate of the controller CA may
do"), as the hosts' OVSDB guard does for theirs.

`ops(targets)` is pure: the ovsdb transaction (for `ovsdb-client
transact` or `store.rawrpc`) that makes the rows say exactly that, run
at each start of `virtualwire-intent-db` (rows it replaces are its own).
ovsdb-server opens them through `--remote=db:VirtualWire,Remotes,
connections` (options are read only from a reference column, as OVN's
`SB_Global:connections`).
"""
from typing import List

ROLE = 'collector'
TABLE = 'Counters'
# The columns a save writes (store.runtime); `name` is a row's key.
UPDATE = ['snapshot', 'updated_at']
REMOTE = 'db:VirtualWire,Remotes,connections'


def check_target(target: str) -> str:
    """A collector listener: pssl:PORT[:IP]. ValueError saying why not."""
    parts = target.split(':')
    if parts[0] != 'pssl' or len(parts) < 2 or not parts[1].isdigit() \
            or not 0 < int(parts[1]) < 65536:
        raise ValueError(
            'a collector listener is pssl:PORT[:IP] (RBAC knows a client '
            'by its certificate: unix and plain TCP would refuse every '
            'write), got %r' % target)
    return target


def ops(targets: List[str], db: str = 'VirtualWire') -> list:
    """Replace the Remotes row, the collector role and its permission."""
    for t in targets:
        check_target(t)
    out: list = [db,
                 {'op': 'delete', 'table': 'Remotes', 'where': []},
                 {'op': 'delete', 'table': 'RBAC_Role',
                  'where': [['name', '==', ROLE]]},
                 {'op': 'delete', 'table': 'RBAC_Permission',
                  'where': [['table', '==', TABLE]]}]
    if not targets:
        return out
    names = []
    for i, t in enumerate(sorted(set(targets))):
        names.append(['named-uuid', 'c%d' % i])
        out.append({'op': 'insert', 'table': 'Connection',
                    'uuid-name': 'c%d' % i,
                    'row': {'target': t, 'role': ROLE,
                            'inactivity_probe': 5000}})
    out += [
        {'op': 'insert', 'table': 'Remotes',
         'row': {'connections': ['set', names]}},
        {'op': 'insert', 'table': 'RBAC_Permission', 'uuid-name': 'perm',
         # [""]: any certificate of the role (ovsdb-server's rbac.c; an
         # empty set authorizes none).
         'row': {'table': TABLE, 'authorization': ['set', ['']],
                 'insert_delete': True, 'update': ['set', UPDATE]}},
        {'op': 'insert', 'table': 'RBAC_Role',
         'row': {'name': ROLE,
                 'permissions': ['map', [[TABLE, ['named-uuid', 'perm']]]]}}]
    return out
