// One sweep (#/sweeps/{id}): its status, method, metric and early stopping; its best
// trial; its trials as a table sorted by the metric (best first; a trial's
// parameters, state, the rung it reached and why the searcher stopped it); the
// trials' curves overlaid (the runs list's compare view, one line per trial's run);
// and the metric against each parameter (sweep_scatter.js). Cancel stops every trial.
// Live: a change to one of its trials' runs fetches the sweep again (at most once a
// second), and the changed runs' curves.
import { get, post } from './api.js';
import { loadUPlot } from './charts.js';
import { mountCompare } from './compare.js';
import { badge, h, num } from './format.js';
import { subscribe } from './live.js';
import { metricName, trialCounts } from './page_sweeps.js';
import { mountScatter } from './sweep_scatter.js';

// Trials in order: those with a metric, best first by the goal; then the rest by number.
export function byMetric(trials, goal) {
  const sign = goal === 'maximize' ? -1 : 1;
  const has = (t) => t.metric !== null && t.metric !== undefined;
  return trials.slice().sort((a, b) => (has(a) && has(b) ? sign * (a.metric - b.metric) || a.trial - b.trial
    : has(a) ? -1 : has(b) ? 1 : a.trial - b.trial));
}

// A parameter's value as a cell shows it.
function paramText(v) { return typeof v === 'number' ? num(v) : typeof v === 'string' ? v : JSON.stringify(v); }

// The parameters whose values this reader may not see (a command run's sweep read by
// one who is neither its owner nor an admin: the answer's `hidden` lists them as
// /spec/parameters/KEY): their cells read <hidden>, and no scatter is drawn for them.
function hiddenParams(sweep) {
  const prefix = '/spec/parameters/';
  return new Set((sweep.hidden || []).filter((p) => p.startsWith(prefix))
    .map((p) => p.slice(prefix.length).replace(/~1/g, '/').replace(/~0/g, '~')));
}

// How the sweep searches, in a line.
function methodText(spec) {
  if (!spec) return '';
  const es = spec.early_stopping;
  const stop = !es ? 'no early stopping'
    : es.type === 'asha' ? `successive halving (ASHA): rungs from ${es.min_resource} epoch${es.min_resource === 1 ? '' : 's'}, reduction factor ${es.reduction_factor}`
      : `median stopping${es.min_resource ? ` from epoch ${es.min_resource}` : ''}`;
  const method = spec.method === 'random' ? `random search (seed ${spec.seed})` : 'grid search';
  return `${method}, ${spec.max_trials} trials at most, ${spec.parallel} at once; ${stop}`;
}

export function mountSweep(root, id) {
  let sweep = null, disposed = false, timer = null, uPlot = null;
  const scatters = new Map(); // parameter path -> scatter
  const changed = new Set(); // runs whose curves are fetched again
  const title = h('h1', {}, `Sweep #${id}`);
  const statusSlot = h('span');
  const actionMsg = h('span', { class: 'action-msg' });
  const cancelBtn = h('button', { class: 'button danger', id: 'cancel-sweep', hidden: true, onclick: cancel }, 'Cancel sweep');
  const summary = h('p', { class: 'muted', id: 'sweep-summary' });
  const reasonBox = h('p', { class: 'reason', id: 'sweep-reason', hidden: true });
  const bestBox = h('section', { class: 'card', id: 'sweep-best', hidden: true });
  const tbody = h('tbody');
  const thead = h('thead');
  const table = h('table', { class: 'runs', id: 'sweep-trials' }, thead, tbody);
  const scatterGrid = h('div', { class: 'scatter-grid', id: 'sweep-scatters' });
  const status = h('p', { class: 'muted' }, 'Loading…');
  root.append(
    h('div', { class: 'page-head' }, h('div', { class: 'title-line' }, title, statusSlot), h('div', { class: 'actions' }, actionMsg, cancelBtn)),
    status, summary, reasonBox, bestBox, h('h2', {}, 'Trials'), table, scatterGrid);
  let compare = null; // made once the sweep's metric is known (the chart shows it first)
  const progress = new Map(); // run id -> its progress (the compare view offers step series with it)

  loadUPlot().then((u) => { uPlot = u; if (sweep) render(); }).catch(() => { /* the scatters say so when drawn */ });

  function cell(label, ...content) { return h('td', { 'data-label': label }, ...content); }

  function render() {
    const spec = sweep.spec || {};
    const params = Object.keys(spec.parameters || {});
    title.textContent = `Sweep #${sweep.id}${sweep.name ? ` · ${sweep.name}` : ''}`;
    document.title = `ddpd · sweep #${sweep.id}`;
    statusSlot.replaceChildren(badge(sweep.status));
    cancelBtn.hidden = sweep.status !== 'running';
    const hidden = hiddenParams(sweep);
    summary.textContent = `${metricName(sweep.metric)} · ${methodText(spec)} · ${trialCounts(sweep.trial_counts)}${sweep.owner ? ` · ${sweep.owner}'s` : ''}`
      + (hidden.size ? ` · the values of ${[...hidden].join(', ')} are hidden (${sweep.owner ? `${sweep.owner}'s` : 'its owner\'s'} and admins' to see)` : '');
    reasonBox.hidden = !sweep.reason;
    reasonBox.textContent = sweep.reason || '';

    const best = sweep.best;
    bestBox.hidden = !best;
    if (best) {
      bestBox.replaceChildren(h('h2', {}, 'Best trial'),
        h('p', {}, h('strong', { id: 'sweep-best-metric' }, `${sweep.metric.key} ${num(best.metric)}`),
          ` at epoch ${best.metric_epoch ?? '—'} · trial ${best.trial}`,
          best.run_id ? h('span', {}, ' · ', h('a', { href: `#/runs/${best.run_id}` }, `run #${best.run_id}`)) : ''),
        h('p', { class: 'muted' }, params.map((p) => `${p} = ${paramText(best.params[p])}`).join(', ')));
    }

    thead.replaceChildren(h('tr', {}, ...['Trial', 'Run', ...params, 'Status', sweep.metric.key, 'Epoch'].map((t) => h('th', {}, t))));
    const trials = byMetric(sweep.trials || [], sweep.metric.goal);
    tbody.replaceChildren(...trials.map((t) => h('tr', { 'data-trial': t.trial, 'data-status': t.status, class: best && t.trial === best.trial ? 'best' : '' },
      cell('Trial', String(t.trial)),
      cell('Run', t.run_id ? h('a', { href: `#/runs/${t.run_id}` }, `#${t.run_id}`) : h('span', { class: 'muted' }, '—')),
      ...params.map((p) => cell(p, paramText(t.params[p]))),
      cell('Status', badge(t.status), t.rung !== null && t.rung !== undefined ? h('span', { class: 'muted small' }, ` rung ${t.rung}`) : '',
        t.reason ? h('div', { class: 'muted small reason-short', title: t.reason }, t.reason) : ''),
      cell(sweep.metric.key, t.metric === null || t.metric === undefined ? '—' : num(t.metric)),
      cell('Epoch', t.metric_epoch === null || t.metric_epoch === undefined ? '—' : String(t.metric_epoch)))));

    if (uPlot) {
      for (const [i, p] of params.entries()) {
        if (hidden.has(p)) continue; // values it may not see: nothing to draw
        if (!scatters.has(p)) scatters.set(p, mountScatter(scatterGrid, uPlot, i, p, spec.parameters[p], sweep.metric));
        scatters.get(p).update(sweep.trials || [], best ? best.trial : null);
      }
    }

    // the curves of the trials that have reached the metric (one line per trial's run)
    if (!compare) {
      compare = mountCompare(root, sweep.metric.key);
      compare.panel.querySelector('#compare-clear').hidden = true;
    }
    for (const rid of changed) compare.refresh(rid);
    changed.clear();
    compare.show(trials.filter((t) => t.run_id && t.metric !== null && t.metric !== undefined)
      .map((t) => ({ id: t.run_id, name: `trial ${t.trial}`, progress: progress.get(t.run_id) || null })));
  }

  async function load() {
    let runs;
    try {
      [sweep, runs] = await Promise.all([get(`/sweeps/${id}`), get('/runs?limit=200').catch(() => ({ runs: [] }))]);
    } catch (e) { status.textContent = e.message; status.hidden = false; return; }
    if (disposed) return;
    for (const r of runs.runs || []) progress.set(r.id, r.progress || null);
    status.hidden = true;
    render();
  }

  // a run's event (data.run: its id): one of its trials', or a new trial's while it runs
  function soon(data) {
    const rid = data && data.run;
    const ours = sweep && (sweep.trials || []).some((t) => t.run_id === rid);
    if (sweep && !ours && sweep.status !== 'running') return;
    if (ours) changed.add(rid);
    if (!timer) timer = setTimeout(() => { timer = null; if (!disposed) load(); }, 1000);
  }

  async function cancel() {
    if (!window.confirm(`Cancel sweep #${id}? Every trial still queued or running is stopped; their checkpoints stay.`)) return;
    cancelBtn.disabled = true;
    actionMsg.textContent = 'Canceling…';
    try {
      await post(`/sweeps/${id}/cancel`);
      actionMsg.textContent = '';
      await load();
    } catch (e) {
      actionMsg.textContent = e.message;
      actionMsg.className = 'action-msg error';
    } finally {
      cancelBtn.disabled = false;
    }
  }

  // a decision of this sweep's searcher (a trial's end, the sweep's own) comes as a
  // `sweep` event: its last one follows its trials' last run event
  const ofThis = (d) => { if (d && String(d.sweep) === String(id)) soon(d); };
  const close = subscribe('/events', { ready: () => load(), run: soon, epoch: soon, deleted: soon, sweep: ofThis });
  load();
  return () => { disposed = true; clearTimeout(timer); close(); if (compare) compare.dispose(); for (const s of scatters.values()) s.destroy(); };
}
