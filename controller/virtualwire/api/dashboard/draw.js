// Building blocks for the pages' pictures and tables. Everything shown is
// set as text (never parsed as HTML): a name from the API cannot inject
// markup.
const SVG = 'http://www.w3.org/2000/svg';

export function svg(tag, attrs = {}, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

export function html(tag, attrs = {}, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

export function clear(e) {
  while (e.firstChild) e.removeChild(e.firstChild);
  return e;
}

// A duration for people: 3.2 ms, 412 ms, 12.4 s, 3 min 5 s.
export function duration(seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 1) return (seconds * 1000).toFixed(seconds < 0.01 ? 1 : 0) + ' ms';
  if (seconds < 120) return seconds.toFixed(1) + ' s';
  return Math.floor(seconds / 60) + ' min ' + Math.round(seconds % 60) + ' s';
}

export function clock(unix) {
  const d = new Date(unix * 1000);
  return d.toLocaleTimeString([], {hour12: false}) + '.' +
    String(d.getMilliseconds()).padStart(3, '0');
}

export function rate(x) {
  if (x === undefined || x === null) return '-';
  return x >= 100 ? Math.round(x).toLocaleString() : x.toFixed(1);
}
