// The loop page's controls: start, pause (optionally killing the running
// agents), resume, stop with a reason, and the redirect form, each mapped
// to its request in docs/API.md.
import { loopPath, post } from './api.js';
import { el, fill } from './dom.js';

// Controls draws the panel for a loop; update(summary) shows what its
// status allows; after(action) is called when a control succeeded.
export class Controls {
  constructor(id, after) {
    this.id = id;
    this.after = after;
    this.msg = el('p', { class: 'msg', role: 'status' });
    this.node = el('section', { class: 'panel controls', 'aria-label': 'controls' });
    this.build();
  }

  build() {
    const f = (name, label, props) => field(name, label, props);
    // Start.
    this.startForm = el('form', { class: 'ctl', 'data-form': 'start' },
      el('div', { class: 'row' },
        f('agent', 'agent', { placeholder: 'as configured (claude, codex, exec…)' }),
        f('model', 'model', { placeholder: 'default' })),
      f('agent_command', 'agent command (exec agent)', { placeholder: 'sh ./agent.sh' }),
      el('div', { class: 'row' },
        f('max_parallel', 'max parallel', { type: 'number', min: 1 }),
        f('max_iterations', 'max iterations', { type: 'number', min: 1 })),
      el('button', { type: 'submit', class: 'btn btn-start', 'data-action': 'start' }, 'Start'));
    this.startForm.addEventListener('submit', (e) => {
      e.preventDefault();
      const v = values(this.startForm);
      const body = {};
      for (const k of ['agent', 'agent_command', 'model']) if (v[k]) body[k] = v[k];
      for (const k of ['max_parallel', 'max_iterations']) if (v[k]) body[k] = Number(v[k]);
      this.send('start', body);
    });
    // Pause and resume.
    this.pauseForm = el('form', { class: 'ctl', 'data-form': 'pause' },
      f('reason', 'reason (optional)', { placeholder: 'why you pause' }),
      el('label', { class: 'checkbox' }, el('input', { type: 'checkbox', name: 'kill' }), ' kill the running agents (else they finish their atom)'),
      el('button', { type: 'submit', class: 'btn btn-pause', 'data-action': 'pause' }, 'Pause'));
    this.pauseForm.addEventListener('submit', (e) => {
      e.preventDefault();
      const v = values(this.pauseForm);
      this.send('pause', { kill: v.kill, ...(v.reason ? { reason: v.reason } : {}) });
    });
    this.resumeButton = el('button', { type: 'button', class: 'btn btn-resume', 'data-action': 'resume', onclick: () => this.send('resume', {}) }, 'Resume');
    // Stop.
    // Stop asks first: the form's button opens a confirmation.
    const stopButton = el('button', { type: 'submit', class: 'btn btn-stop', 'data-action': 'stop' }, 'Stop');
    const confirmStop = el('div', { class: 'confirm', hidden: true },
      el('span', { class: 'confirm-q' }, 'Stop this loop? Its agents are killed; Start resumes it later.'),
      el('div', { class: 'row' },
        el('button', { type: 'button', class: 'btn btn-stop', 'data-action': 'confirm-stop', onclick: () => {
          const v = values(this.stopForm);
          this.confirming(false);
          this.send('stop', v.reason ? { reason: v.reason } : {});
        } }, 'Yes, stop'),
        el('button', { type: 'button', class: 'btn btn-ghost', 'data-action': 'cancel', onclick: () => this.confirming(false) }, 'Cancel')));
    this.confirming = (on) => {
      confirmStop.hidden = !on;
      stopButton.hidden = on;
    };
    this.stopForm = el('form', { class: 'ctl', 'data-form': 'stop' },
      f('reason', 'reason', { placeholder: 'why you stop (optional)' }), stopButton, confirmStop);
    this.stopForm.addEventListener('submit', (e) => {
      e.preventDefault();
      this.confirming(true);
    });
    this.redirect = redirectForm((body) => this.send('redirect', body));
    this.pauseBox = el('div', { class: 'ctl-box' }, el('h3', null, 'Pause'), this.pauseForm);
    this.resumeBox = el('div', { class: 'ctl-box' }, el('h3', null, 'Resume'),
      el('p', { class: 'hint' }, 'Nothing new starts while the loop is paused.'), this.resumeButton);
    this.stopBox = el('div', { class: 'ctl-box' }, el('h3', null, 'Stop'), this.stopForm);
    this.startBox = el('div', { class: 'ctl-box' }, el('h3', null, 'Start'),
      el('p', { class: 'hint' }, 'Runs aot run for this loop; empty fields keep the loop\'s own settings.'), this.startForm);
    fill(this.node, el('h2', null, 'Controls'), this.msg,
      el('div', { class: 'ctl-grid' }, this.startBox, this.pauseBox, this.resumeBox, this.stopBox),
      this.redirect.node);
  }

  update(s) {
    const running = s.status === 'running';
    const paused = s.status === 'paused';
    // Start only where it can start: not on a completed loop, nor on one
    // whose state file cannot be read.
    this.startBox.hidden = running || paused || s.status === 'completed' || !!s.error;
    this.pauseBox.hidden = !running;
    this.resumeBox.hidden = !paused;
    this.stopBox.hidden = !(running || paused);
    this.redirect.atoms(s);
  }

  async send(action, body) {
    const buttons = this.node.querySelectorAll('button');
    for (const b of buttons) b.disabled = true;
    this.msg.dataset.kind = 'info';
    this.msg.textContent = `${action}…`;
    try {
      const r = await post(loopPath(this.id, '/' + action), body);
      this.msg.textContent = done(action, r);
      if (action === 'redirect') this.redirect.reset();
    } catch (e) {
      this.msg.dataset.kind = 'error';
      this.msg.textContent = `${action}: ${e.message}`;
    }
    for (const b of buttons) b.disabled = false;
    this.after(action);
  }
}

function done(action, r) {
  switch (action) {
    case 'start': return `Started (aot run, pid ${r.pid}).`;
    case 'pause': return r.kill ? 'Paused; the running agents were killed.' : 'Paused: running agents finish their atom, nothing new starts.';
    case 'resume': return 'Resumed.';
    case 'stop': return `Stopped: ${r.reason || r.status}.`;
    case 'redirect': return `Redirected: ${r.applied_by === 'engine' ? 'the running engine applied it' : 'written to the state file'}${r.corrections ? ` (recorded as a ${r.corrections} correction)` : ''}.`;
    default: return 'Done.';
  }
}

function field(name, label, props) {
  const input = props && props.textarea
    ? el('textarea', { name, rows: 2, ...props, textarea: null })
    : el('input', { name, type: 'text', ...props });
  return el('label', { class: 'field' }, el('span', null, label), input);
}

// values reads a form: text trimmed, checkboxes as booleans.
function values(form) {
  const v = {};
  for (const n of form.elements) {
    if (!n.name) continue;
    v[n.name] = n.type === 'checkbox' ? n.checked : n.value.trim();
  }
  return v;
}

const list = (s) => s.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);

const CONSTRAINTS = [
  ['max_iterations', 'max iterations', 'int'],
  ['max_parallel_agents', 'max parallel agents', 'int'],
  ['max_stall_count', 'max stall count', 'int'],
  ['max_attempts_per_atom', 'max attempts per atom', 'int'],
  ['max_wall_time', 'max wall time (e.g. 2h)', 'text'],
  ['max_cost_usd', 'max cost (USD)', 'float'],
  ['max_tokens', 'max tokens', 'int'],
];

// redirectForm is the redirect change: a reason and any of the objective
// fields, atoms to add or remove, OR choices to force, constraints, and
// bindings to clear.
function redirectForm(submit) {
  const f = field;
  const atomRows = el('div', { class: 'atom-rows' });
  const addRow = () => atomRows.append(el('fieldset', { class: 'atom-row' },
    el('legend', null, 'add an atom'),
    el('div', { class: 'row' },
      f('atom_id', 'id', { placeholder: 'A7' }),
      f('atom_depends_on', 'depends on (ids)', { placeholder: 'A3, A4' })),
    f('atom_description', 'description', { textarea: true })));
  addRow();
  const groups = el('datalist', { id: 'redirect-atom-ids' });
  const msg = el('p', { class: 'msg', role: 'status' });
  const form = el('form', { class: 'redirect', 'data-form': 'redirect' },
    f('reason', 'reason (required)', { required: true, placeholder: 'what changed and why' }),
    el('details', null, el('summary', null, 'objective'),
      f('goal', 'goal', { textarea: true }),
      f('background_intent', 'background intent', { textarea: true }),
      f('deliverables', 'deliverables', { textarea: true }),
      f('definition_of_done', 'definition of done', { textarea: true })),
    el('details', null, el('summary', null, 'work graph'),
      atomRows,
      el('button', { type: 'button', class: 'btn btn-ghost', onclick: addRow }, 'another atom'),
      f('remove_atoms', 'remove atoms (ids)', { list: 'redirect-atom-ids' }),
      f('clear_bindings', 'clear bindings and redo (ids)', { list: 'redirect-atom-ids' }),
      el('div', { class: 'row' },
        f('select_group', 'force OR group', { placeholder: 'group id' }),
        f('select_choice', 'to choice', { placeholder: 'atom id', list: 'redirect-atom-ids' }))),
    el('details', null, el('summary', null, 'constraints'),
      el('div', { class: 'row wrap' }, CONSTRAINTS.map(([k, label, t]) => f(k, label, t === 'text' ? {} : { type: 'number', min: 0, step: t === 'float' ? 'any' : 1 })))),
    groups, msg,
    el('button', { type: 'submit', class: 'btn', 'data-action': 'redirect' }, 'Redirect'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    msg.textContent = '';
    try {
      submit(redirectBody(form, atomRows));
    } catch (err) {
      msg.dataset.kind = 'error';
      msg.textContent = err.message;
    }
  });
  return {
    node: el('details', { class: 'ctl-redirect' }, el('summary', null, 'Redirect: change the goal, the graph or the limits'), form),
    reset() {
      form.reset();
      atomRows.replaceChildren();
      addRow();
    },
    atoms(s) {
      // Suggest the ids the loop has (from the graph the page fetched).
      const ids = s.atom_ids || [];
      if (groups.dataset.ids === ids.join(',')) return;
      groups.dataset.ids = ids.join(',');
      groups.replaceChildren(...ids.map((id) => el('option', { value: id })));
    },
  };
}

export function redirectBody(form, atomRows) {
  const v = {};
  for (const n of form.elements) if (n.name && !n.name.startsWith('atom_')) v[n.name] = n.value.trim();
  if (!v.reason) throw new Error('A redirect needs a reason.');
  const body = { reason: v.reason };
  for (const k of ['goal', 'background_intent', 'deliverables', 'definition_of_done']) if (v[k]) body[k] = v[k];
  const add = [];
  for (const row of atomRows.querySelectorAll('.atom-row')) {
    const get = (name) => row.querySelector(`[name="${name}"]`).value.trim();
    const id = get('atom_id');
    const description = get('atom_description');
    if (!id && !description) continue;
    if (!id || !description) throw new Error('An added atom needs an id and a description.');
    const a = { id, description };
    const deps = list(get('atom_depends_on'));
    if (deps.length) a.depends_on = deps;
    add.push(a);
  }
  if (add.length) body.add_atoms = add;
  if (v.remove_atoms) body.remove_atoms = list(v.remove_atoms);
  if (v.clear_bindings) body.clear_bindings = list(v.clear_bindings);
  if (v.select_group || v.select_choice) {
    if (!v.select_group || !v.select_choice) throw new Error('Forcing an OR choice needs the group and the choice.');
    body.select = [{ group: v.select_group, choice: v.select_choice }];
  }
  for (const [k, label, t] of CONSTRAINTS) {
    if (!v[k]) continue;
    if (t === 'text') {
      body[k] = v[k];
      continue;
    }
    const n = Number(v[k]);
    if (!Number.isFinite(n) || n < 0 || (t === 'int' && !Number.isInteger(n))) throw new Error(`${label}: not a valid number`);
    body[k] = n;
  }
  if (Object.keys(body).length === 1) throw new Error('The redirect changes nothing: fill in at least one field besides the reason.');
  return body;
}
