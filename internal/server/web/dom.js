// Building the page: every piece of data goes in as text (textContent or a
// Text node), never as markup.

// el makes an element. props: class, text, on* listeners, the properties
// value/checked/disabled/hidden, anything else as an attribute. Children
// are nodes or strings (strings become text).
export function el(tag, props, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') n.className = v;
    else if (k === 'text') n.textContent = String(v);
    else if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'hidden') n[k] = v;
    else n.setAttribute(k, v === true ? '' : String(v));
  }
  put(n, kids);
  return n;
}

function put(n, kids) {
  for (const k of kids.flat(Infinity)) {
    if (k == null || k === false) continue;
    n.append(k instanceof Node ? k : String(k));
  }
}

// fill replaces a node's children.
export function fill(n, ...kids) {
  n.replaceChildren();
  put(n, kids);
  return n;
}

// throttle calls fn at once, then at most once per ms: a call inside the
// window runs once when it ends.
export function throttle(fn, ms) {
  let timer = null;
  let again = false;
  const t = () => {
    if (timer) {
      again = true;
      return;
    }
    fn();
    timer = setTimeout(() => {
      timer = null;
      if (again) {
        again = false;
        t();
      }
    }, ms);
  };
  t.cancel = () => {
    clearTimeout(timer);
    timer = null;
    again = false;
  };
  return t;
}

// latest drops the answers of calls overtaken by a later one: wrap(fn)
// returns fn's result, or undefined when a later call already answered.
export function latest() {
  let issued = 0;
  let applied = 0;
  return async (fn) => {
    const n = ++issued;
    const v = await fn();
    if (n < applied) return undefined;
    applied = n;
    return v;
  };
}

export const STATUSES = ['running', 'paused', 'created', 'completed', 'failed', 'user_exit'];

const STATUS_LABELS = {
  running: 'running', paused: 'paused', created: 'created', completed: 'completed',
  failed: 'failed', user_exit: 'stopped',
};

export function statusBadge(status) {
  return el('span', { class: `badge st-${STATUSES.includes(status) ? status : 'failed'}`, 'data-role': 'status', title: status }, STATUS_LABELS[status] || status);
}

export function money(usd, unknown) {
  let s;
  if (!usd) s = '$0';
  else if (usd < 0.01) s = '$' + usd.toFixed(4);
  else if (usd < 100) s = '$' + usd.toFixed(2);
  else s = '$' + Math.round(usd).toLocaleString();
  return unknown ? `${s} + ${unknown} unreported` : s;
}

export function count(n) {
  n = n || 0;
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1e3).toFixed(n < 1e4 ? 1 : 0) + 'k';
  return (n / 1e6).toFixed(n < 1e7 ? 2 : 1) + 'M';
}

export function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  const two = (x) => String(x).padStart(2, '0');
  if (h) return `${h}h ${two(m)}m`;
  if (m) return `${m}m ${two(sec)}s`;
  return `${sec}s`;
}

export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

// elapsed is a span that shows the time since iso and ticks (see tick).
export function elapsed(iso) {
  const n = el('time', { class: 'elapsed', datetime: iso, 'data-since': iso });
  n.textContent = duration(Date.now() - new Date(iso).getTime());
  return n;
}

// tick brings every elapsed span up to date; the app calls it each second.
export function tick() {
  for (const n of document.querySelectorAll('[data-since]')) {
    const t = new Date(n.dataset.since).getTime();
    if (!Number.isNaN(t)) n.textContent = duration(Date.now() - t);
  }
}

// table makes a table from a header row and body rows of cells (nodes or
// strings); it scrolls inside its own box on a narrow screen.
export function table(head, rows, cls) {
  return el('div', { class: 'table-wrap' },
    el('table', { class: cls || '' },
      el('thead', null, el('tr', null, head.map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', null, rows.map((r) => el('tr', null, r.map((c) => el('td', null, c)))))));
}

// oneLine is a text's first line, cut at a word with … when longer than
// max; cut says whether anything was left out.
export function oneLine(text, max) {
  const s = String(text || '').trim();
  const nl = s.indexOf('\n');
  let line = (nl < 0 ? s : s.slice(0, nl)).trim();
  let cut = nl >= 0;
  if (line.length > max) {
    const sp = line.lastIndexOf(' ', max);
    line = line.slice(0, sp > max / 2 ? sp : max).trimEnd();
    cut = true;
  }
  return { text: cut ? line + '…' : line, cut };
}
