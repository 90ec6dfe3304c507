"""`virtualwire-intent-db`: the intent database's ovsdb-server as a
service (ovn-ctl's part for OVN's databases), one command per step a
unit file or an operator takes:

  run      create the database if there is none (standalone, or a new
           cluster, or joining one), convert a standalone file offline
           if the schema is newer, then exec ovsdb-server in the
           foreground: no --detach, so it never escapes its unit;
  wait     until the server answers for the database (ExecStartPost:
           the unit is ready only then);
  upgrade  convert the running database to the installed schema, online
           (a cluster converts through its leader, for every member, as
           ovn-ctl's upgrade_cluster);
  backup / restore  a snapshot of the data (ovsdb-client backup and
           restore; restore keeps what was revoked since the backup
           revoked: `store.intent_db_restore`).

Settings as the daemons' (`config_file`): /etc/virtualwire/intent-db.yaml,
every key a flag.
"""
import argparse
import json
import os
import subprocess
import sys

from virtualwire import config_file, daemon, version
from virtualwire.store.intent import SCHEMA_PATH
from virtualwire.store import (collector_access, intent_db_restore,
                               schema_version)
from virtualwire.store.errors import StoreError

DB_NAME = 'VirtualWire'


def build_parser():
    p = argparse.ArgumentParser(
        prog='virtualwire-intent-db',
        description="The intent database's ovsdb-server, as a service.")
    version.add_argument(p)
    p.add_argument('--db', default='/var/lib/virtualwire/intent.db',
                   help='the database file (default: %(default)s)')
    p.add_argument('--socket', default='/run/virtualwire/intent.sock',
                   help='the local socket controllers and tools use '
                        '(default: %(default)s)')
    p.add_argument('--remote', action='append', default=[],
                   metavar='pssl:PORT[:IP]',
                   help='also listen here for controllers on other '
                        'machines (repeatable); needs the TLS files')
    p.add_argument('--collector-remote', action='append', default=[],
                   metavar='pssl:PORT[:IP]',
                   help='listen here for the collector (repeatable; the '
                        'same on every member): its certificate may write '
                        'the counter base and nothing else (RBAC role '
                        'collector); needs the TLS files')
    p.add_argument('--cluster-local', default='', metavar='ssl:IP:PORT',
                   help='this member\'s RAFT address: the database is a '
                        'cluster member, not a standalone file')
    p.add_argument('--cluster-remote', action='append', default=[],
                   metavar='ssl:IP:PORT',
                   help='a member of the cluster to join (repeatable); '
                        'none: this member starts a new cluster')
    tls = p.add_argument_group('TLS', "this server's key and certificate "
                               '(vw-pki issue --role controller, named as '
                               "controllers' --intent-db-name) and the CA "
                               'its peers and clients present')
    daemon.add_tls_files(tls, 'the only CA whose certificates peers may show')
    p.add_argument('--schema', default=SCHEMA_PATH,
                   help='the schema to create or convert to (default: the '
                        "installed package's)")
    p.add_argument('--timeout', type=int, default=30, metavar='SECONDS',
                   help='for wait, upgrade, backup and restore')
    sub = p.add_subparsers(dest='verb', required=True)
    sub.add_parser('run', help='prepare the database, then serve it')
    sub.add_parser('wait', help='until the database is served')
    sub.add_parser('upgrade', help='convert it online to --schema')
    b = sub.add_parser('backup', help='write a snapshot of the data')
    b.add_argument('file')
    r = sub.add_parser('restore', help='replace the data with a snapshot, '
                       'keeping the revocations made since')
    r.add_argument('file')
    r.add_argument('--revocations-from', action='append', default=[],
                   metavar='BACKUP',
                   help='also keep the revocations listed in this newer '
                        'backup (repeatable): for a restore into a new '
                        'cluster, which has no list of its own')
    return p


class ServiceError(Exception):
    pass


def _run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise ServiceError('%s: %s' % (' '.join(cmd), p.stderr.strip()
                                       or 'exit %d' % p.returncode))
    return p.stdout.strip()


def _tls(args):
    files = [args.private_key, args.certificate, args.ca_cert]
    if any(files) and not all(files):
        raise ServiceError('TLS needs --private-key, --certificate and '
                           '--ca-cert together')
    for t in args.collector_remote:
        try:
            collector_access.check_target(t)
        except ValueError as e:
            raise ServiceError('--collector-remote: %s' % e)
    ssl = [t for t in [args.cluster_local] + args.cluster_remote +
           args.remote + args.collector_remote
           if t.startswith(('ssl:', 'pssl:'))]
    if ssl and not all(files):
        raise ServiceError('%s needs --private-key, --certificate and '
                           '--ca-cert' % ssl[0])
    if any(t.startswith(('tcp:', 'ptcp:')) for t in
           [args.cluster_local] + args.cluster_remote + args.remote):
        raise ServiceError('plain TCP would let anyone who reaches it '
                           'write wires and credentials: use ssl:/pssl:')
    return all(files)


def prepare_commands(args, exists, needs_conversion):
    """The ovsdb-tool commands that make the database ready to serve:
    pure, so the unit's first start, a restart and an upgrade are shown
    without a server."""
    if exists:
        if not args.cluster_local and needs_conversion:
            return [['ovsdb-tool', 'convert', args.db, args.schema]]
        return []       # a cluster converts online (upgrade), never here
    if not args.cluster_local:
        return [['ovsdb-tool', 'create', args.db, args.schema]]
    if args.cluster_remote:
        return [['ovsdb-tool', 'join-cluster', args.db, DB_NAME,
                 args.cluster_local] + args.cluster_remote]
    return [['ovsdb-tool', 'create-cluster', args.db, args.schema,
             args.cluster_local]]


def server_command(args, tls):
    cmd = ['ovsdb-server', args.db, '--remote=punix:' + args.socket,
           '--unixctl=' + os.path.join(os.path.dirname(args.socket),
                                       'intent-db.ctl'),
           '--no-chdir', '-vconsole:info']     # stderr: the journal
    cmd += ['--remote=' + r for r in args.remote]
    # The listeners the database itself lists (the collector's, with their
    # RBAC role: store.collector_access), written by `wait`.
    cmd += ['--remote=' + collector_access.REMOTE]
    if tls:
        cmd += ['--private-key=' + args.private_key,
                '--certificate=' + args.certificate,
                '--ca-cert=' + args.ca_cert]
    return cmd


def run(args):
    tls = _tls(args)
    os.makedirs(os.path.dirname(args.db) or '.', exist_ok=True)
    os.makedirs(os.path.dirname(args.socket) or '.', exist_ok=True)
    exists = os.path.exists(args.db)
    needs = False
    if exists and not args.cluster_local:
        have = _run(['ovsdb-tool', 'db-version', args.db])
        ours = _run(['ovsdb-tool', 'schema-version', args.schema])
        way = schema_version.compare(have, ours)
        if way == 'newer':
            print('virtualwire-intent-db: the database is at schema %s, '
                  "newer than this package's %s: served as it is, never "
                  'converted down' % (have, ours), file=sys.stderr)
        needs = way == 'older'
    for cmd in prepare_commands(args, exists, needs):
        print('virtualwire-intent-db: %s' % ' '.join(cmd), file=sys.stderr)
        _run(cmd)
    cmd = server_command(args, tls)
    os.execvp(cmd[0], cmd)


def grant_collector(args, remote):
    """Make the database list exactly --collector-remote as the
    collector's listeners (a schema before 1.15.0 has no such rows: said,
    and left for `upgrade`)."""
    have = _run(_client(args, 'get-schema-version', remote, DB_NAME))
    if schema_version.compare(have, '1.15.0') == 'older':
        return ('collector listeners need schema 1.15.0 (the database is '
                'at %s): run upgrade' % have)
    _run(_client(args, 'transact', remote, json.dumps(
        collector_access.ops(args.collector_remote, DB_NAME))))
    return 'collector listeners: %s' % (
        ', '.join(args.collector_remote) or 'none')


def _client(args, *rest):
    return ['ovsdb-client', '--timeout=%d' % args.timeout] + list(rest)


def main(argv=None):
    p = build_parser()
    args = config_file.parse(p, argv, '/etc/virtualwire/intent-db.yaml')
    remote = 'unix:' + args.socket
    try:
        if args.verb == 'run':
            run(args)
        elif args.verb == 'wait':
            _run(_client(args, 'wait', remote, DB_NAME, 'connected'))
            try:
                print(grant_collector(args, remote))
            except ServiceError as e:
                # Served all the same: the unit's readiness must not fail
                # (and restart a cluster member) on this write; say it.
                print('virtualwire-intent-db: collector listeners not '
                      'written: %s' % e, file=sys.stderr)
        elif args.verb == 'upgrade':
            before = _run(_client(args, 'get-schema-version', remote,
                                  DB_NAME))
            ours = _run(['ovsdb-tool', 'schema-version', args.schema])
            way = schema_version.compare(before, ours)
            if way == 'same':
                print('%s is already at %s' % (DB_NAME, ours))
                return 0
            if way == 'newer':
                raise ServiceError(
                    'the database is at schema %s, newer than this '
                    "package's %s: a conversion never goes down (it would "
                    'drop what the newer version stored); nothing changed'
                    % (before, ours))
            _run(_client(args, 'convert', remote, args.schema))
            print('%s converted from %s to %s' % (DB_NAME, before, _run(
                _client(args, 'get-schema-version', remote, DB_NAME))))
            print(grant_collector(args, remote))
        elif args.verb == 'backup':
            with open(args.file, 'w') as f:
                f.write(_run(_client(args, 'backup', remote, DB_NAME)) + '\n')
        elif args.verb == 'restore':
            print(intent_db_restore.Restore(_run, _client(args), remote)
                  .restore(args.file, args.revocations_from))
    except (ServiceError, OSError, ValueError, StoreError) as e:
        print('virtualwire-intent-db: %s' % e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
