// The first page: every loop as a card, grouped by status, kept live by
// the all-loops event stream.
import { banner, get, loopPath, post, stream } from './api.js';
import { count, el, fill, money, statusBadge, STATUSES, throttle } from './dom.js';

const GROUP_TITLES = {
  running: 'Running', paused: 'Paused', created: 'Not started', completed: 'Completed',
  failed: 'Failed', user_exit: 'Stopped by a person',
};

// actionsFor is what a loop's status allows.
export function actionsFor(status) {
  switch (status) {
    case 'running': return ['pause', 'stop'];
    case 'paused': return ['resume', 'stop'];
    case 'completed': return [];
    default: return ['start'];
  }
}

const ACTION_LABELS = { start: 'Start', pause: 'Pause', resume: 'Resume', stop: 'Stop' };

export class CardsPage {
  constructor(root) {
    this.root = root;
    this.loops = new Map(); // id -> Summary
    this.order = []; // ids, newest first
    this.cards = new Map(); // id -> {sig, node}
    this.refreshers = new Map();
    this.busy = new Set();
    this.errors = new Map();
    this.closed = false;
    this.reloadSoon = throttle(() => this.reload(), 1000);
  }

  open() {
    document.title = 'aot: loops';
    this.groups = {};
    const sections = STATUSES.map((st) => {
      const n = el('span', { class: 'count' });
      const grid = el('div', { class: 'cards' });
      const sec = el('section', { class: 'group', 'data-group': st, hidden: true },
        el('h2', null, GROUP_TITLES[st], ' ', n), grid);
      this.groups[st] = { sec, grid, n };
      return sec;
    });
    this.empty = el('p', { class: 'empty', hidden: true },
      'No loops yet. aot serve shows the loop of each workspace it serves (.claude/aot-loop-state.md) and those created with POST /api/loops.');
    this.loading = el('p', { class: 'empty' }, 'Loading the loops…');
    fill(this.root, el('h1', { class: 'sr-only' }, 'Loops'), this.loading, this.empty, sections);
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
    this.order = doc.loops.map((l) => l.loop_id);
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
    this.loops.set(id, s);
    this.render();
  }

  render() {
    const by = Object.fromEntries(STATUSES.map((st) => [st, []]));
    for (const id of this.order) {
      const s = this.loops.get(id);
      if (!s) continue;
      (by[s.status] || by.failed).push(this.card(s));
    }
    for (const id of [...this.cards.keys()]) {
      if (!this.loops.has(id)) {
        this.cards.get(id).node.remove();
        this.cards.delete(id);
      }
    }
    for (const st of STATUSES) {
      const g = this.groups[st];
      const want = by[st];
      const have = [...g.grid.children];
      if (want.length !== have.length || want.some((n, i) => n !== have[i])) g.grid.replaceChildren(...want);
      g.sec.hidden = want.length === 0;
      g.n.textContent = String(want.length);
    }
    this.empty.hidden = this.order.length > 0;
  }

  // card is the loop's card, rebuilt only when something on it changed.
  card(s) {
    const sig = JSON.stringify([s, this.busy.has(s.loop_id), this.errors.get(s.loop_id)]);
    const old = this.cards.get(s.loop_id);
    if (old && old.sig === sig) return old.node;
    const node = loopCard(s, {
      busy: this.busy.has(s.loop_id),
      error: this.errors.get(s.loop_id),
      act: (action) => this.act(s.loop_id, action),
    });
    if (old) old.node.replaceWith(node);
    this.cards.set(s.loop_id, { sig, node });
    return node;
  }

  async act(id, action) {
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

function loopCard(s, { busy, error, act }) {
  const p = s.progress || {};
  const u = s.usage || {};
  const running = (s.running || []).length;
  const link = `#/loops/${encodeURIComponent(s.loop_id)}`;
  return el('article', { class: 'card', 'data-loop': s.loop_id, 'data-status': s.status },
    el('div', { class: 'card-head' },
      el('a', { class: 'card-title', href: link }, s.title || s.loop_id),
      statusBadge(s.status)),
    s.goal ? el('p', { class: 'goal' }, s.goal) : null,
    progressBar(p),
    el('dl', { class: 'facts' },
      fact('iteration', s.max_iterations ? `${s.iteration} / ${s.max_iterations}` : String(s.iteration || 0)),
      fact('cost', money(u.cost_usd, u.unknown_attempts)),
      fact('tokens', count(u.tokens)),
      fact('agents', String(running), 'agents')),
    s.stop_reason && s.status !== 'running' && s.status !== 'paused' ? el('p', { class: 'reason' }, s.stop_reason) : null,
    s.error ? el('p', { class: 'error' }, s.error) : null,
    error ? el('p', { class: 'error', role: 'alert' }, error) : null,
    el('div', { class: 'actions' },
      actionsFor(s.status).map((a) => el('button', {
        type: 'button', class: `btn btn-${a}`, 'data-action': a, disabled: busy, onclick: () => act(a),
      }, ACTION_LABELS[a])),
      el('a', { class: 'btn btn-ghost', href: link }, 'Open')));
}

function fact(name, value, role) {
  return el('div', { class: 'fact' }, el('dt', null, name), el('dd', { 'data-role': role || name }, value));
}

export function progressBar(p) {
  const total = p.total || 0;
  const resolved = p.resolved || 0;
  const extra = [];
  if (p.in_progress) extra.push(`${p.in_progress} in progress`);
  if (p.executable && !p.in_progress) extra.push(`${p.executable} ready`);
  return el('div', { class: 'progress' },
    el('progress', { max: Math.max(total, 1), value: resolved, 'aria-label': 'atoms resolved' }),
    el('span', { class: 'progress-text', 'data-role': 'progress' },
      `${resolved} / ${total} resolved`, extra.length ? ` · ${extra.join(', ')}` : ''));
}
