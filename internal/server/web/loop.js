// The loop page: its header and controls, the work graph, the running
// agents with a live tail of their output, the base-case checklist, the
// trail and corrections, the cost per atom and the journal, kept live by
// the loop's own event stream.
import { get, loopPath, stream } from './api.js';
import { cut, iterationText, progressBar } from './list.js';
import { Controls } from './controls.js';
import { count, duration, el, elapsed, fill, latest, money, oneLine, statusBadge, table, throttle, when } from './dom.js';
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
    this.refreshAtom = throttle(() => this.loadAtom(), 1000);
    this.refreshChart = throttle(() => this.loadChart(), 2000);
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
            panel('graph', 'Work graph', ' ', fitButton, ' ', el('span', { class: 'hint' }, 'click an atom for its attempts')),
            panel('atom', 'Atom'),
            panel('timeline', 'Timeline', ' ', el('span', { class: 'hint' }, 'attempts per atom, coloured by outcome')),
            panel('chart', 'Progress and spend', ' ', el('span', { class: 'hint' }, 'over time, from the journal')),
            panel('agents', 'Agents'),
            panel('checklist', 'Base case'),
            panel('trail', 'Trail and corrections')),
          el('div', { class: 'col' },
            panel('costs', 'Cost per atom'),
            panel('journal', 'Journal', ' ', el('span', { class: 'hint' }, 'newest first, live'))))));
    this.graph.classList.add('graph', 'fit');
    this.atomPanel = this.atom.parentNode;
    this.atomPanel.hidden = true;
    // The agents panel keeps its parts: the live tails are never taken out
    // of the page, so a tail that follows its output stays at its end.
    this.agentList = el('div');
    this.recent = el('div');
    fill(this.agents, this.agentList, this.tails.node, this.recent);
    this.stream = stream(loopPath(this.id, '/stream'), {
      journal: (d) => this.onEvent(d),
      state: () => this.refreshAll(),
      notice: (d) => this.onNotice(d),
    });
    this.drawEvents();
    this.refreshAll();
    // Running attempts' bars grow with the time.
    this.ticker = setInterval(() => {
      if ((this.attempts || []).some((a) => a.outcome === 'running')) this.drawTimeline();
    }, 2000);
  }

  close() {
    this.closed = true;
    clearInterval(this.ticker);
    this.stream.close();
    this.tails.close();
    for (const t of [this.refreshSummary, this.refreshGraph, this.refreshCosts, this.refreshChecklist, this.refreshAttempts, this.renderEvents, this.refreshAtom, this.refreshChart]) t.cancel();
  }

  refreshAll() {
    this.refreshSummary();
    this.refreshGraph();
    this.refreshCosts();
    this.refreshChecklist();
    this.refreshAttempts();
    this.refreshChart();
    if (this.atomID) this.refreshAtom();
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
      if (this.atomID) this.refreshAtom();
    }
    if (type === 'atom_finish') this.refreshCosts();
    if (type === 'atom_finish' || type === 'iteration' || type === 'run_start') this.refreshChart();
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
      ['iteration', iterationText(s)],
      ['cost', money(u.cost_usd, u.unknown_attempts)],
      ['tokens', count(u.tokens)],
      ['agents running', String((s.running || []).length)],
      ['engine', e.running ? `aot run, pid ${e.pid || '?'}` : 'not running'],
      ['created', when(s.created_at)],
    ];
    if (s.started_at) facts.push(['started', when(s.started_at)], ['elapsed', s.ended_at ? duration(new Date(s.ended_at) - new Date(s.started_at)) : elapsed(s.started_at)]);
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
      boundsList(s.bounds || []),
      s.stop_reason ? cut('reason', 'stop reason: ' + s.stop_reason) : null,
      s.error ? cut('error', s.error) : null);
  }

  async loadGraph() {
    let text;
    let doc;
    try {
      [text, doc] = await Promise.all([get(loopPath(this.id, '/graph?format=svg')), get(loopPath(this.id, '/graph'))]);
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
    // Each atom's box opens its attempts: the boxes are found by the
    // place the layout gave them.
    this.nodes = doc.nodes || [];
    for (const n of this.nodes) {
      const box = svg.querySelector(`rect[x="${n.x}"][y="${n.y}"][width="${n.w}"]`);
      const g = box && box.parentNode;
      if (!g || g.localName !== 'g') continue;
      g.dataset.atom = n.id;
      g.classList.add('node');
      g.classList.toggle('chosen', n.id === this.atomID);
      g.setAttribute('tabindex', '0');
      g.setAttribute('role', 'button');
      g.setAttribute('aria-label', `atom ${n.id}: its attempts`);
      g.addEventListener('click', () => this.openAtom(n.id));
      g.addEventListener('keydown', (e) => {
        if (e.key === 'Enter' || e.key === ' ') {
          e.preventDefault();
          this.openAtom(n.id);
        }
      });
    }
    fill(this.graph, svg);
    if (this.nodes.length) this.atomIDs = this.nodes.map((n) => n.id);
    // The costs take the atoms' statuses from this same graph: the two
    // agree at every moment.
    if (this.costDoc) this.drawCosts(this.costDoc);
  }

  openAtom(id) {
    this.atomID = id;
    this.atomPanel.hidden = false;
    for (const g of this.graph.querySelectorAll('g.node')) g.classList.toggle('chosen', g.dataset.atom === id);
    fill(this.atom, el('p', { class: 'empty' }, `Loading ${id}…`));
    this.atomPanel.scrollIntoView({ block: 'nearest' });
    this.loadAtom();
  }

  async loadAtom() {
    const id = this.atomID;
    if (!id) return;
    let a;
    try {
      a = await get(loopPath(this.id, `/atoms/${encodeURIComponent(id)}`));
    } catch (e) {
      if (!this.closed && this.atomID === id) fill(this.atom, el('p', { class: 'error' }, e.message));
      return;
    }
    if (this.closed || this.atomID !== id) return;
    this.drawAtom(a);
  }

  drawAtom(a) {
    const runs = a.runs || [];
    const node = (this.nodes || []).find((n) => n.id === a.id);
    fill(this.atom,
      el('div', { class: 'card-head' },
        el('h3', { class: 'mono', 'data-role': 'atom-id' }, a.id),
        el('span', { class: `dot st-atom-${atomStatus(a.status, node)}` }, atomStatus(a.status, node)),
        el('button', { type: 'button', class: 'link', onclick: () => { this.atomID = null; this.atomPanel.hidden = true; } }, 'close')),
      el('p', { class: 'description', 'data-role': 'description' }, a.description || ''),
      el('dl', { class: 'facts' },
        a.depends_on && a.depends_on.length ? fact('depends on', a.depends_on.join(', ')) : null,
        a.or_group ? fact('OR group', a.or_group) : null,
        fact('cost', money(a.cost_usd)), fact('tokens', count(a.tokens)), fact('attempts', String(runs.length))),
      a.binding ? el('p', { class: 'muted' }, 'binding: ', a.binding.summary || '',
        a.binding.artifacts && a.binding.artifacts.length ? ` (${a.binding.artifacts.join(', ')})` : '') : null,
      runs.length ? gantt(runs.map((r) => ({ key: a.id, label: `#${r.attempt}`, runs: [r] }))) : null,
      runs.length ? table(['#', 'role', 'outcome', 'started', 'time', ''], runs.slice().reverse().map((r) => [
        String(r.attempt), r.role || '',
        el('span', { class: `dot out-${r.outcome}` }, r.outcome, r.reason ? el('span', { class: 'muted' }, ': ', oneLine(r.reason, 80).text) : null),
        r.started ? when(r.started) : '', r.duration_ms ? duration(r.duration_ms) : (r.outcome === 'running' && r.started ? elapsed(r.started) : ''),
        el('button', { type: 'button', class: 'link', 'data-action': 'output', onclick: () => this.tails.show(r) }, 'output'),
      ]), 'attempts') : el('p', { class: 'empty' }, 'No attempt yet.'));
  }

  toggleFit(button) {
    this.fit = !this.fit;
    this.graph.classList.toggle('fit', this.fit);
    button.textContent = this.fit ? 'actual size' : 'fit to width';
  }

  loadCosts() {
    return get(loopPath(this.id, '/costs'))
      .then((costs) => {
        if (this.closed) return;
        this.costDoc = costs;
        if (this.nodes) this.drawCosts(costs);
      })
      .catch((e) => { if (!this.closed) fill(this.costs, el('p', { class: 'error' }, e.message)); });
  }

  drawCosts(c) {
    const atoms = (this.nodes || []).map((n) => ({ id: n.id, description: n.description, status: atomStatus(n.status, n) }));
    const spend = c.atoms || {};
    const rows = atoms.map((a) => ({ a, s: spend[a.id] || {} }));
    for (const id of Object.keys(spend)) if (!atoms.some((a) => a.id === id)) rows.push({ a: { id, status: 'removed' }, s: spend[id] });
    rows.sort((x, y) => (y.s.cost_usd || 0) - (x.s.cost_usd || 0) || (y.s.tokens || 0) - (x.s.tokens || 0) || x.a.id.localeCompare(y.a.id));
    const t = c.total || {};
    const roles = Object.entries(c.roles || {}).sort((x, y) => (y[1].cost_usd || 0) - (x[1].cost_usd || 0));
    fill(this.costs,
      el('p', { class: 'total' }, 'total ', el('strong', null, money(t.cost_usd, t.unknown_attempts)), ` · ${count(t.tokens)} tokens · ${t.attempts || 0} agent runs · ${duration(t.duration_ms || 0)} of agent time`),
      table(['atom', 'status', 'cost', 'tokens', 'runs', 'time'], rows.map(({ a, s }) => [
        el('button', { type: 'button', class: 'link mono', title: a.description || '', onclick: () => this.openAtom(a.id) }, a.id),
        el('span', { class: `dot st-atom-${a.status}`, 'data-role': 'atom-status' }, a.status),
        money(s.cost_usd, s.unknown_attempts), count(s.tokens), String(s.attempts || 0), duration(s.duration_ms || 0),
      ]), 'costs'),
      roles.length ? el('p', { class: 'muted' }, 'per role: ', roles.map(([r, s]) => `${r} ${money(s.cost_usd, s.unknown_attempts)}`).join(' · ')) : null);
  }

  async loadAttempts() {
    await this.load('/attempts', (doc) => {
      this.attempts = doc.attempts || [];
      this.drawAgents();
      this.drawTimeline();
    }, this.agents);
  }

  drawAgents() {
    const s = this.summary;
    if (!s) return;
    const running = s.running || [];
    const recent = (this.attempts || []).filter((a) => a.outcome !== 'running').slice(-8).reverse();
    fill(this.agentList,
      running.length ? null : el('p', { class: 'empty' }, s.status === 'running' ? 'No agent is running right now.' : 'No agent runs: the loop is not running.'),
      el('ul', { class: 'agents' }, running.map((r) => el('li', { class: 'agent', 'data-atom': r.atom },
        el('span', { class: 'mono strong' }, r.atom), ` ${r.role} · attempt ${r.attempt} · `,
        r.started ? elapsed(r.started) : 'starting'))));
    const open = this.recent.querySelector('details')?.open;
    fill(this.recent,
      recent.length ? el('details', { class: 'recent' }, el('summary', null, `recent runs (${recent.length})`),
        table(['atom', 'role', '#', 'outcome', 'time', ''], recent.map((a) => [
          el('span', { class: 'mono' }, a.atom), a.role, String(a.attempt),
          el('span', { class: `dot out-${a.outcome}`, title: a.reason || '' }, a.outcome, a.reason ? `: ${a.reason}` : ''),
          a.duration_ms ? duration(a.duration_ms) : '',
          el('button', { type: 'button', class: 'link', onclick: () => this.tails.show(a) }, 'output'),
        ]))) : null);
    if (open && this.recent.querySelector('details')) this.recent.querySelector('details').open = true;
  }

  drawTimeline() {
    const by = new Map();
    for (const a of this.attempts || []) {
      if (!by.has(a.atom)) by.set(a.atom, []);
      by.get(a.atom).push(a);
    }
    const lanes = [...by].map(([atom, runs]) => ({ key: atom, label: atom, runs }));
    fill(this.timeline, gantt(lanes) || el('p', { class: 'empty' }, 'No attempt yet.'));
    for (const n of this.timeline.querySelectorAll('.lane[data-lane]')) {
      n.classList.add('clickable');
      n.addEventListener('click', () => this.openAtom(n.dataset.lane));
    }
  }

  // loadChart reads the whole journal (in pages) for the chart.
  async loadChart() {
    const evs = [];
    let after = 0;
    try {
      for (let page = 0; page < 50; page++) {
        const doc = await get(loopPath(this.id, `/events?after=${after}&limit=1000`));
        for (const d of doc.events || []) evs.push(d.event || {});
        if (!doc.events || !doc.events.length || doc.next <= after) break;
        after = doc.next;
      }
    } catch (e) {
      if (!this.closed) fill(this.chart, el('p', { class: 'error' }, e.message));
      return;
    }
    if (!this.closed) fill(this.chart, chart(evs));
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

function fact(name, value) {
  return el('div', { class: 'fact' }, el('dt', null, name), el('dd', null, value));
}

// atomStatus: the file's status, and for an OR choice the loop does not
// take, why it stays pending.
function atomStatus(status, node) {
  if (status === 'resolved' || status === 'in_progress' || !node) return status;
  if (node.failed) return 'failed choice';
  if (node.or_group && !node.selected) return 'not taken';
  return status;
}

const BOUND_NAMES = {
  max_iterations: 'iterations', max_cost_usd: 'cost', max_tokens: 'tokens', max_wall_time: 'wall time (this run)',
  max_stall_count: 'stalls', max_attempts_per_atom: 'attempts per atom', max_parallel_agents: 'agents at once',
};

function boundValue(name, v) {
  if (name === 'max_cost_usd') return money(v);
  if (name === 'max_wall_time') return duration(v);
  if (name === 'max_tokens') return count(v);
  return String(v);
}

// boundsList: each limit set on the loop, how much of it is used and what
// is left.
function boundsList(bounds) {
  if (!bounds.length) return null;
  return el('div', { class: 'bounds', 'data-role': 'bounds' }, bounds.map((b) => {
    const pct = b.limit ? Math.min(100, Math.round((b.used * 100) / b.limit)) : 0;
    return el('div', { class: `bound${pct >= 90 ? ' near' : ''}`, 'data-bound': b.name },
      el('div', { class: 'bound-head' }, el('span', null, BOUND_NAMES[b.name] || b.name),
        el('span', { class: 'muted' }, `${boundValue(b.name, b.used)} of ${boundValue(b.name, b.limit)} · `,
          el('strong', { 'data-role': 'left' }, `${boundValue(b.name, b.left)} left`))),
      el('progress', { max: 100, value: pct, 'aria-label': `${b.name} used` }));
  }));
}

// gantt draws attempts on one time axis: a lane per entry of lanes
// ({key, label, runs}), a bar per attempt coloured by its outcome, its
// length its duration (a running one reaches now).
function gantt(lanes) {
  const span = (r) => {
    const s = new Date(r.started || 0).getTime();
    return [s, r.duration_ms ? s + r.duration_ms : r.outcome === 'running' ? Date.now() : s];
  };
  const all = lanes.flatMap((l) => l.runs).filter((r) => r.started);
  if (!all.length) return null;
  const t0 = Math.min(...all.map((r) => span(r)[0]));
  const t1 = Math.max(...all.map((r) => span(r)[1]));
  const width = Math.max(1, t1 - t0);
  return el('div', { class: 'timeline', 'data-role': 'timeline' }, lanes.map((l) => {
    let total = 0;
    const bars = l.runs.filter((r) => r.started).map((r) => {
      const [s, e] = span(r);
      total += e - s;
      const bar = el('span', { class: `bar out-${r.outcome}`, title: `${l.key} attempt ${r.attempt} (${r.role || 'worker'}): ${r.outcome}, ${duration(e - s)}${r.reason ? ' · ' + oneLine(r.reason, 100).text : ''}` });
      bar.style.left = `${((s - t0) * 100) / width}%`;
      bar.style.width = `${Math.max(0.5, ((e - s) * 100) / width)}%`;
      return bar;
    });
    return el('div', { class: 'lane', 'data-lane': l.key },
      el('span', { class: 'lane-label mono', title: l.key }, l.label), el('span', { class: 'track' }, bars),
      el('span', { class: 'lane-time muted' }, duration(total)));
  }), el('div', { class: 'lane axis muted' }, el('span'), el('span', { class: 'axis-span' }, when(new Date(t0).toISOString()), el('span', null, duration(t1 - t0))), el('span')));
}

const SVG = 'http://www.w3.org/2000/svg';

function svgEl(tag, attrs) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, String(v));
  return n;
}

// chart draws the spend (the sum of the attempts' cost, or of their tokens
// when no cost is reported) and the atoms left to do (at each sweep's end)
// over the loop's time.
function chart(evs) {
  const spend = [];
  const left = [];
  let cost = 0;
  let tokens = 0;
  for (const e of evs) {
    const t = new Date(e.time).getTime();
    if (!Number.isFinite(t)) continue;
    if (!spend.length && (e.type === 'run_start' || e.type === 'run_resume')) spend.push([t, 0, 0]);
    if (e.type === 'atom_finish' && (e.cost_usd || e.tokens)) {
      cost += e.cost_usd || 0;
      tokens += e.tokens || 0;
      spend.push([t, cost, tokens]);
    }
    if (e.type === 'iteration' && e.data && typeof e.data.unresolved === 'number') left.push([t, e.data.unresolved]);
  }
  if (spend.length < 2 && !left.length) return el('p', { class: 'empty' }, 'Nothing spent or swept yet.');
  const byCost = cost > 0;
  // Spend grows in steps, at each attempt's end.
  const pts = [];
  for (const [t, c, k] of spend) {
    if (pts.length) pts.push([t, pts[pts.length - 1][1]]);
    pts.push([t, byCost ? c : k]);
  }
  const all = pts.concat(left);
  const t0 = Math.min(...all.map((p) => p[0]));
  const t1 = Math.max(...all.map((p) => p[0]), t0 + 1);
  const W = 600;
  const H = 140;
  const x = (t) => ((t - t0) * W) / (t1 - t0);
  const line = (series, cls) => {
    const top = Math.max(...series.map((p) => p[1]), 1e-9);
    return svgEl('polyline', { class: cls, fill: 'none', points: series.map(([t, v]) => `${x(t).toFixed(1)},${(H - 4 - (v * (H - 8)) / top).toFixed(1)}`).join(' ') });
  };
  const svg = svgEl('svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', class: 'chart', role: 'img', 'aria-label': 'spend and atoms left over time' });
  svg.append(svgEl('line', { class: 'chart-base', x1: 0, y1: H - 4, x2: W, y2: H - 4 }));
  if (pts.length > 1) svg.append(line(pts, 'spend'));
  if (left.length) svg.append(line(left.length === 1 ? [[t0, left[0][1]], left[0]] : left, 'left'));
  const now = left.length ? left[left.length - 1][1] : null;
  return el('div', null, svg,
    el('p', { class: 'legend muted' },
      el('span', { class: 'key spend' }, byCost ? `spend ${money(cost)}` : `tokens ${count(tokens)}`), ' ',
      now !== null ? el('span', { class: 'key left' }, `atoms left ${now} (from ${Math.max(...left.map((p) => p[1]))})`) : null,
      ` · ${duration(t1 - t0)}`));
}
