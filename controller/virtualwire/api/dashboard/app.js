// The dashboard: sign in with the API token, then poll the API every second
// and redraw (hosts, wires with rates and loss, the topology, migrations).
// The token stays in this tab's sessionStorage until "Sign out".
import {html, clear, rate} from './draw.js';
import {drawTopology} from './topology.js';
import {drawMigrations} from './timeline.js';
import {drawLogical} from './logical.js';

const POLL_MS = 1000;
const $ = (id) => document.getElementById(id);
let timer = null;

function token() { return sessionStorage.getItem('vw-token'); }

class Unauthorized extends Error {}

async function get(path) {
  const r = await fetch(path, {headers: {Authorization: 'Bearer ' + token()},
                               cache: 'no-store'});
  if (r.status === 401) throw new Unauthorized('the token was refused');
  const body = await r.json();
  if (!r.ok) return {error: (body.error && body.error.message) || r.statusText,
                     status: r.status};
  return body;
}

async function signIn(ev) {
  ev.preventDefault();
  const t = $('token').value.trim();
  if (!t) { $('login-error').textContent = 'Enter the API token.'; return; }
  sessionStorage.setItem('vw-token', t);
  try {
    await get('/v1/status');
  } catch (e) {
    sessionStorage.removeItem('vw-token');
    $('login-error').textContent = e instanceof Unauthorized ?
      'Wrong token: the controller refused it.' :
      'The controller did not answer: ' + e.message;
    return;
  }
  $('token').value = '';
  show();
}

function signOut() {
  sessionStorage.removeItem('vw-token');
  clearTimeout(timer);
  location.reload();
}

function show() {
  $('login').hidden = true;
  $('app').hidden = false;
  $('signout').hidden = false;
  poll();
}

async function poll() {
  clearTimeout(timer);
  try {
    const [status, hosts, wires, vnics, stats, migrations, topologies, switches] =
      await Promise.all([
        get('/v1/status'), get('/v1/hosts'), get('/v1/wires'), get('/v1/vnics'),
        get('/v1/stats'), get('/v1/migrations'), get('/v1/topologies'),
        get('/v1/switches')]);
    await logicalView(topologies.topologies || []);
    const byId = {};
    for (const s of (stats.wires || [])) byId[s.connector_id] = s;
    // A tenant's credential may not see the cloud's hosts: draw the hosts
    // its own vNICs are on, from what it may see.
    const scoped = hosts.status === 403;
    render({status, scoped, wires: wires.wires || [],
            hosts: scoped ? hostsOf(vnics.vnics || []) : hosts.hosts || [],
            vnics: vnics.vnics || [], stats: byId, statsError: stats.error,
            migrations: migrations.migrations || [],
            switches: switches.switches || []});
    $('banner').hidden = !stats.error;
    if (stats.error) $('banner').textContent = 'Flow statistics: ' + stats.error;
    $('updated').textContent = 'updated ' + new Date().toLocaleTimeString([], {hour12: false});
    $('updated').dataset.at = String(Date.now());
  } catch (e) {
    if (e instanceof Unauthorized) { signOut(); return; }
    $('banner').hidden = false;
    $('banner').textContent = 'The controller is not answering (' + e.message +
      '); retrying every second.';
  }
  timer = setTimeout(poll, POLL_MS);
}

// The topology chosen in the list (the first, until one is chosen): its
// inspect view, drawn.
async function logicalView(list) {
  const sel = $('logical-select');
  const key = (t) => (t.tenant || '') + '/' + t.name;
  const chosen = sel.value;
  clear(sel);
  for (const t of list) {
    sel.appendChild(html('option', {value: key(t)},
                         t.name + (t.tenant ? ' (' + t.tenant + ')' : '')));
  }
  if (list.some((t) => key(t) === chosen)) sel.value = chosen;
  const t = list.find((x) => key(x) === sel.value);
  const view = t ? await get('/v1/topologies/' + encodeURIComponent(t.name) +
                             (t.tenant ? '?tenant=' + encodeURIComponent(t.tenant) : ''))
    : null;
  drawLogical($('logical'), view && !view.error ? view : null);
}

export function hostsOf(vnics) {
  const names = [...new Set(vnics.map((v) => v.host))].sort();
  return names.map((name) => ({name, site: '', role: 'host', connected: true,
                               synced: true, flows: '-', scoped: true}));
}

function render(d) {
  const up = d.hosts.filter((h) => h.connected && h.synced).length;
  const moving = d.migrations.filter((m) => m.state === 'prepared').length;
  $('summary').textContent = (d.scoped ?
    `tenant view: ${d.vnics.length} vNICs · ` :
    `${up}/${d.hosts.length} hosts up · `) +
    `${d.wires.length} wires · ${moving} migrating`;
  $('hosts-card').hidden = d.scoped;
  drawTopology($('topology'), d);
  wireTable(d);
  drawMigrations($('migrations'), d.migrations);
  hostTable(d.hosts);
  switchTable(d.switches);
}

// One row per port of each provider switch, with the collector's counts
// ('-': the switch's host not read yet).
function switchTable(switches) {
  $('switches-card').hidden = !switches.length;
  const body = clear($('switches').tBodies[0]);
  const n = (v) => (v === null || v === undefined) ? '-' : v.toLocaleString();
  for (const s of switches) {
    for (const p of s.ports) {
      const c = p.counters || {};
      const tr = html('tr', {'data-switch': s.name, 'data-port': p.name});
      const cells = [
        // A split switch's port runs on its part's host.
        [s.name], [p.part || s.host || '-'], [p.name], [p.peer || '-'],
        [n(c.entered_packets), 'num entered'], [n(c.delivered_packets), 'num delivered'],
        [n(c.flooded_packets), 'num flooded'], [n(c.learned_macs), 'num macs']];
      for (const [text, cls] of cells) tr.appendChild(html('td', cls ? {class: cls} : {}, text));
      body.appendChild(tr);
    }
  }
}

// Figures of a wire for people: rates each way, throughput, window loss.
export function wireFigures(s) {
  const win = (dir) => (s && s[dir] && s[dir].window) || {};
  const ab = win('a_to_b'), ba = win('b_to_a');
  return {
    ab: ab.packets_per_second, ba: ba.packets_per_second,
    mbit: s ? ((ab.bits_per_second || 0) + (ba.bits_per_second || 0)) / 1e6 : undefined,
    // Lost beyond doubt, and how many more are not settled yet (in
    // flight or not counted yet: maybe lost, maybe not).
    lost: s ? (ab.surely_lost_packets || 0) + (ba.surely_lost_packets || 0) : undefined,
    unsure: (ab.uncertain_packets || 0) + (ba.uncertain_packets || 0),
    delivered: s ? s.a_to_b.delivered_packets + s.b_to_a.delivered_packets : undefined,
  };
}

function wireTable(d) {
  const body = clear($('wires').tBodies[0]);
  for (const w of d.wires) {
    const f = wireFigures(d.stats[w.connector_id]);
    const tr = html('tr', {'data-wire': w.connector_id});
    const cells = [
      [w.connector_id], [w.state, 'state ' + w.state], [w.a], [w.b],
      [(w.path && w.path.length ? w.path : [w.host_a, w.host_b].filter(Boolean)).join(' › ')],
      [rate(f.ab), 'num rate-ab'], [rate(f.ba), 'num rate-ba'],
      [f.mbit === undefined ? '-' : f.mbit.toFixed(3), 'num'],
      [f.lost === undefined ? '-' : String(f.lost) + (f.unsure ? ' (+' + f.unsure + ' unsettled)' : ''),
       'num lost' + (f.lost > 0 ? ' lossy' : '')],
      [f.delivered === undefined ? '-' : f.delivered.toLocaleString(), 'num delivered']];
    for (const [text, cls] of cells) tr.appendChild(html('td', cls ? {class: cls} : {}, text));
    body.appendChild(tr);
  }
  if (!d.wires.length) {
    body.appendChild(html('tr')).appendChild(html('td', {colspan: 10}, 'No wires yet.'));
  }
}

function hostTable(hosts) {
  const body = clear($('hosts').tBodies[0]);
  for (const h of hosts) {
    const tr = html('tr', {'data-host': h.name});
    const sw = !h.connected ? ['not connected', 'down'] :
      h.synced ? ['connected', 'up'] : ['connected, syncing', 'down'];
    const drops = h.drops || {};
    const cells = [
      [h.name], [h.site || '-'], [h.role], [sw[0], sw[1]],
      [String(h.vnics), 'num'], [String(h.flows), 'num'],
      [String(drops.rejected_packets ?? '-'), 'num'],
      [String(drops.unwired_packets ?? '-'), 'num'],
      [String(drops.held_packets ?? '-'), 'num'],
      [(h.warnings || []).join('; ')]];
    for (const [text, cls] of cells) tr.appendChild(html('td', cls ? {class: cls} : {}, text));
    body.appendChild(tr);
  }
}

$('login-form').addEventListener('submit', signIn);
$('signout').addEventListener('click', signOut);
$('logical-select').addEventListener('change', poll);
if (token()) show();
