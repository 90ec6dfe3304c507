"""`vwctl switch`: switches the provider implements in Open vSwitch flows
(issue 41). Their ports are wire ends: `vwctl connect VNIC sw:NAME/PORT`.

    vwctl switch list
    vwctl switch show NAME
    vwctl switch create NAME --ports 4|up,down [--tenant T] [--host H]
    vwctl switch delete NAME
    vwctl switch move NAME --to HOST | --advised
    vwctl switch advise NAME
    vwctl switch split NAME --auto | --part PORT=HOST ... | --join
"""
from tabulate import tabulate

from virtualwire.cli.client import CliError


def _ports(text):
    return int(text) if text.isdigit() else \
        [p for p in text.split(',') if p]


def _split_body(a):
    if a.auto:
        return {'auto': True}
    if a.join:
        return {'parts': {}}
    parts = {}
    for item in a.part:
        port, sep, host = item.partition('=')
        if not sep or not port or not host:
            raise CliError('--part takes PORT=HOST, got %r' % item)
        parts[port] = host
    return {'parts': parts}


def _sum(ports, key):
    """A counter over a switch's ports ('-': its host not read yet)."""
    figs = [(p.get('counters') or {}).get(key) for p in ports]
    return '-' if None in figs else sum(figs)


def _list_rows(switches):
    return [[s['name'], s['tenant'], s.get('host') or '-',
             '%d/%d' % (sum(1 for p in s['ports'] if p['wire']),
                        len(s['ports'])),
             _sum(s['ports'], 'entered_packets'),
             _sum(s['ports'], 'flooded_packets'),
             _sum(s['ports'], 'learned_macs'),
             s['mac_limit'], s['idle_timeout']]
            for s in switches]


def _delivered(p):
    c = p.get('counters') or {}
    return '-' if c.get('delivered_packets') is None \
        else c['delivered_packets']


def _show(s):
    head = 'switch %s (tenant %s, number %d) on %s%s\n' % (
        s['name'], s['tenant'], s['number'], s.get('host') or '-',
        '' if s.get('placed', True) else ' (host not connected)')
    head += 'learns at most %d MACs per port, forgets one unseen for %d s' \
        % (s['mac_limit'], s['idle_timeout'])
    if s.get('split'):
        head += '\nsplit: parts on %s, joined by a mesh' % ', '.join(
            s.get('parts') or ['(hidden)'])
    rows = [[p['name'], '0x%08x' % p['wire'] if p['wire'] else '-',
             p['peer'] or '-', p.get('peer_host') or '-',
             p.get('entered_packets', '?'), _delivered(p),
             p.get('flooded_packets', '?'),
             len(p['macs']) if 'macs' in p else '?']
            for p in s['ports']]
    macs = ['  %s: %s' % (p['name'], ' '.join(p['macs']))
            for p in s['ports'] if p.get('macs')]
    tail = '\n\nlearned MACs:\n' + '\n'.join(macs) if macs else ''
    if s.get('figures_error'):
        tail += '\n\nno figures: %s' % s['figures_error']
    return '%s\n\n%s%s' % (head, tabulate(rows, headers=[
        'port', 'wire', 'other end', 'its host', 'entered', 'delivered',
        'flooded', 'MACs']), tail)


def _mbit(bps):
    return '-' if bps is None else '%.2f' % (bps / 1e6)


def _advice(d):
    rows = [[h, _mbit(b), 'the switch now' if h == d['host'] else
             'advised' if h == d['advised'] and d['move'] else '']
            for h, b in sorted(d['by_host_bps'].items(),
                               key=lambda hb: -hb[1])]
    cross = d['crossing_bps']
    text = 'switch %s on %s: %s\n%s\n\ncrossing the underlay now %s ' \
        'Mbit/s%s' % (
            d['switch'], d['host'] or '-',
            'move to %s' % d['advised'] if d['move'] else 'stay',
            d['reason'], _mbit(cross['now']),
            ', on %s %s Mbit/s' % (d['advised'], _mbit(cross['advised']))
            if d['move'] else '')
    if rows:
        text += '\n\n' + tabulate(rows, headers=[
            "its ports' VMs on", 'Mbit/s (both ways)', ''])
    if d['unread_ports']:
        text += '\n\nnot read yet: %s' % ', '.join(d['unread_ports'])
    return text


def cmd_switch(c, a):
    act = a.switch_action
    if act == 'list':
        doc = c.call('GET', '/v1/switches')
        return doc, tabulate(_list_rows(doc['switches']), headers=[
            'switch', 'tenant', 'host', 'wired', 'entered', 'flooded',
            'MACs', 'MAC limit/port', 'idle s'])
    if act == 'show':
        doc = c.call('GET', '/v1/switches/%s' % a.name)
        return doc, _show(doc)
    if act == 'create':
        body = {'name': a.name, 'ports': _ports(a.ports)}
        for k in ('tenant', 'host', 'mac_limit', 'idle_timeout'):
            if getattr(a, k) is not None:
                body[k] = getattr(a, k)
        doc = c.call('POST', '/v1/switches', body)
        return doc, 'created switch %s with %d ports: plug wires into ' \
            'sw:%s/PORT\n\n%s' % (doc['name'], len(doc['ports']),
                                  doc['name'], _show(doc))
    if act == 'delete':
        c.call('DELETE', '/v1/switches/%s' % a.name)
        return {'deleted': a.name}, 'deleted switch %s' % a.name
    if act == 'split':
        doc = c.call('PUT', '/v1/switches/%s/parts' % a.name,
                     _split_body(a))
        return doc, 'switch %s now has parts on %s\n\n%s' % (
            a.name, ', '.join(doc.get('parts') or ['-']), _show(doc))
    if act == 'advise':
        doc = c.call('GET', '/v1/switches/%s/advice' % a.name)
        return doc, _advice(doc)
    if act == 'move':
        to = a.to
        if a.advised:
            advice = c.call('GET', '/v1/switches/%s/advice' % a.name)
            if not advice['move']:
                return dict(advice, moved=False), 'switch %s stays on ' \
                    '%s: %s' % (a.name, advice['host'], advice['reason'])
            to = advice['advised']
        doc = c.call('PUT', '/v1/switches/%s/host' % a.name, {'host': to})
        return doc, 'switch %s now on %s; its wires follow' % (
            a.name, doc['host'])
    raise CliError('unknown switch action %s' % act)


def add_parser(sub):
    s = sub.add_parser('switch', help='switches the provider implements in '
                       'Open vSwitch: list, show, create, delete, move, '
                       'advise, split')
    acts = s.add_subparsers(dest='switch_action', metavar='ACTION')
    acts.required = True
    acts.add_parser('list', help='every switch you may see')
    x = acts.add_parser('show', help='ports, their wires and other ends')
    x.add_argument('name')
    x = acts.add_parser('create', help='a new switch')
    x.add_argument('name')
    x.add_argument('--ports', required=True,
                   help='a count (p1..pN) or names: up,down,...')
    x.add_argument('--tenant', help="whose vNICs it joins (operator; a "
                   "tenant's credential makes its own)")
    x.add_argument('--host', help='where it runs (operator; default: the '
                   "host with most of the tenant's vNICs)")
    x.add_argument('--mac-limit', type=int, dest='mac_limit',
                   help='MACs learned per port (default 4096)')
    x.add_argument('--idle-timeout', type=int, dest='idle_timeout',
                   help='s a MAC unseen is kept (default 300)')
    x = acts.add_parser('delete', help='a switch with no wire plugged in')
    x.add_argument('name')
    x = acts.add_parser('move', help='run it on another host (operator)')
    x.add_argument('name')
    where = x.add_mutually_exclusive_group(required=True)
    where.add_argument('--to', metavar='HOST')
    where.add_argument('--advised', action='store_true',
                       help='where `advise` says, if a move is worth it')
    x = acts.add_parser('advise', help='where it should run by its ports\' '
                        'traffic (operator)')
    x.add_argument('name')
    x = acts.add_parser('split', help='parts on other hosts, joined by a '
                        'mesh (operator)')
    x.add_argument('name')
    how = x.add_mutually_exclusive_group(required=True)
    how.add_argument('--auto', action='store_true', help="each plugged "
                     "port on its other end's host")
    how.add_argument('--part', action='append', metavar='PORT=HOST',
                     help='this port on a part on that host (repeat)')
    how.add_argument('--join', action='store_true',
                     help='one central switch again')
    s.set_defaults(fn=cmd_switch)
    return s
