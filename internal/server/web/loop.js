// The loop page: its header and controls, the work graph, the running
// agents with a live tail of their output, the base-case checklist, the
// trail and corrections, the cost per atom and the journal, kept live by
// the loop's own event stream.
import { get, loopPath, stream } from './api.js';
import { cut, iterationText, progressBar } from './list.js';
import { Controls } from './controls.js';
import { count, duration, el, elapsed, fill, latest, money, statusBadge, table, throttle, when } from './dom.js';
import { Tails } from './tail.js';

// Journal event types that change what the graph, the costs, the
// attempts or the checklist show.
const GRAPH_EVENTS = new Set(['atom_start', 'atom_finish', 'atom_reset', 'or_switch', 'or_exhausted', 'decompose', 'add_atom',
  'parent_resolved', 'redirect', 'hand_edit', 'atom_parked', 'run_start', 'run_resume', 'stop']);
const CHECK_EVENTS = new Set(['verify', 'confirm', 'redirect', 'hand_edit', 'stop']);
const KEEP_EVENTS = 200;

export class LoopPage {
  constructor(root, id) {
    this.root = root;
    this.id = id;
    this.closed = false;
    this.summary = null;
    this.events = [];
    this.fit = true;
    this.sumCall = latest();
    this.refreshSummary = throttle(() => this.loadSummary(), 250);
    this.refreshGraph = throttle(() => this.loadGraph(), 1000);
    this.refreshCosts = throttle(() => this.loadCosts(), 1000);
    this.refreshChecklist = throttle(() => this.loadChecklist(), 1000);
    this.refreshAttempts = throttle(() => this.loadAttempts(), 1000);
    this.renderEvents = throttle(() => this.drawEvents(), 250);
  }

  open() {
    document.title = `aot: ${this.id}`;
    const panel = (key, title, ...extra) => {
      const body = el('div', { class: 'panel-body' }, el('p', { class: 'empty' }, 'Loading…'));
      this[key] = body;
      return el('section', { class: `panel p-${key}`, 'data-panel': key }, el('h2', null, title, ...extra), body);
    };
    this.head = el('section', { class: 'panel loop-head', 'data-loop': this.id });
    this.controls = new Controls(this.id, () => this.refreshAll());
    this.tails = new Tails(this.id);
    const fitButton = el('button', { type: 'button', class: 'link', onclick: () => this.toggleFit(fitButton) }, 'actual size');
    fill(this.root,
      el('div', { class: 'loop-page' },
        this.head,
        this.controls.node,
        el('div', { class: 'cols' },
          el('div', { class: 'col' },
            panel('graph', 'Work graph', ' ', fitButton),
            panel('agents', 'Agents'),
            panel('checklist', 'Base case'),
            panel('trail', 'Trail and corrections')),
          el('div', { class: 'col' },
            panel('costs', 'Cost per atom'),
            panel('journal', 'Journal', ' ', el('span', { class: 'hint' }, 'newest first, live'))))));
    this.graph.classList.add('graph', 'fit');
    this.stream = stream(loopPath(this.id, '/stream'), {
      journal: (d) => this.onEvent(d),
      state: () => this.refreshAll(),
      notice: (d) => this.onNotice(d),
    });
    this.drawEvents();
    this.refreshAll();
  }

  close() {
    this.closed = true;
    this.stream.close();
    this.tails.close();
    for (const t of [this.refreshSummary, this.refreshGraph, this.refreshCosts, this.refreshChecklist, this.refreshAttempts, this.renderEvents]) t.cancel();
  }

  refreshAll() {
    this.refreshSummary();
    this.refreshGraph();
    this.refreshCosts();
    this.refreshChecklist();
    this.refreshAttempts();
  }

  onEvent(d) {
    this.events.push(d);
    if (this.events.length > 4 * KEEP_EVENTS) this.events.splice(0, this.events.length - KEEP_EVENTS);
    this.renderEvents();
    const type = d.event && d.event.type;
    this.refreshSummary();
    if (GRAPH_EVENTS.has(type)) {
      this.refreshGraph();
      this.refreshAttempts();
    }
    if (type === 'atom_finish') this.refreshCosts();
    if (CHECK_EVENTS.has(type)) this.refreshChecklist();
  }

  onNotice(d) {
    this.events.push({ loop_id: this.id, seq: 0, event: { time: new Date().toISOString(), type: 'notice', reason: d.message } });
    this.renderEvents();
  }

  async load(path, draw, target) {
    try {
      const doc = await get(loopPath(this.id, path));
      if (!this.closed) draw(doc);
    } catch (e) {
      if (!this.closed && target) fill(target, el('p', { class: 'error' }, e.message));
    }
  }

  async loadSummary() {
    let s;
    try {
      s = await this.sumCall(() => get(loopPath(this.id)));
    } catch (e) {
      fill(this.head, el('p', { class: 'error' }, e.status === 404 ? `There is no loop ${this.id} here.` : e.message),
        el('a', { href: '#/' }, 'all loops'));
      return;
    }
    if (!s || this.closed) return;
    s.atom_ids = this.atomIDs || [];
    this.summary = s;
    document.title = `aot: ${s.title || s.loop_id} (${s.status})`;
    this.drawHead(s);
    this.controls.update(s);
    this.tails.update(s.running || []);
    this.drawAgents();
    this.drawTrail();
  }

  drawHead(s) {
    const u = s.usage || {};
    const e = s.engine || {};
    const facts = [
      ['iteration', s.max_iterations ? `${s.iteration} / ${s.max_iterations}` : String(s.iteration || 0)],
      ['cost', money(u.cost_usd, u.unknown_attempts)],
      ['tokens', count(u.tokens)],
      ['agents running', String((s.running || []).length)],
      ['engine', e.running ? `aot run, pid ${e.pid || '?'}` : 'not running'],
      ['created', when(s.created_at)],
    ];
    if (s.updated_at) facts.push(['last event', when(s.updated_at)]);
    if (e.paused && e.paused_since) facts.push(['paused for', elapsed(e.paused_since)]);
    if (e.paused_kill) facts.push(['paused with', 'agents killed']);
    fill(this.head,
      el('div', { class: 'card-head' }, el('h1', null, s.title || s.loop_id), statusBadge(s.status)),
      el('p', { class: 'muted mono' }, s.loop_id, ' · ', s.workspace || ''),
      s.goal ? el('p', { class: 'goal' }, s.goal) : null,
      s.description ? el('p', { class: 'muted' }, s.description) : null,
      progressBar(s.progress || {}),
      el('dl', { class: 'facts' }, facts.map(([k, v]) => el('div', { class: 'fact' }, el('dt', null, k), el('dd', null, v)))),
      s.stop_reason ? el('p', { class: 'reason' }, 'stop reason: ', s.stop_reason) : null,
      s.error ? el('p', { class: 'error' }, s.error) : null);
  }

  async loadGraph() {
    let text;
    try {
      text = await get(loopPath(this.id, '/graph?format=svg'));
    } catch (e) {
      if (!this.closed) fill(this.graph, el('p', { class: 'error' }, e.message));
      return;
    }
    if (this.closed) return;
    const svg = parseSVG(text);
    if (!svg) {
      fill(this.graph, el('p', { class: 'error' }, 'The work graph could not be read.'));
      return;
    }
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', 'the work graph');
    fill(this.graph, svg);
    // The atom ids, for the redirect form's suggestions.
    const ids = [];
    for (const t of svg.querySelectorAll('g[data-atom], g[id^="atom-"]')) ids.push(t.dataset.atom || t.id.slice(5));
    if (ids.length) this.atomIDs = ids;
  }

  toggleFit(button) {
    this.fit = !this.fit;
    this.graph.classList.toggle('fit', this.fit);
    button.textContent = this.fit ? 'actual size' : 'fit to width';
  }

  loadCosts() {
    return Promise.all([get(loopPath(this.id, '/costs')), get(loopPath(this.id, '/atoms'))])
      .then(([costs, atoms]) => { if (!this.closed) this.drawCosts(costs, atoms.atoms || []); })
      .catch((e) => { if (!this.closed) fill(this.costs, el('p', { class: 'error' }, e.message)); });
  }

  drawCosts(c, atoms) {
    this.atomIDs = atoms.map((a) => a.id);
    const spend = c.atoms || {};
    const rows = atoms.map((a) => ({ a, s: spend[a.id] || {} }));
    for (const id of Object.keys(spend)) if (!atoms.some((a) => a.id === id)) rows.push({ a: { id, status: 'removed' }, s: spend[id] });
    rows.sort((x, y) => (y.s.cost_usd || 0) - (x.s.cost_usd || 0) || (y.s.tokens || 0) - (x.s.tokens || 0) || x.a.id.localeCompare(y.a.id));
    const t = c.total || {};
    const roles = Object.entries(c.roles || {}).sort((x, y) => (y[1].cost_usd || 0) - (x[1].cost_usd || 0));
    fill(this.costs,
      el('p', { class: 'total' }, 'total ', el('strong', null, money(t.cost_usd, t.unknown_attempts)), ` · ${count(t.tokens)} tokens · ${t.attempts || 0} agent runs · ${duration(t.duration_ms || 0)} of agent time`),
      table(['atom', 'status', 'cost', 'tokens', 'runs', 'time'], rows.map(({ a, s }) => [
        el('span', { class: 'mono', title: a.description || '' }, a.id),
        el('span', { class: `dot st-atom-${a.status}` }, a.status),
        money(s.cost_usd, s.unknown_attempts), count(s.tokens), String(s.attempts || 0), duration(s.duration_ms || 0),
      ]), 'costs'),
      roles.length ? el('p', { class: 'muted' }, 'per role: ', roles.map(([r, s]) => `${r} ${money(s.cost_usd, s.unknown_attempts)}`).join(' · ')) : null);
  }

  async loadAttempts() {
    await this.load('/attempts', (doc) => {
      this.attempts = doc.attempts || [];
      this.drawAgents();
    }, this.agents);
  }

  drawAgents() {
    const s = this.summary;
    if (!s) return;
    const running = s.running || [];
    const recent = (this.attempts || []).filter((a) => a.outcome !== 'running').slice(-8).reverse();
    fill(this.agents,
      running.length ? null : el('p', { class: 'empty' }, s.status === 'running' ? 'No agent is running right now.' : 'No agent runs: the loop is not running.'),
      el('ul', { class: 'agents' }, running.map((r) => el('li', { class: 'agent', 'data-atom': r.atom },
        el('span', { class: 'mono strong' }, r.atom), ` ${r.role} · attempt ${r.attempt} · `,
        r.started ? elapsed(r.started) : 'starting'))),
      this.tails.node,
      recent.length ? el('details', { class: 'recent' }, el('summary', null, `recent runs (${recent.length})`),
        table(['atom', 'role', '#', 'outcome', 'time', ''], recent.map((a) => [
          el('span', { class: 'mono' }, a.atom), a.role, String(a.attempt),
          el('span', { class: `dot out-${a.outcome}`, title: a.reason || '' }, a.outcome, a.reason ? `: ${a.reason}` : ''),
          a.duration_ms ? duration(a.duration_ms) : '',
          el('button', { type: 'button', class: 'link', onclick: () => this.tails.show(a) }, 'output'),
        ]))) : null);
  }

  async loadChecklist() {
    await this.load('/checklist', (doc) => this.drawChecklist(doc), this.checklist);
  }

  drawChecklist(doc) {
    const results = new Map((doc.items || []).map((r) => [r.item, r]));
    const items = (doc.base_case || []).map((b) => ({ b, r: results.get(b.item) }));
    for (const r of doc.items || []) if (!items.some((x) => x.b.item === r.item)) items.push({ b: { item: r.item, type: r.type }, r });
    const verdict = doc.verified_at
      ? el('p', { class: doc.passed ? 'ok' : 'bad' }, doc.passed ? 'passed' : 'not passed', ` at the last verification, ${when(doc.verified_at)}`)
      : el('p', { class: 'muted' }, 'Not verified yet.');
    fill(this.checklist, verdict,
      items.length ? el('ul', { class: 'checklist' }, items.map(({ b, r }) => checkItem(b, r))) : el('p', { class: 'empty' }, 'The loop has no base case.'));
  }

  drawTrail() {
    const { trail, corrections } = trailOf(this.summary, this.events);
    fill(this.trail,
      el('h3', null, 'Trail: OR decisions'),
      trail.length ? el('ol', { class: 'trail' }, trail.map((t) => el('li', null,
        el('span', { class: 'mono strong' }, t.or_group || t.group || '?'), ' → ', el('span', { class: 'mono' }, t.selected || '?'),
        t.reason ? ` (${t.reason})` : '', t.timestamp ? el('span', { class: 'muted' }, ' ', when(t.timestamp)) : null)))
        : el('p', { class: 'empty' }, 'No OR group has switched its choice.'),
      el('h3', null, 'Corrections: redirects'),
      corrections.length ? el('ol', { class: 'trail' }, corrections.map((c) => el('li', null,
        el('span', { class: 'strong' }, c.type || 'redirect'), ': ', c.description || '',
        c.trail_cleared ? el('span', { class: 'muted' }, ' (trail cleared)') : null,
        c.timestamp ? el('span', { class: 'muted' }, ' ', when(c.timestamp)) : null)))
        : el('p', { class: 'empty' }, 'No correction so far.'));
  }

  drawEvents() {
    if (this.closed) return;
    const evs = this.events.slice(-KEEP_EVENTS).reverse();
    if (this.summary) this.drawTrail();
    fill(this.journal, evs.length ? el('ol', { class: 'events' }, evs.map((d) => eventRow(d))) : el('p', { class: 'empty' }, 'No event yet.'));
  }
}

// parseSVG reads the server's picture into a node of this document; it is
// drawn by our own code, and still loses anything active on the way in.
function parseSVG(text) {
  if (typeof text !== 'string') return null;
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const root = doc.documentElement;
  if (!root || root.localName !== 'svg' || doc.getElementsByTagName('parsererror').length) return null;
  for (const n of root.querySelectorAll('script, foreignObject, iframe, embed, object, use')) n.remove();
  for (const n of [root, ...root.querySelectorAll('*')]) {
    for (const a of [...n.attributes]) {
      const name = a.name.toLowerCase();
      if (name.startsWith('on') || ((name === 'href' || name === 'xlink:href') && !a.value.startsWith('#'))) n.removeAttribute(a.name);
    }
  }
  return document.importNode(root, true);
}

function checkItem(b, r) {
  const state = !r ? 'unknown' : r.needs_judge ? 'judge' : r.passed ? 'pass' : 'fail';
  const mark = { unknown: '–', judge: '?', pass: '✓', fail: '✗' }[state];
  const subs = r ? [...(r.group_results || []), ...(r.any_of_results || [])] : [];
  return el('li', { class: `check c-${state}` },
    el('span', { class: 'mark', 'aria-label': state }, mark),
    el('div', { class: 'check-body' },
      el('div', null, el('span', { class: 'strong' }, b.item), b.type ? el('span', { class: 'muted' }, ` · ${b.type}`) : null,
        r && r.any_of_results ? el('span', { class: 'muted' }, ' (any of)') : null),
      b.value ? el('code', { class: 'check-value' }, b.value) : null,
      r && r.evidence ? el('pre', { class: 'evidence' }, r.evidence) : null,
      subs.length ? el('ul', { class: 'checklist sub' }, subs.map((x) => checkItem({ item: x.item, type: x.type }, x))) : null));
}

// trailOf is the loop's trail (OR decisions) and corrections (redirects):
// from the summary or its CCW document when the server gives them, else
// from the journal.
export function trailOf(s, events) {
  const found = { trail: null, corrections: null };
  const look = (o, depth) => {
    if (!o || typeof o !== 'object' || depth > 3) return;
    for (const k of ['trail', 'corrections']) if (found[k] === null && Array.isArray(o[k])) found[k] = o[k];
    for (const v of Object.values(o)) if (v && typeof v === 'object' && !Array.isArray(v)) look(v, depth + 1);
  };
  look(s, 0);
  const evs = events.map((d) => d.event || {});
  if (found.trail === null) {
    found.trail = evs.filter((e) => e.type === 'or_switch' || e.type === 'or_exhausted').map((e) => ({
      or_group: (e.data && e.data.or_group) || e.atom,
      selected: e.type === 'or_exhausted' ? 'exhausted' : e.atom,
      reason: e.reason, timestamp: e.time,
    }));
  }
  if (found.corrections === null) {
    found.corrections = evs.filter((e) => e.type === 'redirect' || e.type === 'hand_edit').map((e) => ({
      type: e.type === 'hand_edit' ? 'hand edit' : 'redirect',
      description: (e.reason || '') + (e.ok === false ? ' (refused)' : ''), timestamp: e.time,
    }));
  }
  return found;
}

function eventRow(d) {
  const e = d.event || {};
  const who = [e.atom, e.role, e.attempt ? `#${e.attempt}` : ''].filter(Boolean).join(' ');
  const data = e.data || {};
  const extra = data.summary || data.kind || data.message || data.error || '';
  const cost = e.cost_usd ? money(e.cost_usd) : '';
  return el('li', { class: `ev ev-${e.type}`, 'data-seq': d.seq },
    el('span', { class: 'muted mono' }, e.time ? new Date(e.time).toLocaleTimeString() : ''), ' ',
    el('span', { class: `ev-type${e.ok === false ? ' bad' : ''}` }, e.type || '?'),
    who ? el('span', { class: 'mono' }, ' ', who) : null,
    e.reason ? el('span', null, ' · ', e.reason) : null,
    extra ? el('span', { class: 'muted' }, ' · ', String(extra)) : null,
    cost ? el('span', { class: 'muted' }, ' · ', cost) : null);
}
