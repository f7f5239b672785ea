// The sweeps list (#/sweeps): every sweep, newest first, with its owner, status, its
// trials by state, the metric it judges by and its best trial so far. Kept fresh by
// the live stream: a trial's run that changes or ends fetches the list again.
import { get } from './api.js';
import { ago, badge, h, num } from './format.js';
import { subscribe } from './live.js';

// "3 running · 2 stopped · 1 succeeded" from a sweep's trial_counts (the states it has).
export function trialCounts(counts) {
  const order = ['running', 'pending', 'paused', 'succeeded', 'stopped', 'failed', 'canceled'];
  return order.filter((s) => counts && counts[s]).map((s) => `${counts[s]} ${s}`).join(' · ') || 'no trials yet';
}

// "test_loss ↓" (minimize) or "test_acc ↑" (maximize).
export function metricName(metric) {
  if (!metric) return '';
  return `${metric.key} ${metric.goal === 'maximize' ? '↑' : '↓'}`;
}

export function mountSweeps(root) {
  let disposed = false, timer = null;
  const status = h('p', { class: 'muted', id: 'sweeps-status' }, 'Loading…');
  const tbody = h('tbody');
  const table = h('table', { class: 'runs', id: 'sweeps-table', hidden: true },
    h('thead', {}, h('tr', {}, ...['Sweep', 'Owner', 'Status', 'Trials', 'Metric', 'Best', 'Created'].map((t) => h('th', {}, t)))),
    tbody);
  const empty = h('div', { class: 'empty', id: 'sweeps-empty', hidden: true },
    h('h2', {}, 'No sweeps yet'),
    h('p', {}, 'A sweep searches a run config over its parameters (grid or random), stopping the worst trials early: ',
      h('code', {}, 'ddpctl sweep submit sweep.json'), ', or POST /sweeps.'));
  root.append(h('div', { class: 'page-head' }, h('h1', {}, 'Sweeps')), status, empty, table);

  function cell(label, ...content) { return h('td', { 'data-label': label }, ...content); }

  function row(s) {
    const best = s.best && s.best.metric !== null && s.best.metric !== undefined
      ? h('span', {}, num(s.best.metric), ' ', h('span', { class: 'muted' }, `trial ${s.best.trial}`)) : h('span', { class: 'muted' }, '—');
    return h('tr', { 'data-sweep': s.id },
      cell('Sweep', h('a', { href: `#/sweeps/${s.id}` }, `#${s.id}`), ' ', s.name || ''),
      cell('Owner', s.owner || h('span', { class: 'muted' }, '—')),
      cell('Status', badge(s.status)),
      cell('Trials', trialCounts(s.trial_counts)),
      cell('Metric', metricName(s.metric)),
      cell('Best', best),
      cell('Created', s.created_at ? ago(s.created_at) : ''));
  }

  async function load() {
    let list;
    try { list = (await get('/sweeps')).sweeps; } catch (e) { status.textContent = e.message; status.hidden = false; return; }
    if (disposed) return;
    list.sort((a, b) => b.id - a.id);
    status.hidden = true;
    empty.hidden = list.length > 0;
    table.hidden = list.length === 0;
    tbody.replaceChildren(...list.map(row));
  }

  // a run's change may be a trial's, a sweep event a sweep's decision (its end among
  // them): the list is fetched again, at most once a second
  function soon() { if (!timer) timer = setTimeout(() => { timer = null; if (!disposed) load(); }, 1000); }
  const close = subscribe('/events', { ready: soon, run: soon, deleted: soon, epoch: soon, sweep: soon });
  load();
  return () => { disposed = true; clearTimeout(timer); close(); };
}
