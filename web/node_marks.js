// A node's mark on the nodes page (#/nodes), as GET /nodes gives it (docs/failures.md):
// its state (suspect, excluded, watched, or fine), each of its devices' state, the
// failures that count toward it (class, run, device, when), the evidence of the last
// one as the API words it ("<hidden>" to a caller who neither owns that run nor is an
// admin: the page shows what it was given, and says why), and for an admin a Clear
// button that asks POST /nodes/{name}/clear.
import { ago, h } from './format.js';

// The node's mark state: 'excluded', 'suspect' (the node or some of its devices),
// 'watched' (failures there, fewer than make it suspect) or 'fine'; and the mark.
export function markOf(n) {
  if (n.suspect) return { state: n.suspect.state === 'excluded' ? 'excluded' : 'suspect', mark: n.suspect };
  if (n.watch) return { state: 'watched', mark: n.watch };
  return { state: 'fine', mark: null };
}

// Every device of the node ("cpu:0", "gpu:ID") and those its failures name, each
// with its state: the node's when it is excluded or suspect as a whole; suspect on
// its own; watched when a failure within the window was on it; else fine.
export function deviceStates(n) {
  const { state, mark } = markOf(n);
  const names = [];
  for (let i = 0; i < (n.slots || 0); i++) names.push(`cpu:${i}`);
  for (const g of n.gpus || []) names.push(`gpu:${g}`);
  for (const f of (mark && mark.failures) || []) if (f.device && !names.includes(f.device)) names.push(f.device);
  const suspect = new Set(n.suspect_devices || []);
  const failed = new Set(((mark && mark.failures) || []).map((f) => f.device).filter(Boolean));
  return names.map((d) => {
    let s = 'fine';
    if (state === 'excluded') s = 'excluded';
    else if (mark && mark.suspect) s = 'suspect';
    else if (suspect.has(d)) s = 'suspect';
    else if (failed.has(d)) s = 'watched';
    return { device: d, state: s };
  });
}

export function markBadge(state, what) {
  return h('span', { class: `badge badge-mark-${state}`, 'data-mark': state }, what ? `${state}: ${what}` : state);
}

// What of the node the mark is on: the whole node, or its suspect devices.
function markWhat(state, mark, n) {
  if (state === 'excluded' || (mark && mark.suspect)) return 'the whole node';
  if (state === 'suspect') return (n.suspect_devices || []).join(', ');
  return '';
}

function when(ms) {
  if (typeof ms !== 'number') return '—';
  const iso = new Date(ms).toISOString();
  return h('span', { title: iso }, `${new Date(ms).toLocaleString()} (${ago(iso)})`);
}

// The card of a marked node; `admin`: whether this caller may clear it; `onClear(name)`
// asks the server and resolves to an error message or null.
export function markCard(n, admin, onClear) {
  const { state, mark } = markOf(n);
  const hidden = (mark.hidden || []).includes('evidence');
  const status = h('span', { class: 'muted small mark-status' });
  const clear = admin
    ? h('button', {
      class: 'button small danger clear-mark', type: 'button', 'data-node': n.name,
      title: 'POST /nodes/{name}/clear: runs may be placed there again (ddpd node clear NAME does the same)',
      onclick: async (e) => {
        e.target.disabled = true;
        status.textContent = 'Clearing…';
        const err = await onClear(n.name);
        if (err) { status.textContent = `Cannot clear ${n.name}: ${err}`; e.target.disabled = false; }
      },
    }, 'Clear')
    : null;
  const devs = deviceStates(n);
  const failures = (mark.failures || []).slice().reverse(); // newest first
  return h('div', { class: 'node-mark', 'data-node': n.name, 'data-state': state },
    h('div', { class: 'node-mark-head' },
      h('strong', {}, n.name), ' ', markBadge(state, markWhat(state, mark, n)),
      h('span', { class: 'muted small' }, ` since ${mark.since ? new Date(mark.since).toLocaleString() : '—'}; `,
        `${failures.length} failure${failures.length === 1 ? '' : 's'} within the window, ${mark.failed_runs} run${mark.failed_runs === 1 ? '' : 's'}`),
      clear, status),
    h('div', { class: 'mark-devices small' }, 'Devices: ',
      devs.map((d) => h('span', { class: `device-state device-${d.state}`, 'data-device': d.device, 'data-state': d.state },
        `${d.device} ${d.state}`))),
    h('div', { class: 'mark-last small' }, 'Last: ', h('code', { class: 'mark-class' }, mark.class || '—'),
      ' in ', h('a', { href: `#/runs/${mark.run_id}` }, `run #${mark.run_id}`),
      mark.owner ? ` (${mark.owner})` : '', ': ',
      h('code', { class: `mark-evidence${hidden ? ' muted' : ''}`, 'data-hidden': hidden ? 'evidence' : null }, mark.evidence || '—'),
      hidden ? h('span', { class: 'muted' }, ' (hidden: a line of a run that is not yours)') : ''),
    failures.length ? h('table', { class: 'runs mark-failures small' },
      h('thead', {}, h('tr', {}, ['Class', 'Run', 'Attempt', 'Device', 'When'].map((t) => h('th', {}, t)))),
      h('tbody', {}, failures.map((f) => h('tr', { class: 'mark-failure', 'data-run': String(f.run_id) },
        h('td', { 'data-label': 'Class' }, h('code', {}, f.class || '—')),
        h('td', { 'data-label': 'Run' }, h('a', { href: `#/runs/${f.run_id}` }, `#${f.run_id}`), f.owner ? ` (${f.owner})` : ''),
        h('td', { 'data-label': 'Attempt' }, String(f.attempt ?? '—')),
        h('td', { 'data-label': 'Device' }, f.device || 'the node'),
        h('td', { 'data-label': 'When' }, when(f.t)))))) : null);
}
