"""`vwctl intent`: the safe start (control.safe_start). `orphans` lists
the flows of wires the intent database does not have, which the
controller holds on the switches instead of deleting; `release-orphans`
says the database is right, so they are deleted."""
from tabulate import tabulate


def cmd_intent(c, a):
    if a.action == 'release-orphans':
        doc = c.call('POST', '/v1/intent/release-orphans')
        return doc, 'released: the flows of %d wire(s) not in the intent ' \
            'database are deleted now' % len(doc['held_wires'])
    doc = c.call('GET', '/v1/intent/orphans')
    if not doc['held_wires']:
        return doc, 'no flows held: every wire on the switches is in the ' \
            'intent database'
    return doc, tabulate(sorted(doc['hosts'].items()),
                         headers=['host', 'flows held']) + \
        '\nwires the intent database does not have: %s\nrestore the ' \
        'database, or if it is right: vwctl intent release-orphans' % \
        ', '.join(doc['held_wires'])


def add_parser(sub):
    s = sub.add_parser('intent', help='flows held because the intent '
                       'database lacks their wires: orphans, '
                       'release-orphans')
    s.add_argument('action', nargs='?', default='orphans',
                   choices=['orphans', 'release-orphans'])
    s.set_defaults(fn=cmd_intent)
    return s
