// The topology picture: sites as frames, hosts in them, each host's vNICs
// (and gateway ends) as chips, wires as arcs under the hosts: green inside a
// host (collapsed), blue dashed between hosts of a site (tunnelled), orange
// dotted through the extenders between sites (extended). A moving vNIC shows
// as a ghost chip on its destination with a purple arrow from its source.
import {svg, clear, rate} from './draw.js';

const CHIP_W = 104, CHIP_H = 22, GAP = 8, HEAD = 40, HOST_GAP = 28;
const SITE_PAD = 14, SITE_HEAD = 20, SITE_GAP = 36, TOP = 46, LANE = 26;

function chipsOf(d) {
  // host -> [{id, kind, wire}] in a stable order (by wire, then id)
  const on = {};
  const add = (host, chip) => { if (host) (on[host] ||= []).push(chip); };
  const wireOf = {};
  for (const w of d.wires) { wireOf[w.a] = w; wireOf[w.b] = w; }
  const seen = new Set();
  for (const v of d.vnics) {
    add(v.host, {id: v.id, kind: 'vnic', wire: wireOf[v.id]});
    seen.add(v.id + '@' + v.host);
  }
  for (const w of d.wires) {
    for (const [end, host] of [[w.a, w.host_a], [w.b, w.host_b]]) {
      if (host && !seen.has(end + '@' + host)) {
        add(host, {id: end, kind: end.includes('/') ? 'gateway' : 'vnic', wire: w});
        seen.add(end + '@' + host);
      }
    }
    for (const [v, m] of Object.entries(w.moving || {})) {
      add(m.destination, {id: v, kind: 'ghost', wire: w, move: m});
    }
  }
  for (const list of Object.values(on)) {
    list.sort((x, y) => ((x.wire ? x.wire.id : 1e12) - (y.wire ? y.wire.id : 1e12)) ||
              x.id.localeCompare(y.id));
  }
  return on;
}

function layout(d) {
  const chips = chipsOf(d);
  const sites = {};
  for (const h of d.hosts) (sites[h.scoped ? '' : h.site || 'no site'] ||= []).push(h);
  const boxes = {}, frames = [], at = {};
  let x = 10;
  for (const name of Object.keys(sites).sort()) {
    const x0 = x;
    x += SITE_PAD;
    for (const h of sites[name].sort((p, q) => p.name.localeCompare(q.name))) {
      const list = chips[h.name] || [];
      const w = Math.max(200, list.length * (CHIP_W + GAP) + GAP);
      const b = {x, y: TOP + SITE_HEAD, w, h: HEAD + CHIP_H + 10, host: h};
      boxes[h.name] = b;
      list.forEach((c, i) => {
        const cx = x + GAP + i * (CHIP_W + GAP);
        c.box = {x: cx, y: b.y + HEAD, w: CHIP_W, h: CHIP_H};
        if (c.kind !== 'ghost') at[c.id + '@' + h.name] = c.box;
      });
      x += w + HOST_GAP;
    }
    x += SITE_PAD - HOST_GAP;
    frames.push({name, x: x0, y: TOP, w: x - x0,
                 h: SITE_HEAD + HEAD + CHIP_H + 10 + SITE_PAD});
    x += SITE_GAP;
  }
  return {boxes, frames, chips, at, width: x,
          base: TOP + SITE_HEAD + HEAD + CHIP_H + 10 + SITE_PAD};
}

const bottom = (b) => [b.x + b.w / 2, b.y + b.h];

// One path under the hosts through the points, each hop an arc whose
// lowest point is `low`.
function arcs(points, low) {
  let p = `M ${points[0][0]} ${points[0][1]}`;
  for (let i = 1; i < points.length; i++) {
    const [x0] = points[i - 1], [x1, y1] = points[i];
    p += ` C ${x0} ${low} ${x1} ${low} ${x1} ${y1}`;
  }
  return p;
}

export function drawTopology(root, d) {
  clear(root);
  if (!d.hosts.length) {
    root.setAttribute('width', 400); root.setAttribute('height', 40);
    root.appendChild(svg('text', {x: 10, y: 24, class: 'empty'}, 'No hosts have connected yet.'));
    return;
  }
  const L = layout(d);
  const defs = root.appendChild(svg('defs'));
  const marker = defs.appendChild(svg('marker', {id: 'arrow', viewBox: '0 0 10 10', refX: 9,
    refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'}));
  marker.appendChild(svg('path', {d: 'M 0 0 L 10 5 L 0 10 z', fill: '#8250df'}));
  for (const f of L.frames) {
    const g = root.appendChild(svg('g', {class: 'site', 'data-site': f.name}));
    g.appendChild(svg('rect', {x: f.x, y: f.y, width: f.w, height: f.h, rx: 8}));
    g.appendChild(svg('text', {x: f.x + 10, y: f.y + 15},
      f.name ? 'site ' + f.name : 'your hosts'));
  }
  for (const [name, b] of Object.entries(L.boxes)) {
    const h = b.host, ok = h.connected && h.synced;
    const g = root.appendChild(svg('g', {class: 'host' + (ok ? '' : ' down'), 'data-host': name}));
    g.appendChild(svg('rect', {x: b.x, y: b.y, width: b.w, height: b.h, rx: 5}));
    g.appendChild(svg('text', {x: b.x + 8, y: b.y + 16, class: 'name'}, name));
    g.appendChild(svg('text', {x: b.x + 8, y: b.y + 31, class: 'sub'},
      h.scoped ? 'your vNICs here' :
      `${h.role} · ${ok ? 'connected' : h.connected ? 'syncing' : 'NOT CONNECTED'} · ${h.flows} flows`));
    for (const c of L.chips[name] || []) {
      const cg = g.appendChild(svg('g', {class: 'vnic ' + c.kind, 'data-end': c.id}));
      cg.appendChild(svg('rect', {x: c.box.x, y: c.box.y, width: c.box.w, height: c.box.h, rx: 4}));
      const label = c.kind === 'ghost' ? c.id + ' (arriving)' : c.id;
      cg.appendChild(svg('text', {x: c.box.x + 5, y: c.box.y + 15},
        label.length > 17 ? label.slice(0, 16) + '…' : label));
      cg.appendChild(svg('title', {}, label));
    }
  }
  let lane = 0, deepest = L.base;
  // Short wires on the inner lanes, so that arcs nest rather than cross.
  const span = (w) => {
    const ea = L.at[w.a + '@' + w.host_a], eb = L.at[w.b + '@' + w.host_b];
    return ea && eb ? Math.abs(ea.x - eb.x) : Infinity;
  };
  for (const w of [...d.wires].sort((p, q) => span(p) - span(q))) {
    const ea = L.at[w.a + '@' + w.host_a], eb = L.at[w.b + '@' + w.host_b];
    if (!ea || !eb) continue;
    const pts = [bottom(ea)];
    for (const hop of (w.path || []).slice(1, -1)) if (L.boxes[hop]) pts.push(bottom(L.boxes[hop]));
    pts.push(bottom(eb));
    const low = L.base + 14 + LANE * lane++;
    deepest = Math.max(deepest, low);
    root.appendChild(svg('path', {d: arcs(pts, low), class: 'wire ' + w.state,
                                  'data-wire': w.connector_id}));
    const s = d.stats[w.connector_id];
    const win = (k) => (s && s[k] && s[k].window) || {};
    const pps = (win('a_to_b').packets_per_second || 0) + (win('b_to_a').packets_per_second || 0);
    const lost = (win('a_to_b').surely_lost_packets || 0) + (win('b_to_a').surely_lost_packets || 0);
    const xs = pts.map((p) => p[0]);
    const mid = (Math.min(...xs) + Math.max(...xs)) / 2;
    const y = 0.25 * pts[0][1] + 0.75 * low + 13;
    root.appendChild(svg('text', {x: mid, y, 'text-anchor': 'middle',
      class: 'wire-label' + (lost ? ' lossy' : ''), 'data-wire': w.connector_id},
      `${w.connector_id} · ${s ? rate(pps) + ' pkt/s' : '-'}` + (lost ? ` · lost ${lost}` : '')));
    deepest = Math.max(deepest, y);
    for (const [v, m] of Object.entries(w.moving || {})) {
      const from = L.at[v + '@' + m.source];
      const ghost = (L.chips[m.destination] || []).find((c) => c.kind === 'ghost' && c.id === v);
      if (!from || !ghost) continue;
      // Over the hosts, from above the chip to above its ghost.
      const [x1, x2] = [from.x + from.w / 2, ghost.box.x + ghost.box.w / 2];
      const top = TOP + SITE_HEAD;
      root.appendChild(svg('path', {class: 'move', 'data-vnic': v,
        d: `M ${x1} ${top} C ${x1} ${TOP - 34} ${x2} ${TOP - 34} ${x2} ${top - 2}`}));
      root.appendChild(svg('text', {x: (x1 + x2) / 2, y: 14, 'text-anchor': 'middle',
        class: 'wire-label'}, `${v}: ${m.source} → ${m.destination}` +
        (m.activated ? ' (activated)' : ' (copying)')));
    }
  }
  root.setAttribute('width', L.width);
  root.setAttribute('height', deepest + 16);
}
