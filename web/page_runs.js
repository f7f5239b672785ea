// The runs list (#/): every run, newest first, with its status, a progress bar, a
// loss sparkline, devices, when it started and how long it took; kept live by
// /events (new runs appear, statuses and progress move, deleted runs go).
import { get } from './api.js';
import { ema, sparkline } from './charts.js';
import { ago, badge, devices, duration, FINISHED, h, LIVE, num, runDuration } from './format.js';
import { subscribe } from './live.js';

const SPARK_POINTS = 60;
const SPARK_RUNS = 40; // sparklines fetched for the newest this many runs

export function mountRuns(root) {
  const rows = new Map(); // id -> { run, tr, spark: [] }
  let disposed = false;
  const status = h('p', { class: 'muted', id: 'runs-status' }, 'Loading…');
  const tbody = h('tbody');
  const table = h('table', { class: 'runs', id: 'runs-table', hidden: true },
    h('thead', {}, h('tr', {}, ['Run', 'Status', 'Progress', 'Loss', 'Devices', 'Started', 'Duration'].map((t) => h('th', {}, t)))),
    tbody);
  const empty = h('div', { class: 'empty', id: 'runs-empty', hidden: true },
    h('h2', {}, 'No runs yet'),
    h('p', {}, 'Submit a training run from the form, or with ', h('code', {}, 'ddpctl submit run.json'), '.'),
    h('a', { class: 'button primary', href: '#/submit' }, 'Submit a run'));
  const more = h('p', { class: 'muted', hidden: true }, 'The newest 200 runs are shown; ddpctl list --limit N shows more.');
  root.append(
    h('div', { class: 'page-head' }, h('h1', {}, 'Runs'), h('a', { class: 'button primary', href: '#/submit' }, 'New run')),
    status, empty, table, more);

  function cell(label, ...content) { return h('td', { 'data-label': label }, ...content); }

  function render(entry) {
    const { run } = entry;
    const p = run.progress || {};
    const fraction = p.fraction ?? (run.status === 'succeeded' ? 1 : 0);
    const tr = h('tr', { class: `run-row status-${run.status}`, 'data-run': run.id },
      cell('Run', h('a', { href: `#/runs/${run.id}`, class: 'run-link' }, `#${run.id}`), ' ', h('span', { class: 'run-name' }, run.name || '')),
      cell('Status', badge(run.status),
        run.reason && run.status !== 'succeeded' ? h('div', { class: 'reason-short', title: run.reason }, run.reason) : null),
      cell('Progress', h('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': Math.round(fraction * 100) },
        h('div', { class: `bar bar-${run.status}`, style: `width:${(fraction * 100).toFixed(1)}%` })),
        h('div', { class: 'progress-text' },
          p.epochs ? `epoch ${Math.min((p.epoch ?? 0) + 1, p.epochs)}/${p.epochs} · ` : '', `${Math.round(fraction * 100)}%`)),
      cell('Loss', h('span', { class: 'spark-wrap' }, sparkline(ema(entry.spark, 0.7))), h('span', { class: 'loss-value' }, num(p.loss))),
      cell('Devices', devices(run)),
      cell('Started', h('span', { title: run.started_at || '' }, run.started_at ? ago(run.started_at) : run.status === 'queued' ? 'waiting' : '—')),
      cell('Duration', h('span', { class: 'duration' }, duration(runDuration(run)))));
    if (entry.tr) entry.tr.replaceWith(tr);
    entry.tr = tr;
    return tr;
  }

  function showEmpty() {
    const none = rows.size === 0;
    empty.hidden = !none;
    table.hidden = none;
  }

  function add(run, atTop) {
    const entry = { run, tr: null, spark: [] };
    rows.set(run.id, entry);
    const tr = render(entry);
    if (atTop) tbody.prepend(tr); else tbody.append(tr);
    showEmpty();
    return entry;
  }

  async function loadSpark(entry) {
    try {
      const m = await get(`/runs/${entry.run.id}/metrics?key=loss&max_points=${SPARK_POINTS}`);
      if (disposed) return;
      entry.spark = m.points.map((pt) => pt[1]);
      render(entry);
    } catch { /* the row stays without its sparkline */ }
  }

  async function refreshRun(id) {
    try {
      const run = await get(`/runs/${id}`);
      if (disposed) return;
      const entry = rows.get(id);
      if (entry) { entry.run = run; render(entry); } else { loadSpark(add(run, true)); }
    } catch { /* deleted meanwhile, or offline: the next event or reload mends it */ }
  }

  async function load() {
    try {
      const page = await get('/runs?limit=200');
      if (disposed) return;
      status.hidden = true;
      const seen = new Set();
      for (const run of page.runs) {
        seen.add(run.id);
        const entry = rows.get(run.id);
        if (entry) { entry.run = run; render(entry); } else add(run, false);
      }
      for (const [id, entry] of rows) if (!seen.has(id)) { entry.tr.remove(); rows.delete(id); }
      // keep newest first
      [...rows.values()].sort((a, b) => b.run.id - a.run.id).forEach((e) => tbody.append(e.tr));
      showEmpty();
      more.hidden = !page.next;
      [...rows.values()].slice(0, SPARK_RUNS).forEach(loadSpark);
    } catch (e) {
      status.hidden = false;
      status.textContent = e.message;
      status.className = 'error-box';
    }
  }

  load();
  const close = subscribe('/events', {
    ready: () => load(), // (re)connected: fetched again, so nothing between is missed
    run: (d) => {
      const entry = rows.get(d.run);
      if (entry) { entry.run = { ...entry.run, status: d.status, reason: d.reason ?? entry.run.reason }; render(entry); }
      refreshRun(d.run);
    },
    deleted: (d) => {
      const entry = rows.get(d.run);
      if (entry) { entry.tr.remove(); rows.delete(d.run); showEmpty(); }
    },
    step: (d) => {
      const entry = rows.get(d.run);
      if (!entry || FINISHED.has(entry.run.status)) return;
      entry.run.progress = { ...entry.run.progress, ...d };
      if (d.loss !== null) {
        entry.spark.push(d.loss);
        if (entry.spark.length > 2 * SPARK_POINTS) entry.spark = entry.spark.filter((_, i) => i % 2 === 1);
      }
      render(entry);
    },
  });

  // Durations of live runs tick.
  const timer = setInterval(() => {
    for (const entry of rows.values()) {
      if (!LIVE.has(entry.run.status) || !entry.tr) continue;
      const d = entry.tr.querySelector('.duration');
      if (d) d.textContent = duration(runDuration(entry.run));
    }
  }, 1000);

  return () => { disposed = true; close(); clearInterval(timer); };
}
