"""The user's logical network as an SVG picture (pure): VMs as boxes with
their vNICs, wires as edges between them, each labelled with its connector,
state and rate. Drawn from `core.topology_view.inspect`'s view; `vwctl
topology graph` saves it, the dashboard shows it beside the physical view.

Layout: nodes in columns by their distance (in links) from the file's
first node of each connected part, in file order within a column, so a
three-tier file reads left to right: client, firewall, web, database.
Colours are the dashboard's: green collapsed (both ends on one host), blue
tunnelled (between hosts of a site), orange extended (between sites), grey
anything else (pending, waiting, missing).
"""
from typing import Dict, List, Tuple
from xml.sax.saxutils import escape, quoteattr

BOX_W, HEAD_H, NIC_H, COL_GAP, ROW_GAP, PAD = 190, 40, 20, 150, 26, 24
COLOURS = {'collapsed': '#2e7d32', 'tunnelled': '#1565c0',
           'extended': '#ef6c00'}
DASH = {'tunnelled': '6 4', 'extended': '2 4'}
ICONS = {'server': '\u25a4', 'switch': '\u21c4', 'router': '\u2295',
         'firewall': '\u25a6', 'provider-switch': '\u21c6'}


def rate_text(bps):
    if bps is None:
        return ''
    for unit, div in (('Gbit/s', 1e9), ('Mbit/s', 1e6), ('kbit/s', 1e3)):
        if bps >= div:
            return '%.1f %s' % (bps / div, unit)
    return '%.0f bit/s' % bps


# A split switch's parts told apart by their ports' dots.
PART_COLOURS = ('#455a64', '#8e24aa', '#00897b', '#c0ca33', '#6d4c41',
                '#d81b60')


def _part_colour(node, part):
    if not part or part not in node.get('parts', ()):
        return PART_COLOURS[0]
    return PART_COLOURS[node['parts'].index(part) % len(PART_COLOURS)]


def columns(view) -> Dict[str, int]:
    """{node: column}: breadth-first from the first node of each part."""
    names = [n['name'] for n in view['nodes']]
    near: Dict[str, List[str]] = {n: [] for n in names}
    for k in view['links']:
        a, b = k['a'].split(':')[0], k['b'].split(':')[0]
        near[a].append(b)
        near[b].append(a)
    col: Dict[str, int] = {}
    for start in names:
        if start in col:
            continue            # every part starts in column 0
        col[start], todo = 0, [start]
        while todo:
            n = todo.pop(0)
            for m in near[n]:
                if m not in col:
                    col[m] = col[n] + 1
                    todo.append(m)
    return col


def _layout(view):
    col = columns(view)
    boxes: Dict[str, Tuple[float, float, float]] = {}     # x, y, height
    heights: Dict[int, float] = {}
    for node in view['nodes']:
        c = col[node['name']]
        h = HEAD_H + NIC_H * max(1, len(node['nics'])) + 6
        y = heights.get(c, PAD + 30)
        boxes[node['name']] = (PAD + c * (BOX_W + COL_GAP), y, h)
        heights[c] = y + h + ROW_GAP
    width = PAD * 2 + (max(col.values(), default=0) + 1) * (BOX_W + COL_GAP) \
        - COL_GAP
    height = max(heights.values(), default=PAD + 30) + PAD
    return col, boxes, width, height


def svg(view) -> str:
    col, boxes, width, height = _layout(view)
    ports: Dict[str, Tuple[float, float, int]] = {}   # "node:nic" -> x, y, side
    peer_col = {}
    for k in view['links']:
        a, b = k['a'], k['b']
        peer_col[a] = col[b.split(':')[0]]
        peer_col[b] = col[a.split(':')[0]]
    out = ['<svg xmlns="http://www.w3.org/2000/svg" class="vw-logical" '
           'width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="sans-serif" font-size="12" data-topology=%s>'
           % (width, height, width, height, quoteattr(view['name'])),
           '<text x="%d" y="%d" font-size="15" font-weight="bold">%s</text>'
           % (PAD, PAD + 4, escape('%s%s' % (view['name'], (
               '  (tenant %s)' % view['tenant']) if view.get('tenant')
               else '')))]
    for node in view['nodes']:
        x, y, h = boxes[node['name']]
        c = col[node['name']]
        sub = '%s on %s' % (node['kind'], ', '.join(node['hosts']) or (
            'the provider' if node['kind'] == 'provider-switch'
            else 'not running'))
        if node.get('parts'):
            sub = 'split: %d parts, one mesh' % len(node['parts'])
        out.append('<g class="vw-node" data-node=%s data-kind=%s>' % (
            quoteattr(node['name']), quoteattr(node['kind'])))
        out.append('<rect x="%.0f" y="%.0f" width="%d" height="%.0f" rx="6" '
                   'fill="#fafafa" stroke="#455a64"/>' % (x, y, BOX_W, h))
        out.append('<text x="%.0f" y="%.0f" font-weight="bold">%s %s</text>'
                   % (x + 8, y + 16, ICONS.get(node['kind'], ''),
                      escape(node['name'])))
        out.append('<text x="%.0f" y="%.0f" fill="#607d8b" font-size="10">'
                   '%s</text>' % (x + 8, y + 31, escape(sub)))
        for i, nic in enumerate(node['nics']):
            ny = y + HEAD_H + NIC_H * i + 10
            ep = '%s:%s' % (node['name'], nic['name'])
            right = peer_col.get(ep, c + 1) >= c
            px = x + BOX_W if right else x
            ports[ep] = (px, ny, 1 if right else -1)
            label = nic['name'] + ('  ' + nic['ip'] if nic.get('ip') else '')
            part = nic.get('part')
            if part:                # a split switch's port: its part
                label += '  \u00b7 %s' % part
            out.append('<g class="vw-nic" data-nic=%s data-vnic=%s%s>'
                       '<circle cx="%.0f" cy="%.0f" r="4" fill="%s"/>'
                       '<text x="%.0f" y="%.0f" text-anchor="%s">%s</text>'
                       '<title>%s</title></g>' % (
                           quoteattr(ep), quoteattr(nic.get('vnic') or ''),
                           ' data-part=%s' % quoteattr(part) if part else '',
                           px, ny, _part_colour(node, part),
                           px - 8 if right else px + 8, ny + 4,
                           'end' if right else 'start', escape(label),
                           escape('vNIC %s' % (nic.get('vnic') or
                                               'not found'))))
        out.append('</g>')
    for k in view['links']:
        (x1, y1, s1), (x2, y2, s2) = ports[k['a']], ports[k['b']]
        colour = COLOURS.get(k['state'], '#9e9e9e')
        bend = max(40.0, abs(x2 - x1) / 2)
        d = 'M%.0f %.0f C%.0f %.0f %.0f %.0f %.0f %.0f' % (
            x1, y1, x1 + s1 * bend, y1, x2 + s2 * bend, y2, x2, y2)
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        text = ' '.join(t for t in (k['connector_id'] or '', k['state'],
                                    rate_text(k.get('bits_per_second')))
                        if t)
        out.append('<g class="vw-wire" data-link=%s data-state=%s '
                   'data-connector=%s>' % (quoteattr(k['link']),
                                           quoteattr(k['state']),
                                           quoteattr(k['connector_id'] or '')))
        out.append('<path d="%s" fill="none" stroke="%s" stroke-width="2.5"%s/>'
                   % (d, colour, ' stroke-dasharray="%s"' % DASH[k['state']]
                      if k['state'] in DASH else ''))
        out.append('<text x="%.0f" y="%.0f" text-anchor="middle" '
                   'font-size="10" fill="%s" stroke="#fff" stroke-width="3" '
                   'paint-order="stroke">%s</text>' % (mx, my - 5, colour,
                                                        escape(text)))
        out.append('<title>%s</title></g>' % escape('%s - %s: %s%s' % (
            k['a'], k['b'], k['state'],
            (' via ' + ' > '.join(k['path'])) if k.get('path') else '')))
    out.append('</svg>')
    return '\n'.join(out) + '\n'
