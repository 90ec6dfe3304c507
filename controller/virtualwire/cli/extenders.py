"""`vwctl extenders`: the encrypted links between sites' extenders, and
how each pair of sites is joined (direct, or through a relay)."""
import time

from tabulate import tabulate


def _age(since):
    if not since:
        return '-'
    s = max(0, time.time() - float(since))
    return '%ds' % s if s < 120 else '%dm' % (s // 60)


def _bytes(n):
    n = float(n or 0)
    for unit in ('B', 'KiB', 'MiB', 'GiB'):
        if n < 1024 or unit == 'GiB':
            return '%.0f %s' % (n, unit) if unit == 'B' else \
                '%.1f %s' % (n, unit)
        n /= 1024
    return '-'


def link_rows(links):
    rows = []
    for k in links:
        a, b = k['sides'][k['a']], k['sides'][k['b']]
        rows.append([
            '%s <-> %s' % (k['a'], k['b']) + (' (via relay %s)' % k['relay']
                                              if k.get('relay') else ''),
            k['state'],
            '%s (%s)' % (a.get('public') or '?', a.get('nat') or '?'),
            '%s (%s)' % (b.get('public') or '?', b.get('nat') or '?'),
            # WireGuard's latest handshake (it renews the session every
            # 2 minutes), the newer of the two sides' views.
            _age(max(float(a.get('handshake') or 0),
                     float(b.get('handshake') or 0))),
            '%.1f ms' % a['rtt_ms'] if a.get('rtt_ms') is not None else '-',
            '%s / %s' % (_bytes(a.get('tx_bytes')), _bytes(b.get('tx_bytes'))),
            k.get('why_down') or '-'])
    return rows


def cmd_extenders(c, a):
    if a.action == 'connect':
        doc = c.call('POST', '/v1/extender-links', {'a': a.a, 'b': a.b})
        return doc, 'linked %s <-> %s (ports %d / %d); the agents bring it ' \
            'up' % (doc['a'], doc['b'], doc['sides'][doc['a']]['port'],
                    doc['sides'][doc['b']]['port'])
    if a.action == 'rotate':
        doc = c.call('POST', '/v1/extenders/%s/rotate-key' % a.a)
        return doc, 'extender %s makes a new key; its peers take the new ' \
            'public key when it reports it' % a.a
    if a.action == 'disconnect':
        c.call('DELETE', '/v1/extender-links/%s/%s' % (a.a, a.b))
        return {'unlinked': [a.a, a.b]}, 'unlinked %s <-> %s' % (a.a, a.b)
    doc = c.call('GET', '/v1/extender-links')
    links = tabulate(link_rows(doc['links']), headers=[
        'link', 'state', 'a public (nat)', 'b public (nat)', 'handshake',
        'rtt', 'sent a / b (encrypted)', 'why down'])
    sites = tabulate([[' - '.join(s['sites']), s['state'],
                       'relayed via %s' % ', '.join(s['relays'])
                       if s.get('relayed') else 'direct'
                       if s['path'] else '-', ' > '.join(s['path']) or '-']
                      for s in doc['sites']],
                     headers=['sites', 'state', 'path', 'extenders'])
    return doc, '%s\n\n%s' % (links, sites)


def add_parser(sub):
    s = sub.add_parser('extenders', help="extenders' links between sites: "
                       'list, connect A B, disconnect A B, rotate A')
    s.add_argument('action', nargs='?', default='list',
                   choices=['list', 'connect', 'disconnect', 'rotate'])
    s.add_argument('a', nargs='?', help='extender (connect/disconnect)')
    s.add_argument('b', nargs='?', help='extender (connect/disconnect)')
    s.set_defaults(fn=cmd_extenders)
    return s
