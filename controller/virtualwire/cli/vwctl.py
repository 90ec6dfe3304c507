"""`vwctl`: the REST API from a shell. Tables for people, --json for scripts,
non-zero exit with the controller's message on any error.

Config (first found): --url/--token-file, $VWCTL_URL/$VWCTL_TOKEN, the file
named by --config or $VWCTL_CONFIG, ~/.config/virtualwire/vwctl.conf (there
is no --token: a token on the command line is visible to every user of the
machine in `ps`):

    [vwctl]
    url = https://127.0.0.1:8780
    token_file = /var/lib/virtualwire/api-token     (or: token = ...)
    ca_cert = /etc/virtualwire/controller-ca.pem    ($VWCTL_CA_CERT)
"""
import argparse
import collections
import json
import os
import sys
import time

from tabulate import tabulate

from virtualwire.cli import batch as cli_batch
from virtualwire.cli import credentials as cli_credentials
from virtualwire.cli import intent as cli_intent
from virtualwire.cli import tenants as cli_tenants
from virtualwire.cli import enrol as cli_enrol
from virtualwire.cli import extenders as cli_extenders
from virtualwire.cli import switches as cli_switches
from virtualwire.cli import timeline
from virtualwire.cli import top as cli_top
from virtualwire.cli import placement as cli_placement
from virtualwire.cli import topology as cli_topology
from virtualwire.cli.migration_profile import PROFILES
from virtualwire.cli.client import (DEFAULT_CONFIG, CliError, Client,  # noqa: F401
                                    load_config)
from virtualwire import version
from virtualwire.cli import config_check


def _table(rows, cols):
    return tabulate([[r.get(c, '') if r.get(c) is not None else '-'
                      for c in cols] for r in rows], headers=cols)


def cmd_hosts(c, a):
    doc = c.call('GET', '/v1/hosts')
    rows = [dict(h, warnings='; '.join(h['warnings']) or '-')
            for h in doc['hosts']]
    return doc, _table(rows, ['name', 'site', 'role', 'tunnel_ip',
                              'connected', 'synced', 'vnics', 'underlay_mtu',
                              'warnings'])


def cmd_vnics(c, a):
    if a.action == 'place':
        if not (a.vnic and a.host):
            raise CliError('usage: vwctl vnics place VNIC HOST')
        doc = c.call('PUT', '/v1/vnics/%s/placement' % a.vnic,
                     {'host': a.host})
        return doc, 'vNIC %s runs on %s%s; another host plugging it is ' \
            'refused' % (a.vnic, doc['host'], ' (a move from %s allowed)'
                         % doc['previous'] if doc['previous'] else '')
    if a.action == 'unplace':
        if not a.vnic or a.host:
            raise CliError('usage: vwctl vnics unplace VNIC')
        c.call('DELETE', '/v1/vnics/%s/placement' % a.vnic)
        return {'unplaced': a.vnic}, 'vNIC %s: any host plugging it claims ' \
            'it again' % a.vnic
    if a.action == 'refused':
        doc = c.call('GET', '/v1/status')
        rows = doc['refused_claims']
        return {'refused_claims': rows}, _table(
            rows, ['vnic', 'host', 'port', 'placed_on'])
    doc = c.call('GET', '/v1/vnics')
    return doc, _table([dict(v, refused_on=','.join(v.get('refused_on')
                                                      or ()) or None)
                        for v in doc['vnics']],
                       ['id', 'host', 'placed_on', 'refused_on', 'port',
                        'mac', 'wire', 'tenant'])


def moving_text(wire):
    """'h1->h2' per end being live-migrated ('*' once the guest's first
    frame there activated the destination), '-' for none."""
    return ' '.join('%s->%s%s' % (m['source'], m['destination'],
                                  '*' if m['activated'] else '')
                    for _v, m in sorted((wire.get('moving') or {}).items())
                    ) or '-'


def cmd_wires(c, a):
    doc = c.call('GET', '/v1/wires')
    rows = [dict(w, moving=moving_text(w),
                 path=' > '.join(w.get('path') or ()) or None)
            for w in doc['wires']]
    return doc, _table(rows, ['connector_id', 'a', 'b', 'state', 'path',
                              'moving'])


def migration_rows(migrations):
    """One table row per live migration, newest first."""
    rows = []
    for m in sorted(migrations, key=lambda m: m.get('started_at') or 0,
                    reverse=True):
        sources = sorted({s for s in m['sources'].values() if s})
        took = m['ended_at'] - m['started_at'] if m.get('ended_at') else None
        rows.append({
            'vm': m['vm'] or m['vm_uuid'], 'state': m['state'],
            'move': '%s -> %s' % (','.join(sources) or '?', m['destination']),
            'activated': '%d/%d' % (len(m['activated']), len(m['vnics'])),
            # What activated each vNIC (its first frame's kind, or a last
            # resort), counted: 'rarp' or 'garp x2, source-left'.
            'activated_by': ', '.join(
                k if n == 1 else '%s x%d' % (k, n) for k, n in sorted(
                    collections.Counter(
                        (m.get('activated_by') or {}).values()).items())
            ) or '-',
            'found_by': m['found_by'],
            'started': time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(
                m['started_at'])),
            'took_s': '%.2f' % took if took is not None else None,
            'id': m['id']})
    return rows


def cmd_migrations(c, a):
    doc = c.call('GET', '/v1/migrations')
    text = _table(migration_rows(doc['migrations']), [
        'vm', 'state', 'move', 'activated', 'activated_by', 'found_by',
        'started', 'took_s', 'id'])
    if a.steps:
        newest = sorted(doc['migrations'], key=lambda m: -m['started_at'])
        text += '\n\n' + '\n\n'.join(timeline.render(m)
                                       for m in newest[:a.steps])
    return doc, text


def cmd_show(c, a):
    doc = c.call('GET', '/v1/wires/%s' % a.wire)
    return doc, tabulate(sorted(doc.items()))


def _where(p):
    return 'on every connected switch (%d)%s' % (
        p['switches_confirmed'], '; not connected: %s' % ', '.join(
            p['not_connected']) if p['not_connected'] else '')


def cmd_connect(c, a):
    # The answer waits until every connected switch holds the wire.
    doc = c.call('POST', '/v1/wires?wait=programmed&timeout=10',
                 {'a': a.vnic_a, 'b': a.vnic_b})
    return doc, 'connected %s <-> %s: connector %s (%s), %s' % (
        doc['a'], doc['b'], doc['connector_id'], doc['state'],
        _where(doc['programmed']))


def cmd_disconnect(c, a):
    doc = c.call('DELETE', '/v1/wires/%s?wait=programmed&timeout=10'
                 % a.wire)
    return dict(doc, disconnected=a.wire), 'disconnected %s, %s' % (
        a.wire, _where(doc['programmed']))


def cmd_stats(c, a):
    doc = c.call('GET', '/v1/wires/%s/stats' % a.wire)
    rows = []
    for key, label in (('a_to_b', 'a -> b'), ('b_to_a', 'b -> a')):
        d = doc[key]
        win = d.get('window') or {}
        rows.append([label, d['entered_packets'], d['delivered_packets'],
                     'lost %d' % d['lost_packets'],
                     d.get('unsettled_packets', 0), d['held_packets'],
                     win.get('packets_per_second', ''),
                     '%d (+%d unsettled)' % (win['surely_lost_packets'],
                                             win['uncertain_packets'])
                     if win else '',
                     d['entered_bytes'], d['delivered_bytes']])
    span = next((doc[k]['window']['seconds'] for k in ('a_to_b', 'b_to_a')
                 if doc[k].get('window')), None)
    return doc, ('wire %s (%s)\n%s\n' % (
        doc['connector_id'], doc['state'], tabulate(rows, headers=[
            'direction', 'entered', 'delivered', 'lost', 'unsettled', 'held',
            'pkt/s', 'lost in %ss' % (span if span is not None else '-'),
            'entered bytes', 'delivered bytes'])) +
        'entered: frames taken in at the sending end; delivered: handed to '
        'the far end\'s port; lost: entered and can no\nlonger be delivered '
        '(never more than were lost); unsettled: entered, neither delivered '
        'nor lost beyond doubt yet\n(in flight, not counted yet, or counts a '
        'switch lost); held: dropped on '
        'a migration\'s destination until the guest ran there (a copy went '
        'to its source).\nRead every %ss by the collector.'
        % doc.get('read_every_s', '?'))


def cmd_status(c, a):
    doc = c.call('GET', '/v1/status')
    flat = {k: v for k, v in doc.items()
            if k not in ('counters', 'collector')}
    flat.update(doc.get('counters', {}))
    flat.update({'collector_' + k: v
                 for k, v in doc.get('collector', {}).items()})
    return doc, tabulate(sorted(flat.items()))


def cmd_migrate(c, a):
    from virtualwire.cli import migrate as cli_migrate
    path = a.config or os.environ.get('VWCTL_CONFIG') or DEFAULT_CONFIG
    try:
        if a.topology:
            from virtualwire.cli import ensemble
            if a.vm_name or a.dest or not a.to:
                raise CliError('usage: vwctl migrate --topology NAME --to '
                               'HOST|SITE [--vm NODE ...] [--parallel N]')
            return ensemble.migrate_topology(c, a, path)
        if not (a.vm_name and a.dest):
            raise CliError('usage: vwctl migrate VM DEST, or vwctl migrate '
                           '--topology NAME --to HOST|SITE')
        a.vm = a.vm_name
        return cli_migrate.migrate(c, a, path)
    except cli_migrate.MigrateError as e:
        raise CliError(str(e))


def build_parser():
    # No abbreviations: `--token X` must not be taken as --token-file.
    p = argparse.ArgumentParser(prog='vwctl', allow_abbrev=False,
                                description='VirtualWire controller client')
    version.add_argument(p)
    p.add_argument('--url', help='controller REST URL')
    p.add_argument('--token-file', metavar='FILE',
                   help='file holding the bearer token')
    p.add_argument('--ca-cert', metavar='PEM',
                   help="the controller CA, to verify the controller's "
                        "certificate (default: the system's CAs)")
    p.add_argument('--config', help='config file (INI, section [vwctl])')
    p.add_argument('--json', action='store_true',
                   help='print the JSON answer (for scripts)')
    sub = p.add_subparsers(dest='cmd', required=True)
    config_check.add_parser(sub)
    sub.add_parser('status', help='controller status').set_defaults(
        fn=cmd_status)
    cli_enrol.add_parser(sub, cmd_hosts)
    s = sub.add_parser('vnics', help="vNICs: list; place VNIC HOST, unplace "
                       "VNIC (the cloud's word on where each runs); refused "
                       '(hosts that plugged one placed elsewhere)')
    s.add_argument('action', nargs='?', default='list',
                   choices=['list', 'place', 'unplace', 'refused'])
    s.add_argument('vnic', nargs='?')
    s.add_argument('host', nargs='?')
    s.set_defaults(fn=cmd_vnics)
    sub.add_parser('wires', help='list wires').set_defaults(fn=cmd_wires)
    s = sub.add_parser('migrations', help='live migrations: in progress, '
                       'then the last 200')
    s.add_argument('--steps', type=int, nargs='?', const=3, default=0,
                   metavar='N', help='also each vNIC\'s steps, timed, for '
                   'the newest N (default 3)')
    s.set_defaults(fn=cmd_migrations)
    s = sub.add_parser('show', help='show a wire')
    s.add_argument('wire', help='connector id')
    s.set_defaults(fn=cmd_show)
    s = sub.add_parser('connect', help='connect two vNICs with a wire')
    s.add_argument('vnic_a')
    s.add_argument('vnic_b')
    s.set_defaults(fn=cmd_connect)
    s = sub.add_parser('disconnect', help='remove a wire')
    s.add_argument('wire', help='connector id')
    s.set_defaults(fn=cmd_disconnect)
    s = sub.add_parser('stats', help="a wire's packet and byte counters")
    s.add_argument('wire', help='connector id')
    s.set_defaults(fn=cmd_stats)
    s = sub.add_parser('migrate', help='live-migrate a guest (libvirt) with '
                                       'progress; its wires follow')
    s.add_argument('vm_name', nargs='?', metavar='vm',
                   help='libvirt domain name')
    s.add_argument('dest', nargs='?',
                   help='destination host (VirtualWire name)')
    s.add_argument('--source', help='source host (default: look it up)')
    s.add_argument('--topology', metavar='NAME',
                   help="move the topology's VMs together")
    s.add_argument('--to', metavar='HOST|SITE',
                   help='with --topology: a host, or a site (all to one '
                        'of its hosts)')
    s.add_argument('--vm', action='append', metavar='NODE',
                   help='with --topology: only these nodes (repeat)')
    s.add_argument('--parallel', type=int, default=2,
                   choices=range(1, 17), metavar='1-16',
                   help='with --topology: at most N at a time (default 2)')
    s.add_argument('--tenant', help="with --topology: the tenant's "
                   "topology (operator)")
    s.add_argument('--bandwidth', type=int, metavar='MiB/s',
                   help='cap each migration stream (libvirt bandwidth)')
    s.add_argument('--profile', choices=sorted(PROFILES), default='default',
                   help='what QEMU is asked to do: ' + '; '.join(
                       '%s: %s' % (k, v.summary)
                       for k, v in sorted(PROFILES.items())))
    s.add_argument('--postcopy', action='store_true',
                   help='switch to post-copy after the first pass (the '
                        'guest runs on the destination at once; a link '
                        'failure then loses it)')
    s.set_defaults(fn=cmd_migrate)
    cli_extenders.add_parser(sub)
    cli_batch.add_parser(sub)
    cli_credentials.add_parser(sub)
    cli_intent.add_parser(sub)
    cli_tenants.add_parsers(sub)
    cli_top.add_parser(sub)
    cli_topology.add_parser(sub)
    cli_placement.add_parser(sub)
    cli_switches.add_parser(sub)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if getattr(args, 'local', None):        # needs no controller
        code, lines = args.local(args)
        for line in lines:
            print(line, file=sys.stderr if code else sys.stdout)
        return code
    action = getattr(args, 'action', 'list')
    if action in ('connect', 'disconnect') and not (args.a and args.b) or \
            action == 'rotate' and not args.a:
        print('vwctl: error: extenders %s needs %s' % (
            action, 'an extender name' if action == 'rotate'
            else 'two extender names'), file=sys.stderr)
        return 2
    try:
        url, token, ca = load_config(args)
        client = Client(url, token, ca_cert=ca)
        doc, text = args.fn(client, args)
    except CliError as e:
        print('vwctl: error: %s' % e, file=sys.stderr)
        return 1
    print(json.dumps(doc, indent=2) if args.json else text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
