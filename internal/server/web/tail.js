// The live tail of agents' output: each running attempt's log is read
// from where the last read ended, once a second, and appended.
import { get, loopPath } from './api.js';
import { el } from './dom.js';

const KEEP_CHARS = 64 * 1024; // what one tail keeps on the page
const KEEP_FINISHED = 3; // finished tails left on view

export class Tails {
  constructor(id) {
    this.id = id;
    this.tails = new Map(); // key -> Tail
    this.node = el('div', { class: 'tails' });
    this.timer = setInterval(() => this.poll(), 1000);
  }

  close() {
    clearInterval(this.timer);
  }

  // update follows the running attempts; those that ended get a last read.
  update(running) {
    const now = new Set();
    for (const r of running) {
      const k = key(r);
      now.add(k);
      if (!this.tails.has(k)) this.add(r, true);
    }
    for (const [k, t] of this.tails) if (t.live && !now.has(k)) t.live = false;
    this.trim();
  }

  // show opens the output of any attempt (the recent runs' buttons).
  show(a) {
    const t = this.tails.get(key(a)) || this.add(a, a.outcome === 'running');
    t.open = true;
    t.node.open = true;
    t.node.scrollIntoView({ block: 'nearest' });
    this.read(t);
  }

  add(a, live) {
    const pre = el('pre', { class: 'tail-out', tabindex: 0 });
    const hits = el('pre', { class: 'tail-out tail-hits', hidden: true, 'data-role': 'hits' });
    const found = el('span', { class: 'muted', 'data-role': 'found' });
    const find = el('input', { type: 'search', class: 'tail-find', placeholder: 'search the output', 'aria-label': 'search the output' });
    const state = el('span', { class: 'muted' }, live ? 'live' : '');
    const node = el('details', { class: 'tail', open: true, 'data-tail': key(a) },
      el('summary', null, el('span', { class: 'mono strong' }, a.atom), ` ${a.role || 'worker'} attempt ${a.attempt} · output `, state),
      el('div', { class: 'tail-bar' }, find, found),
      pre, hits);
    // follow: the tail keeps to the end of the output, from its first read
    // on, until the person scrolls up; scrolling back down follows again.
    const t = { a, live, node, pre, hits, find, found, state, offset: 0, done: false, busy: false, ended: 0, follow: true };
    find.addEventListener('input', () => this.search(t));
    pre.addEventListener('scroll', () => {
      t.follow = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    });
    this.tails.set(key(a), t);
    this.node.prepend(node);
    this.read(t);
    return t;
  }

  // search shows the lines of the output that hold the text searched for
  // (case-insensitive), numbered, in place of the whole output.
  search(t) {
    const q = t.find.value.trim().toLowerCase();
    t.pre.hidden = q !== '';
    t.hits.hidden = q === '';
    if (!q) {
      t.found.textContent = '';
      if (t.follow) t.pre.scrollTop = t.pre.scrollHeight;
      return;
    }
    const lines = t.pre.textContent.split('\n');
    const out = [];
    lines.forEach((line, i) => {
      if (line.toLowerCase().includes(q)) out.push(`${String(i + 1).padStart(5)}  ${line}`);
    });
    t.hits.textContent = out.length ? out.join('\n') : '(no line holds it)';
    t.found.textContent = `${out.length} line${out.length === 1 ? '' : 's'}`;
  }

  trim() {
    const finished = [...this.tails.values()].filter((t) => !t.live && !t.open);
    for (const t of finished.slice(0, Math.max(0, finished.length - KEEP_FINISHED))) {
      t.node.remove();
      this.tails.delete(key(t.a));
    }
  }

  poll() {
    for (const t of this.tails.values()) if (!t.done) this.read(t);
  }

  async read(t) {
    if (t.busy) return;
    t.busy = true;
    try {
      const q = new URLSearchParams({ atom: t.a.atom, role: t.a.role || 'worker', attempt: String(t.a.attempt), offset: String(t.offset) });
      const o = await get(loopPath(this.id, `/output?${q}`));
      if (o.data) {
        t.pre.append(o.data);
        if (t.pre.textContent.length > KEEP_CHARS * 2) t.pre.textContent = '…' + t.pre.textContent.slice(-KEEP_CHARS);
        if (t.follow) t.pre.scrollTop = t.pre.scrollHeight;
        if (t.find.value.trim()) this.search(t);
      }
      t.offset = o.next;
      if (o.outcome !== 'running' && o.next >= o.size) {
        t.done = true;
        t.live = false;
        t.state.textContent = `(${o.outcome})`;
        if (!t.pre.textContent) t.pre.textContent = '(no output)';
      }
    } catch (e) {
      t.state.textContent = e.message;
      if (e.status === 404 || e.status === 400) t.done = true;
    } finally {
      t.busy = false;
    }
  }
}

const key = (a) => `${a.atom}\u0000${a.role || 'worker'}\u0000${a.attempt}`;
