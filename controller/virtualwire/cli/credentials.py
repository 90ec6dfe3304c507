"""`vwctl credentials`: scoped tokens for extenders, hypervisors' libvirt
hooks, readers (Prometheus, dashboards), tenants and named operators:
list, issue ROLE NAME [--expires-in SECONDS] [--out FILE], revoke ROLE
NAME."""
import os
import time

from tabulate import tabulate

from virtualwire.cli.client import CliError
from virtualwire.core.credentials import ROLES


def cmd_credentials(c, a):
    if a.action == 'list':
        doc = c.call('GET', '/v1/credentials')
        return doc, tabulate([[x['role'], x['name'], x['created_at'],
                               _when(x.get('expires_at'))]
                              for x in doc['credentials']],
                             headers=['role', 'name', 'issued', 'expires'])
    if not a.role or not a.name:
        raise CliError('usage: vwctl credentials %s ROLE NAME' % a.action)
    if a.action == 'revoke':
        c.call('DELETE', '/v1/credentials/%s/%s' % (a.role, a.name))
        return {'revoked': [a.role, a.name]}, \
            'revoked %s %s: its token is refused from now on' % (a.role,
                                                                 a.name)
    body = {'role': a.role, 'name': a.name}
    if a.expires_in is not None:
        body['expires_in'] = a.expires_in
    doc = c.call('POST', '/v1/credentials', body)
    if not a.out:
        return doc, '%s\n(%s %s; shown once: store it as its --token-file)' \
            % (doc['token'], a.role, a.name)
    try:
        fd = os.open(a.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, 'w') as f:
            f.write(doc['token'] + '\n')
    except OSError as e:
        raise CliError('issued, but cannot write %s: %s (issue it again)'
                       % (a.out, e.strerror)) from None
    return dict(doc, token='(in %s)' % a.out), \
        'issued %s %s: token in %s (mode 0600)' % (a.role, a.name, a.out)


def add_parser(sub):
    s = sub.add_parser('credentials', help='scoped tokens for extenders, '
                       'hypervisors, readers, tenants and operators: list, '
                       'issue ROLE NAME, revoke ROLE NAME')
    s.add_argument('action', nargs='?', default='list',
                   choices=['list', 'issue', 'revoke'])
    s.add_argument('role', nargs='?',
                   choices=list(ROLES))
    s.add_argument('name', nargs='?', help='the host, reader or tenant it '
                   'is for')
    s.add_argument('--out', help='write the token to this file (0600) '
                   'instead of printing it')
    s.add_argument('--expires-in', type=int, metavar='SECONDS',
                   help='the token is refused after this many seconds '
                   '(default: until revoked)')
    s.set_defaults(fn=cmd_credentials)
    return s


def _when(t):
    if t is None:
        return 'never'
    return time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime(t))
