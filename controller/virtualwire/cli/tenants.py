"""`vwctl tenants`: which tenant owns which vNIC (`core.tenancy`): list,
assign VNIC TENANT, release VNIC; and `vwctl audit`: the last changes
asked for, who asked and what came of it."""
from tabulate import tabulate

from virtualwire.cli.client import CliError


def cmd_tenants(c, a):
    if a.action == 'list':
        doc = c.call('GET', '/v1/tenants')
        return doc, tabulate([[t['name'], t['vnics'],
                               ', '.join(t['credentials']) or '-']
                              for t in doc['tenants']],
                             headers=['tenant', 'vNICs', 'credentials'])
    if not a.vnic or (a.action == 'assign') != bool(a.tenant):
        raise CliError('usage: vwctl tenants assign VNIC TENANT | '
                       'vwctl tenants release VNIC')
    if a.action == 'release':
        c.call('DELETE', '/v1/vnics/%s/tenant' % a.vnic)
        return {'released': a.vnic}, \
            'vNIC %s has no tenant now: only the operator sees it' % a.vnic
    doc = c.call('PUT', '/v1/vnics/%s/tenant' % a.vnic, {'tenant': a.tenant})
    return doc, 'vNIC %s belongs to tenant %s' % (a.vnic, a.tenant)


def cmd_audit(c, a):
    doc = c.call('GET', '/v1/audit?limit=%d' % a.limit)
    rows = [[e['at'], e['who'], e.get('from') or '-',
             '%s %s' % (e['method'], e['path']), e['status'],
             e.get('error') or ''] for e in doc['entries']]
    return doc, tabulate(rows, headers=['when', 'who', 'from', 'what',
                                        'result', 'why'])


def add_parsers(sub):
    s = sub.add_parser('tenants', help="tenants and their vNICs: list, "
                       'assign VNIC TENANT, release VNIC')
    s.add_argument('action', nargs='?', default='list',
                   choices=['list', 'assign', 'release'])
    s.add_argument('vnic', nargs='?')
    s.add_argument('tenant', nargs='?')
    s.set_defaults(fn=cmd_tenants)
    s = sub.add_parser('audit', help='the last changes asked for: who, '
                       'from where, what, the result')
    s.add_argument('--limit', type=int, default=20,
                   choices=range(1, 1001), metavar='1-1000')
    s.set_defaults(fn=cmd_audit)
