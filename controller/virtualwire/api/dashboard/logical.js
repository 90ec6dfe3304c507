// The user's logical network (the paper's user layer, over the physical
// view below it): one topology's VMs as boxes with their vNICs, its links
// as wires coloured by state and labelled with connector and rate. The same
// layout as `vwctl topology graph` (core/topology_graph.py): columns by
// distance in links from the file's first node.
import {svg, clear} from './draw.js';

const BOX_W = 190, HEAD_H = 40, NIC_H = 20, COL_GAP = 150, ROW_GAP = 26, PAD = 24;
const ICON = {server: '\u25a4', switch: '\u21c4', router: '\u2295', firewall: '\u25a6',
              'provider-switch': '\u21c6'};

export function columns(view) {
  const near = {};
  for (const n of view.nodes) near[n.name] = [];
  for (const k of view.links) {
    const a = k.a.split(':')[0], b = k.b.split(':')[0];
    near[a].push(b); near[b].push(a);
  }
  const col = {};
  for (const n of view.nodes) {
    if (n.name in col) continue;
    col[n.name] = 0;
    const todo = [n.name];
    while (todo.length) {
      const x = todo.shift();
      for (const m of near[x]) if (!(m in col)) { col[m] = col[x] + 1; todo.push(m); }
    }
  }
  return col;
}

export function rateText(bps) {
  if (bps === null || bps === undefined) return '';
  for (const [unit, div] of [['Gbit/s', 1e9], ['Mbit/s', 1e6], ['kbit/s', 1e3]]) {
    if (bps >= div) return (bps / div).toFixed(1) + ' ' + unit;
  }
  return Math.round(bps) + ' bit/s';
}

export function drawLogical(el, view) {
  clear(el);
  if (!view) {
    el.setAttribute('width', 420); el.setAttribute('height', 40);
    el.appendChild(svg('text', {x: 8, y: 24, class: 'empty'},
                       'No topology applied: vwctl topology apply FILE'));
    return;
  }
  el.dataset.topology = view.name;
  const col = columns(view), box = {}, height = {};
  for (const n of view.nodes) {
    const c = col[n.name], h = HEAD_H + NIC_H * Math.max(1, n.nics.length) + 6;
    const y = height[c] ?? PAD;
    box[n.name] = [PAD + c * (BOX_W + COL_GAP), y, h];
    height[c] = y + h + ROW_GAP;
  }
  const cols = Math.max(0, ...Object.values(col)) + 1;
  el.setAttribute('width', PAD * 2 + cols * (BOX_W + COL_GAP) - COL_GAP);
  el.setAttribute('height', Math.max(PAD, ...Object.values(height)) + PAD);
  const peerCol = {};
  for (const k of view.links) {
    peerCol[k.a] = col[k.b.split(':')[0]];
    peerCol[k.b] = col[k.a.split(':')[0]];
  }
  const port = {};
  for (const n of view.nodes) {
    const [x, y, h] = box[n.name], c = col[n.name];
    const g = el.appendChild(svg('g', {class: 'vw-node', 'data-node': n.name,
                                       'data-kind': n.kind}));
    g.appendChild(svg('rect', {x, y, width: BOX_W, height: h, rx: 6}));
    g.appendChild(svg('text', {x: x + 8, y: y + 16, class: 'name'},
                      (ICON[n.kind] || '') + ' ' + n.name));
    const parts = n.parts || [];
    g.appendChild(svg('text', {x: x + 8, y: y + 31, class: 'sub'},
                      parts.length ? `split: ${parts.length} parts, one mesh` :
                      n.kind + ' on ' + (n.hosts.join(', ') ||
                        (n.kind === 'provider-switch' ? 'the provider' : 'not running'))));
    n.nics.forEach((nic, i) => {
      const ny = y + HEAD_H + NIC_H * i + 10, ep = n.name + ':' + nic.name;
      const right = (peerCol[ep] ?? c + 1) >= c, px = right ? x + BOX_W : x;
      port[ep] = [px, ny, right ? 1 : -1];
      const attrs = {class: 'vw-nic', 'data-nic': ep, 'data-vnic': nic.vnic || ''};
      if (nic.part) attrs['data-part'] = nic.part;   // a split switch's port
      const p = g.appendChild(svg('g', attrs));
      const k = parts.indexOf(nic.part);
      p.appendChild(svg('circle', {cx: px, cy: ny, r: 4,
                                   class: k >= 0 ? 'part' + (k % 6) : ''}));
      p.appendChild(svg('text', {x: right ? px - 8 : px + 8, y: ny + 4,
                                 'text-anchor': right ? 'end' : 'start'},
                        nic.name + (nic.ip ? '  ' + nic.ip : '') +
                        (nic.part ? '  \u00b7 ' + nic.part : '')));
      p.appendChild(svg('title', {}, 'vNIC ' + (nic.vnic || 'not found') +
                        (nic.host ? ' on ' + nic.host : '')));
    });
  }
  for (const k of view.links) {
    const [x1, y1, s1] = port[k.a], [x2, y2, s2] = port[k.b];
    const bend = Math.max(40, Math.abs(x2 - x1) / 2);
    const g = el.appendChild(svg('g', {class: 'vw-wire ' + k.state, 'data-link': k.link,
                                       'data-state': k.state,
                                       'data-connector': k.connector_id || ''}));
    g.appendChild(svg('path', {class: 'wire ' + k.state,
                               d: `M${x1} ${y1} C${x1 + s1 * bend} ${y1} ${x2 + s2 * bend} ${y2} ${x2} ${y2}`}));
    g.appendChild(svg('text', {x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 5, class: 'wire-label',
                               'text-anchor': 'middle'},
                      [k.connector_id, k.state, rateText(k.bits_per_second)]
                        .filter(Boolean).join(' ')));
    g.appendChild(svg('title', {}, `${k.a} - ${k.b}: ${k.state}` +
                      (k.path && k.path.length ? ' via ' + k.path.join(' > ') : '')));
  }
}
