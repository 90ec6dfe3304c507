"""`vwctl config show` and `vwctl config set NAME VALUE`: the settings
every controller instance shares (the intent database's Global row)."""
from tabulate import tabulate


def show(c, a):
    doc = c.call('GET', '/v1/settings')
    rows = [[s['name'], s['value'], s['source'], s['flag']]
            for s in doc['settings']]
    return doc, tabulate(rows, headers=['setting', 'value', 'from',
                                        "this instance's flag"])


def set_one(c, a):
    doc = c.call('PUT', '/v1/settings/%s' % a.name, {'value': a.value})
    return doc, ('%s = %s: every controller instance applies it within a '
                 'second' % (doc['name'], doc['value']))


def add_verbs(verbs):
    s = verbs.add_parser('show', help='the settings every controller '
                         'instance shares, and where each comes from')
    s.set_defaults(fn=show)
    s = verbs.add_parser('set', help='change a shared setting at run time '
                         '(move-timeout, hold, hold-frames, hold-bytes, '
                         'hold-rate, activation-settle-ms, stats-interval)')
    s.add_argument('name')
    s.add_argument('value')
    s.set_defaults(fn=set_one)
