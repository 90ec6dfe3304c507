"""`vwctl placement [--topology NAME] [--top N]`: the VM moves that would
take the most traffic off tunnels and extenders (`core.advice`), from the
collector's per-wire rates. Advice only: nothing moves; `vwctl migrate`
(or `--topology`) does, when you choose."""
import urllib.parse

from tabulate import tabulate

from virtualwire.cli.client import CliError
from virtualwire.core import advice


def _bps(stats):
    return sum(((stats.get(d) or {}).get('window') or {}).get(
        'bits_per_second') or 0.0 for d in ('a_to_b', 'b_to_a'))


def gather(c, a):
    """(wire uses, vNIC -> VM, host -> site, VM -> name) from the API."""
    stats = {s['connector_id']: s for s in c.call('GET', '/v1/stats')['wires']}
    wires = c.call('GET', '/v1/wires')['wires']
    names = {g['uuid']: g['name'] for g in c.call('GET',
                                                  '/v1/guests')['guests']}
    if a.topology:
        q = '?tenant=%s' % urllib.parse.quote(a.tenant) if a.tenant else ''
        view = c.call('GET', '/v1/topologies/%s%s' % (
            urllib.parse.quote(a.topology, safe=''), q))
        mine = {k['connector_id'] for k in view['links']}
        wires = [w for w in wires if w['connector_id'] in mine]
        names.update({n['vm']: n['name'] for n in view['nodes'] if n['vm']})
    vm_of = {v['id']: v['vm_id'].lower() for v in
             c.call('GET', '/v1/vnics')['vnics'] if v.get('vm_id')}
    try:
        site = {h['name']: h.get('site', 'default')
                for h in c.call('GET', '/v1/hosts')['hosts']}
    except CliError as e:
        if 'HTTP 403' not in str(e):
            raise
        # A tenant's credential does not see the cloud's hosts: every
        # wire between hosts counts as tunnelled.
        site = {}
    uses = [advice.WireUse(w['connector_id'], (w['a'], w['b']),
                           (w['host_a'], w['host_b']),
                           _bps(stats.get(w['connector_id'], {})))
            for w in wires]
    return uses, vm_of, site, names


def cmd_placement(c, a):
    uses, vm_of, site, names = gather(c, a)
    found = advice.moves(uses, vm_of, site, a.min_kbit * 1000.0)[:a.top]
    mbit = 1e6
    doc = {'moves': [{
        'vm': m.vm, 'name': names.get(m.vm), 'from': m.source,
        'to': m.target, 'from_site': site.get(m.source),
        'to_site': site.get(m.target), 'collapses': m.collapses,
        'off_extenders_bps': m.off_extenders,
        'off_tunnels_bps': m.off_tunnels,
        'onto_extenders_bps': m.onto_extenders,
        'onto_tunnels_bps': m.onto_tunnels} for m in found],
        'wires_read': len(uses)}
    if not found:
        return doc, ('no move would take traffic off tunnels or extenders '
                     '(%d wires read; busy ones are collapsed or none is '
                     'busy)' % len(uses))
    rows = [[i + 1, names.get(m.vm) or m.vm, '%s (%s)' % (
        m.source, site.get(m.source)), '%s (%s)' % (m.target, site.get(
            m.target)), ', '.join(m.collapses) or '-',
        '%.2f' % (m.off_extenders / mbit), '%.2f' % (m.off_tunnels / mbit),
        '%.2f' % ((m.onto_extenders + m.onto_tunnels) / mbit)]
        for i, m in enumerate(found)]
    return doc, ('advice only: nothing is moved (vwctl migrate VM HOST '
                 'does)\n' + tabulate(rows, headers=[
                     '#', 'vm', 'from', 'to', 'collapses', 'off extenders '
                     'Mbit/s', 'off tunnels Mbit/s', 'added Mbit/s']))


def add_parser(sub):
    s = sub.add_parser('placement', help='advice: the VM moves that would '
                       'take the most traffic off tunnels and extenders')
    s.add_argument('--topology', metavar='NAME',
                   help="only this topology's wires")
    s.add_argument('--tenant', help="the tenant's topology (operator)")
    s.add_argument('--top', type=int, default=10)
    s.add_argument('--min-kbit', type=float, default=1.0, metavar='KBIT',
                   help='a wire below this rate (kbit/s) draws no move')
    s.set_defaults(fn=cmd_placement)
