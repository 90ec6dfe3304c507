// A timeline per migration and vNIC: its steps as nodes in the order they
// happened, each segment labelled with how long the step took after the one
// before (seconds of copying and milliseconds of switchover, side by side,
// which a linear time axis could not show at once).
import {svg, html, clear, duration, clock} from './draw.js';

const SHOWN = 8, SPACING = 150, LEFT = 20;
const ENDS = {source_left: 'source left', destination_left: 'destination left (aborted)',
              timed_out: 'timed out (back to source)'};
const OPTIONAL = [['source_stopped', 'source stopped'],
                  ['held_released', 'held frames released'],
                  ['held_delivered', 'held frames delivered']];

export function vnicSteps(m, v) {
  const s = (m.steps || {})[v] || {};
  const sisters = (m.sisters || {})[v];
  const all = [
    {key: 'announced', what: m.found_by === 'ovsdb' ? 'seen in OVSDB' : 'announced',
     at: m.started_at},
    {key: 'tap_appeared', what: 'tap appeared', at: s.tap_appeared},
    {key: 'activated', what: 'activated' + (m.activated_by && m.activated_by[v] ?
      ' (' + m.activated_by[v] + ')' : ''), at: (m.activated || {})[v]},
    {key: 'sisters_moved', what: 'sisters moved', at: s.sisters_moved,
     note: sisters && sisters.length ? sisters.join(', ') : undefined},
  ];
  // Only moves that have them (an agent's word at STOP; held frames).
  for (const [key, what] of OPTIONAL) {
    if (s[key] !== undefined) all.push({key, what, at: s[key]});
  }
  const end = Object.keys(ENDS).find((k) => s[k] !== undefined);
  all.push(end ? {key: end, what: ENDS[end], at: s[end], failed: end !== 'source_left'}
               : {key: 'source_left', what: 'source left'});
  const done = all.filter((x) => x.at !== undefined && x.at !== null)
    .sort((x, y) => x.at - y.at);
  const open = all.filter((x) => x.at === undefined || x.at === null);
  return done.concat(m.state === 'prepared' || end === undefined ? open : []);
}

function timeline(m, v) {
  const steps = vnicSteps(m, v);
  const el = svg('svg', {class: 'timeline', 'data-vnic': v,
    width: LEFT + SPACING * (steps.length - 1) + 110, height: 62});
  steps.forEach((st, i) => {
    const x = LEFT + 30 + i * SPACING;
    if (i > 0) {
      const prev = steps[i - 1];
      const known = st.at != null && prev.at != null;
      el.appendChild(svg('line', {x1: x - SPACING + 8, y1: 20, x2: x - 8, y2: 20,
                                  class: known ? '' : 'waiting'}));
      if (known) {
        el.appendChild(svg('text', {x: x - SPACING / 2, y: 13, 'text-anchor': 'middle',
                                    class: 'took'}, '+' + duration(st.at - prev.at)));
      }
    }
    const g = el.appendChild(svg('g', {class: 'step' + (st.at != null ? ' done' : '') +
      (st.failed ? ' failed' : ''), 'data-step': st.key}));
    g.appendChild(svg('circle', {cx: x, cy: 20, r: 7}));
    g.appendChild(svg('text', {x, y: 42, 'text-anchor': 'middle', class: 'what'}, st.what));
    g.appendChild(svg('text', {x, y: 56, 'text-anchor': 'middle', class: 'when'},
      st.at != null ? clock(st.at) + (st.note ? ' · ' + st.note : '') : 'waiting'));
    if (st.note) g.appendChild(svg('title', {}, 'hosts whose flows changed: ' + st.note));
  });
  return el;
}

export function drawMigrations(root, migrations) {
  clear(root);
  if (!migrations.length) {
    root.appendChild(html('p', {class: 'hint'}, 'No migrations yet.'));
    return;
  }
  for (const m of migrations.slice(0, SHOWN)) {
    const box = root.appendChild(html('div', {class: 'migration', 'data-vm': m.vm || m.vm_uuid,
                                               'data-state': m.state}));
    const sources = [...new Set(Object.values(m.sources || {}).filter(Boolean))];
    const took = m.ended_at ? 'took ' + duration(m.ended_at - m.started_at)
      : 'for ' + duration(Date.now() / 1000 - m.started_at);
    const title = box.appendChild(html('div', {class: 'title'},
      `${m.vm || m.vm_uuid}: ${sources.join(', ') || '?'} → ${m.destination}`));
    title.appendChild(html('span', {class: 'state ' + m.state}, m.state));
    title.appendChild(html('span', {class: 'hint'}, ' · started ' + clock(m.started_at) +
      ' · ' + took));
    for (const v of m.vnics) {
      box.appendChild(html('div', {class: 'vnic'}, 'vNIC ' + v));
      box.appendChild(timeline(m, v));
    }
  }
  if (migrations.length > SHOWN) {
    root.appendChild(html('p', {class: 'hint'},
      `${migrations.length - SHOWN} older migrations: GET /v1/migrations or vwctl migrations.`));
  }
}
