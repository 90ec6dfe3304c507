"""`vwctl hosts`: the hosts (list), and their enrolment: requests that
await the operator (pending), approve NAME, refuse NAME, a one-time
join token bound to a host name (join-token NAME --ttl SECONDS); and
revoke NAME [--certificate SHA256]: its certificates taken back, its
connected switch hung up."""
import datetime

from tabulate import tabulate

from virtualwire.cli.client import CliError

ACTIONS = ['list', 'pending', 'approve', 'refuse', 'join-token', 'revoke',
           'revoked']


def _when(t):
    return datetime.datetime.fromtimestamp(
        t, datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%SZ')


def cmd(list_hosts):
    def run(c, a):
        if a.action == 'list':
            return list_hosts(c, a)
        if a.action == 'revoked':
            doc = c.call('GET', '/v1/revocations')
            rows = [[e['kind'], e['name'], e['digest'][:23], _when(
                e['revoked_at']), e['reason']] for e in doc['revocations']]
            return doc, tabulate(rows, headers=[
                'kind', 'name', 'digest', 'revoked', 'reason'])
        if a.action == 'pending':
            doc = c.call('GET', '/v1/enrolments')
            rows = [[e['name'], e['state'], e['fingerprint'], e['peer'] or '-',
                     _when(e['requested_at'])] for e in doc['enrolments']]
            return doc, tabulate(rows, headers=[
                'name', 'state', 'key fingerprint', 'from', 'requested'])
        if not a.name:
            raise CliError('hosts %s needs a host name' % a.action)
        if a.action == 'approve':
            doc = c.call('POST', '/v1/enrolments/%s/approve' % a.name)
            return doc, '%s approved: it fetches its certificate now' \
                % a.name
        if a.action == 'revoke':
            body = {'reason': a.reason} if a.reason else {}
            if a.certificate:
                body['certificate'] = a.certificate
            doc = c.call('POST', '/v1/hosts/%s/revoke' % a.name, body)
            what = ('certificate %s... of %s' % (a.certificate[:16], a.name)
                    if a.certificate else 'every certificate of %s until now'
                    % a.name)
            tokens = ', '.join(doc.get('tokens_revoked') or []) or 'none'
            return doc, ('revoked %s: its switch is hung up within a second '
                         'and refused after; tokens revoked: %s' % (what,
                                                                     tokens))
        if a.action == 'refuse':
            c.call('DELETE', '/v1/enrolments/%s' % a.name)
            return {'name': a.name, 'state': 'refused'}, \
                '%s refused: its request is gone' % a.name
        doc = c.call('POST', '/v1/join-tokens', {'name': a.name,
                                                'ttl': a.ttl})
        return doc, ('join token for %s, valid until %s, once:\n%s'
                     % (a.name, _when(doc['expires_at']), doc['token']))
    return run


def add_parser(sub, list_hosts):
    s = sub.add_parser('hosts', help='hosts: list; enrolment: pending, '
                       'approve NAME, refuse NAME, join-token NAME; revoke '
                       'NAME [--certificate SHA256], revoked')
    s.add_argument('action', nargs='?', default='list', choices=ACTIONS)
    s.add_argument('name', nargs='?', help='host (approve, refuse, '
                   'join-token)')
    s.add_argument('--ttl', type=int, default=3600, metavar='SECONDS',
                   help='join-token: valid this long (default 3600)')
    s.add_argument('--certificate', metavar='SHA256',
                   help='revoke: only this certificate (its SHA-256 '
                        'fingerprint, as `vwctl --json hosts` shows it)')
    s.add_argument('--reason', help='revoke: why (kept in the list)')
    s.set_defaults(fn=cmd(list_hosts))
    return s
