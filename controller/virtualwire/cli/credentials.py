"""`vwctl credentials`: scoped tokens for extenders, hypervisors' libvirt
hooks and readers (Prometheus, dashboards): list, issue ROLE NAME
[--out FILE], revoke ROLE NAME."""
import os

from tabulate import tabulate

from virtualwire.cli.client import CliError
from virtualwire.core.credentials import ROLES


def cmd_credentials(c, a):
    if a.action == 'list':
        doc = c.call('GET', '/v1/credentials')
        return doc, tabulate([[x['role'], x['name'], x['created_at']]
                              for x in doc['credentials']],
                             headers=['role', 'name', 'issued'])
    if not a.role or not a.name:
        raise CliError('usage: vwctl credentials %s ROLE NAME' % a.action)
    if a.action == 'revoke':
        c.call('DELETE', '/v1/credentials/%s/%s' % (a.role, a.name))
        return {'revoked': [a.role, a.name]}, \
            'revoked %s %s: its token is refused from now on' % (a.role,
                                                                 a.name)
    doc = c.call('POST', '/v1/credentials', {'role': a.role, 'name': a.name})
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
                       'hypervisors, readers and tenants: list, issue ROLE '
                       'NAME, '
                       'revoke ROLE NAME')
    s.add_argument('action', nargs='?', default='list',
                   choices=['list', 'issue', 'revoke'])
    s.add_argument('role', nargs='?',
                   choices=list(ROLES))
    s.add_argument('name', nargs='?', help='the host, reader or tenant it '
                   'is for')
    s.add_argument('--out', help='write the token to this file (0600) '
                   'instead of printing it')
    s.set_defaults(fn=cmd_credentials)
    return s
