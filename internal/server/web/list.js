// The first page: every loop as one row of a table, with search, filters
// and a sort, kept live by the all-loops event stream.
import { banner, get, loopPath, post, stream } from './api.js';
import { count, duration, el, elapsed, fill, money, oneLine, statusBadge, STATUSES, throttle, when } from './dom.js';

const STATUS_TITLES = {
  running: 'running', paused: 'paused', created: 'not started', completed: 'completed',
  failed: 'failed', user_exit: 'stopped by a person',
};

// actionsFor is what a loop's status allows: no Start on a completed loop
// or on one whose state file cannot be read.
export function actionsFor(s) {
  switch (s.status) {
    case 'running': return ['pause', 'stop'];
    case 'paused': return ['resume', 'stop'];
    case 'completed': return [];
    default: return s.error ? [] : ['start'];
  }
}

const ACTION_LABELS = { start: 'Start', pause: 'Pause', resume: 'Resume', stop: 'Stop' };
const SORTS = { newest: 'newest first', name: 'by name', status: 'by status' };
const SAVED = 'aot.list'; // the search, filters and sort, kept for the session

export class ListPage {
  constructor(root) {
    this.root = root;
    this.loops = new Map(); // id -> Summary
    this.rows = new Map(); // id -> {sig, node}
    this.refreshers = new Map();
    this.busy = new Set();
    this.confirming = new Set(); // loops whose Stop waits for its confirmation
    this.errors = new Map();
    this.closed = false;
    this.reloadSoon = throttle(() => this.reload(), 1000);
    this.view = { q: '', status: '', workspace: '', sort: 'newest' };
    try {
      Object.assign(this.view, JSON.parse(sessionStorage.getItem(SAVED) || '{}'));
    } catch { /* a damaged entry: the defaults */ }
  }

  open() {
    document.title = 'aot: loops';
    const v = this.view;
    const change = (k) => (e) => {
      v[k] = e.target.value;
      try { sessionStorage.setItem(SAVED, JSON.stringify(v)); } catch { /* private mode */ }
      this.render();
    };
    this.search = el('input', { type: 'search', 'data-role': 'search', value: v.q, placeholder: 'search title, goal, workspace, id', 'aria-label': 'search the loops', oninput: change('q') });
    this.statusSel = el('select', { 'data-role': 'status-filter', 'aria-label': 'status', onchange: change('status') });
    this.wsSel = el('select', { 'data-role': 'workspace-filter', 'aria-label': 'workspace', onchange: change('workspace') });
    const sortSel = el('select', { 'data-role': 'sort', 'aria-label': 'sort', onchange: change('sort') },
      Object.entries(SORTS).map(([k, label]) => el('option', { value: k }, label)));
    sortSel.value = v.sort;
    this.shown = el('span', { class: 'muted', 'data-role': 'shown' });
    this.body = el('tbody');
    this.table = el('table', { class: 'loops', hidden: true },
      el('thead', null, el('tr', null, ['loop', 'status', 'progress', 'iteration', 'started', 'elapsed', 'cost', 'agents', ''].map((h) => el('th', { scope: 'col' }, h)))),
      this.body);
    this.none = el('p', { class: 'empty', hidden: true }, 'No loop matches the search and filters.');
    this.empty = el('p', { class: 'empty', hidden: true },
      'No loops yet. aot serve shows the loop of each workspace it serves (.claude/aot-loop-state.md) and those created with POST /api/loops.');
    this.loading = el('p', { class: 'empty' }, 'Loading the loops…');
    fill(this.root, el('h1', { class: 'sr-only' }, 'Loops'),
      el('div', { class: 'toolbar' }, this.search, this.statusSel, this.wsSel, sortSel, this.shown),
      this.loading, this.empty, this.none, this.table);
    this.stream = stream('/api/stream', {
      journal: (d) => this.touched(d.loop_id),
      state: (d) => this.touched(d.loop_id),
      notice: (d) => banner(d.message, 'info'),
      reset: () => this.reloadSoon(),
    });
    this.reload();
  }

  close() {
    this.closed = true;
    this.stream.close();
    this.reloadSoon.cancel();
    for (const r of this.refreshers.values()) r.cancel();
  }

  async reload() {
    let doc;
    try {
      doc = await get('/api/loops');
    } catch (e) {
      this.loading.textContent = e.message;
      return;
    }
    if (this.closed) return;
    this.loading.hidden = true;
    this.loops = new Map(doc.loops.map((l) => [l.loop_id, l]));
    this.render();
  }

  // touched: an event came for a loop; its summary is fetched again, at
  // most four times a second.
  touched(id) {
    if (!id || !this.loops.has(id)) {
      this.reloadSoon();
      return;
    }
    let r = this.refreshers.get(id);
    if (!r) {
      r = throttle(() => this.refresh(id), 250);
      this.refreshers.set(id, r);
    }
    r();
  }

  async refresh(id) {
    let s;
    try {
      s = await get(loopPath(id));
    } catch (e) {
      if (e.status === 404) this.reloadSoon();
      return;
    }
    if (this.closed) return;
    delete s.ccw;
    delete s.trail;
    delete s.corrections;
    this.loops.set(id, s);
    this.render();
  }

  render() {
    const all = [...this.loops.values()];
    this.options(all);
    const v = this.view;
    const q = v.q.trim().toLowerCase();
    const shown = all.filter((s) => (!v.status || s.status === v.status) && (!v.workspace || s.workspace === v.workspace) &&
      (!q || [s.title, s.goal, s.workspace, s.loop_id, s.description].some((x) => (x || '').toLowerCase().includes(q))));
    shown.sort(SORTERS[v.sort] || SORTERS.newest);
    for (const id of [...this.rows.keys()]) if (!this.loops.has(id)) this.rows.delete(id);
    const want = shown.map((s) => this.row(s));
    const have = [...this.body.children];
    if (want.length !== have.length || want.some((n, i) => n !== have[i])) this.body.replaceChildren(...want);
    this.empty.hidden = all.length > 0;
    this.table.hidden = shown.length === 0;
    this.none.hidden = all.length === 0 || shown.length > 0;
    this.shown.textContent = shown.length === all.length ? `${all.length} loop${all.length === 1 ? '' : 's'}` : `${shown.length} of ${all.length} loops`;
  }

  // options fills the filters with the statuses and workspaces there are.
  options(all) {
    const n = (k, x) => all.filter((s) => s[k] === x).length;
    const statuses = STATUSES.filter((st) => n('status', st) > 0 || st === this.view.status);
    const sig = JSON.stringify([statuses.map((st) => [st, n('status', st)]), this.view.status]);
    if (this.statusSel.dataset.sig !== sig) {
      this.statusSel.dataset.sig = sig;
      fill(this.statusSel, el('option', { value: '' }, 'every status'),
        statuses.map((st) => el('option', { value: st }, `${STATUS_TITLES[st]} (${n('status', st)})`)));
      this.statusSel.value = this.view.status;
    }
    const wss = [...new Set(all.map((s) => s.workspace).concat(this.view.workspace ? [this.view.workspace] : []))].sort();
    const wsig = JSON.stringify([wss, this.view.workspace]);
    if (this.wsSel.dataset.sig !== wsig) {
      this.wsSel.dataset.sig = wsig;
      fill(this.wsSel, el('option', { value: '' }, 'every workspace'), wss.map((w) => el('option', { value: w, title: w }, shortPath(w))));
      this.wsSel.value = this.view.workspace;
    }
    this.wsSel.hidden = wss.length < 2 && !this.view.workspace;
  }

  // row is the loop's row, rebuilt only when something in it changed.
  row(s) {
    const id = s.loop_id;
    // A loop that stopped by itself while its Stop waited asks no more.
    if (s.status !== 'running' && s.status !== 'paused') this.confirming.delete(id);
    const sig = JSON.stringify([s, this.busy.has(id), this.errors.get(id), this.confirming.has(id)]);
    const old = this.rows.get(id);
    if (old && old.sig === sig) return old.node;
    const node = loopRow(s, {
      busy: this.busy.has(id),
      error: this.errors.get(id),
      confirming: this.confirming.has(id),
      act: (action) => this.act(id, action),
    });
    this.rows.set(id, { sig, node });
    return node;
  }

  async act(id, action) {
    // Stop asks first: a second button, away from Pause, confirms it.
    if (action === 'stop' || action === 'cancel') {
      if (action === 'stop') this.confirming.add(id);
      else this.confirming.delete(id);
      this.render();
      const b = this.rows.get(id)?.node.querySelector(action === 'stop' ? 'button[data-action="cancel"]' : 'button');
      if (b) b.focus();
      return;
    }
    if (action === 'confirm-stop') {
      this.confirming.delete(id);
      action = 'stop';
    }
    this.busy.add(id);
    this.errors.delete(id);
    this.render();
    try {
      await post(loopPath(id, '/' + action), {});
    } catch (e) {
      this.errors.set(id, e.message);
    }
    this.busy.delete(id);
    await this.refresh(id);
    this.render();
  }
}

const byNewest = (a, b) => (b.created_at || '').localeCompare(a.created_at || '') || a.loop_id.localeCompare(b.loop_id);
const SORTERS = {
  newest: byNewest,
  name: (a, b) => (a.title || a.loop_id).localeCompare(b.title || b.loop_id, undefined, { sensitivity: 'base' }) || byNewest(a, b),
  status: (a, b) => rank(a.status) - rank(b.status) || byNewest(a, b),
};
const rank = (st) => (STATUSES.includes(st) ? STATUSES.indexOf(st) : STATUSES.length);

// shortPath is a folder's last two names, the whole path on hover.
function shortPath(p) {
  const parts = (p || '').split('/').filter(Boolean);
  return parts.length > 2 ? '…/' + parts.slice(-2).join('/') : p || '';
}

function loopRow(s, { busy, error, confirming, act }) {
  const u = s.usage || {};
  const link = `#/loops/${encodeURIComponent(s.loop_id)}`;
  const cell = (label, ...kids) => el('td', { 'data-label': label }, ...kids);
  const ended = s.status !== 'running' && s.status !== 'paused';
  let actions;
  if (confirming) {
    actions = [el('span', { class: 'confirm-q' }, 'Stop this loop?'),
      el('button', { type: 'button', class: 'btn btn-stop', 'data-action': 'confirm-stop', disabled: busy, onclick: () => act('confirm-stop') }, 'Yes, stop'),
      el('button', { type: 'button', class: 'btn btn-ghost', 'data-action': 'cancel', onclick: () => act('cancel') }, 'Cancel')];
  } else {
    actions = actionsFor(s).map((a) => el('button', {
      type: 'button', class: `btn btn-${a}`, 'data-action': a, disabled: busy, onclick: () => act(a),
    }, ACTION_LABELS[a]));
  }
  return el('tr', { class: 'loop', 'data-loop': s.loop_id, 'data-status': s.status },
    el('td', { class: 'loop-cell' },
      el('a', { class: 'loop-title', href: link, title: s.goal || '' }, s.title || s.loop_id),
      s.goal && !flat(s.goal).startsWith(flat(s.title).replace(/…$/, '')) ? el('div', { class: 'goal-line muted', title: s.goal }, oneLine(s.goal, 140).text) : null,
      el('div', { class: 'muted small' },
        el('span', { class: 'mono', 'data-role': 'id' }, s.loop_id), ' · ',
        el('span', { 'data-role': 'workspace', title: s.workspace }, shortPath(s.workspace))),
      s.stop_reason && ended ? cut('reason', s.stop_reason) : null,
      s.error ? cut('error', s.error) : null,
      error ? el('p', { class: 'error', role: 'alert' }, error) : null),
    cell('status', statusBadge(s.status)),
    cell('progress', progressBar(s.progress || {})),
    cell('iteration', el('span', { 'data-role': 'iteration' }, iterationText(s))),
    cell('started', el('span', { 'data-role': 'started', title: s.started_at ? new Date(s.started_at).toLocaleString() : 'never started' }, s.started_at ? when(s.started_at) : '–')),
    cell('elapsed', el('span', { 'data-role': 'elapsed' }, !s.started_at ? '–'
      : s.ended_at ? duration(new Date(s.ended_at) - new Date(s.started_at)) : elapsed(s.started_at))),
    cell('cost', money(u.cost_usd, u.unknown_attempts), el('div', { class: 'muted small' }, `${count(u.tokens)} tokens`)),
    cell('agents', el('span', { 'data-role': 'agents' }, String((s.running || []).length))),
    el('td', { class: 'row-actions' }, actions));
}

const flat = (t) => String(t || '').replace(/\s+/g, ' ').trim();

export function iterationText(s) {
  const cur = s.current_iteration ?? s.iteration ?? 0;
  return s.max_iterations ? `${cur} / ${s.max_iterations}` : String(cur);
}

// cut shows a long text on one line, cut at a word; the whole text opens
// below it (and shows on hover).
export function cut(kind, text) {
  const c = oneLine(text, 100);
  if (!c.cut) return el('p', { class: kind, 'data-role': kind }, c.text);
  return el('details', { class: `${kind} cut`, 'data-role': kind },
    el('summary', { title: text }, c.text),
    el('pre', { class: 'full' }, text));
}

// progressBar: atoms settled (resolved, or OR choices set aside) of all.
export function progressBar(p) {
  const total = p.total || 0;
  const settled = p.settled ?? p.resolved ?? 0;
  const pct = p.percent ?? (total ? Math.floor((settled * 100) / total) : 0);
  const extra = [];
  if (p.in_progress) extra.push(`${p.in_progress} in progress`);
  if (p.executable && !p.in_progress) extra.push(`${p.executable} ready`);
  const why = `${p.resolved || 0} resolved` + (p.set_aside ? `, ${p.set_aside} OR choice${p.set_aside === 1 ? '' : 's'} set aside (failed or not selected)` : '') + ` of ${total} atoms`;
  return el('div', { class: 'progress', title: why },
    el('progress', { max: Math.max(total, 1), value: settled, 'aria-label': 'atoms settled' }),
    el('span', { class: 'progress-text', 'data-role': 'progress', 'data-percent': pct },
      `${settled} / ${total} done · ${pct}%`, extra.length ? ` · ${extra.join(', ')}` : ''));
}
