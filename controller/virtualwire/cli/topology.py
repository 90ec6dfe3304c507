"""`vwctl topology`: your network as a file (`core.topology_file`).

  vwctl topology apply FILE [--dry-run] [--wait]   make the wires match it
  vwctl topology inspect NAME                      nodes, vNICs, wires
  vwctl topology graph NAME [-o FILE.svg]          the picture
  vwctl topology destroy NAME                      its wires, and it
  vwctl topology list

--tenant T: the operator acting on tenant T's topology (a tenant's own
credential needs none). A refused file is reported as FILE:LINE: why.
"""
import urllib.parse

from tabulate import tabulate

from virtualwire.cli.client import CliError
from virtualwire.core.topology_graph import rate_text


def _q(a, **more):
    q = {'tenant': a.tenant} if getattr(a, 'tenant', None) else {}
    q.update({k: v for k, v in more.items() if v is not None})
    return '?' + urllib.parse.urlencode(q) if q else ''


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        raise CliError('cannot read %s: %s' % (path, e.strerror))


def _name_of(text, path):
    """The file's name field, read as the controller will (so the request
    goes to the right topology; the controller checks the file)."""
    import yaml
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, 'problem_mark', None)
        raise CliError('%s:%s not valid YAML: %s' % (
            path, '%d:' % (mark.line + 1) if mark else '',
            getattr(e, 'problem', None) or e))
    if not isinstance(doc, dict) or not isinstance(doc.get('name'), str):
        raise CliError('%s: a topology file needs a "name"' % path)
    return doc['name']


def plan_rows(plan):
    rows = [['create', c['link'].replace('|', ' - '), c['a'], c['b'], '']
            for c in plan['create']]
    rows += [['delete', (d['link'] or '').replace('|', ' - '), d['a'],
              d['b'], d['connector_id']] for d in plan['delete']]
    rows += [['keep', k['link'].replace('|', ' - '), '', '',
              k['connector_id']] for k in plan['keep']]
    sw = plan.get('switches') or {}
    rows += [[act + ' switch', name, '', '', '']
             for act in ('create', 'delete') for name in sw.get(act, [])]
    return tabulate(rows, headers=['action', 'link', 'vNIC a', 'vNIC b',
                                   'connector'])


def cmd_apply(c, a):
    text = _read(a.file)
    name = _name_of(text, a.file)
    try:
        doc = c.call('PUT', '/v1/topologies/%s%s' % (
            urllib.parse.quote(name, safe=''),
            _q(a, wait='programmed' if a.wait else None)),
            {'source': text, 'dry_run': a.dry_run})
    except CliError as e:
        msg = str(e)
        if msg.startswith('topology:'):
            raise CliError(a.file + msg[len('topology'):]) from None
        raise
    p = doc['plan']
    n = (len(p['create']), len(p['delete']), len(p['keep']))
    if a.dry_run:
        head = 'dry run: would create %d, delete %d, keep %d wires ' \
            '(nothing changed)' % n
    elif doc['changed']:
        head = 'applied %s: created %d, deleted %d, kept %d wires' % (
            (name,) + n)
    else:
        head = 'nothing to do: the deployment matches %s (%d wires kept)' \
            % (a.file, n[2])
    return doc, head + '\n' + plan_rows(p)


def cmd_inspect(c, a):
    doc = c.call('GET', '/v1/topologies/%s%s' % (
        urllib.parse.quote(a.name, safe=''), _q(a)))
    nodes = [[n['name'], n['kind'], n['vm'] or '-', x['name'],
              x['vnic'] or '-', x['host'] or '-', x['ip'] or '']
             for n in doc['nodes'] for x in n['nics']]
    links = [[k['link'].replace('|', ' - '), k['connector_id'] or '-',
              k['state'], ' > '.join(k['path']) or '-',
              rate_text(k['bits_per_second']) or '-']
             for k in doc['links']]
    text = '%s%s, applied %s (generation %d)\n\n%s\n\n%s' % (
        doc['name'], ' (tenant %s)' % doc['tenant'] if doc['tenant'] else '',
        doc['applied_at'], doc['generation'],
        tabulate(nodes, headers=['node', 'kind', 'vm', 'nic', 'vnic',
                                 'host', 'ip']),
        tabulate(links, headers=['link', 'connector', 'state', 'path',
                                 'rate']))
    return doc, text


def cmd_graph(c, a):
    svg = c.call('GET', '/v1/topologies/%s/graph%s' % (
        urllib.parse.quote(a.name, safe=''), _q(a)), text=True)
    out = a.output or '%s.svg' % a.name
    try:
        with open(out, 'w') as f:
            f.write(svg)
    except OSError as e:
        raise CliError('cannot write %s: %s' % (out, e.strerror))
    doc = {'file': out, 'bytes': len(svg.encode()),
           'nodes': svg.count('class="vw-node"'),
           'links': svg.count('class="vw-wire"')}
    return doc, 'wrote %s: %d nodes, %d links' % (out, doc['nodes'],
                                                  doc['links'])


def cmd_destroy(c, a):
    doc = c.call('DELETE', '/v1/topologies/%s%s' % (
        urllib.parse.quote(a.name, safe=''),
        _q(a, wait='programmed' if a.wait else None)))
    return doc, 'destroyed %s: deleted %d wires%s' % (
        a.name, len(doc['deleted']), (': ' + ', '.join(doc['deleted']))
        if doc['deleted'] else '')


def cmd_list(c, a):
    doc = c.call('GET', '/v1/topologies%s' % _q(a))
    rows = [[t['name'], t['tenant'] or '-', t['nodes'], t['links'],
             ', '.join('%d %s' % (n, s) for s, n in
                       sorted(t['states'].items())) or '-', t['applied_at']]
            for t in doc['topologies']]
    return doc, tabulate(rows, headers=['name', 'tenant', 'nodes', 'links',
                                        'wires', 'applied'])


def add_parser(sub):
    s = sub.add_parser('topology', help='your network as a file: apply, '
                       'inspect, graph, destroy, list')
    verbs = s.add_subparsers(dest='verb', required=True)
    v = verbs.add_parser('apply', help='make the wires match the file')
    v.add_argument('file')
    v.add_argument('--dry-run', action='store_true',
                   help='print the plan; change nothing')
    v.add_argument('--wait', action='store_true',
                   help='answer once every switch holds the change')
    v.set_defaults(fn=cmd_apply)
    for verb, fn, helptext in (
            ('inspect', cmd_inspect, 'nodes, vNICs and wires'),
            ('graph', cmd_graph, 'the logical network as SVG'),
            ('destroy', cmd_destroy, "delete the topology's wires")):
        v = verbs.add_parser(verb, help=helptext)
        v.add_argument('name')
        v.set_defaults(fn=fn)
        if verb == 'graph':
            v.add_argument('-o', '--output', metavar='FILE.svg')
        if verb == 'destroy':
            v.add_argument('--wait', action='store_true')
    v = verbs.add_parser('list', help='topologies applied')
    v.set_defaults(fn=cmd_list)
    for v in verbs.choices.values():
        v.add_argument('--tenant', help="the tenant's topology (operator)")
