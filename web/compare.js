// Comparing runs: the runs list's selected runs overlaid on one chart (uPlot), one
// line per run, as TensorBoard, W&B and MLflow do. The metrics offered are those
// every selected run has: the step series (loss, lr, samples_per_s, from
// /runs/{id}/metrics, downsampled) when each has steps, and the per-epoch ones
// (test loss, test accuracy, train loss, from /runs/{id}/epochs) when each has
// them. Step series go by step or by epoch (runs with other batch sizes line up by
// epoch), with EMA smoothing; any metric on a log axis.
import { get } from './api.js';
import { chartMessage, COLORS, ema, loadUPlot, mountChart, ticks } from './charts.js';
import { h, num } from './format.js';

const MAX_POINTS = 1000; // per run: the chart is about that wide
const METRICS = [
  { key: 'loss', label: 'loss (per step)', kind: 'step' },
  { key: 'test_loss', label: 'test loss (per epoch)', kind: 'epoch' },
  { key: 'test_acc', label: 'test accuracy (per epoch)', kind: 'epoch' },
  { key: 'train_loss', label: 'train loss (per epoch)', kind: 'epoch' },
  { key: 'lr', label: 'learning rate (per step)', kind: 'step' },
  { key: 'samples_per_s', label: 'samples/s (per step)', kind: 'step' },
];
// More than COLORS: the runs after the fifth get these.
const MORE_COLORS = ['#0891b2', '#db2777', '#65a30d', '#4b5563', '#9333ea', '#ea580c'];

export function colorOf(i) { const all = [...COLORS, ...MORE_COLORS]; return all[i % all.length]; }

// A panel in `root`; returns { show(runs), dispose() }: runs is the selected
// [{id, name, progress}], newest first. `metric`: the one shown first (a sweep's).
export function mountCompare(root, firstMetric = 'loss') {
  let runs = [], uPlot = null, chart = null, disposed = false, drawing = 0;
  const cache = new Map(); // `${id}:${key}` -> {xs, ys, spe} | `${id}:epochs` -> epochs
  const view = { metric: firstMetric, x: 'step', log: false, smoothing: 0.6 };

  const title = h('h2', { id: 'compare-title' }, 'Compare');
  const metric = h('select', { id: 'compare-metric', onchange: () => { view.metric = metric.value; draw(true); } });
  const xAxis = h('select', { id: 'compare-x', onchange: () => { view.x = xAxis.value; draw(true); } },
    h('option', { value: 'step' }, 'step'), h('option', { value: 'epoch' }, 'epoch'));
  const xLabel = h('label', {}, 'x axis ', xAxis);
  const logScale = h('input', { type: 'checkbox', id: 'compare-log', onchange: () => { view.log = logScale.checked; draw(true); } });
  const smooth = h('input', { type: 'range', id: 'compare-smooth', min: 0, max: 0.99, step: 0.01, value: view.smoothing,
    oninput: () => { view.smoothing = Number(smooth.value); smoothOut.textContent = smooth.value; draw(false); } });
  const smoothOut = h('output', {}, String(view.smoothing));
  const smoothLabel = h('label', {}, 'smoothing ', smooth, ' ', smoothOut);
  const legend = h('ul', { class: 'compare-legend', id: 'compare-legend' });
  const chartEl = h('div', { class: 'chart', id: 'compare-chart', dataset: { series: '0', points: '0' } });
  const note = h('p', { class: 'muted small', id: 'compare-note' });
  const panel = h('section', { class: 'card compare', id: 'compare', hidden: true },
    h('div', { class: 'compare-head' }, title, h('button', { class: 'button small', id: 'compare-clear', type: 'button', onclick: () => panel.dispatchEvent(new CustomEvent('clear')) }, 'Clear selection')),
    h('div', { class: 'controls' }, h('label', {}, 'metric ', metric), xLabel, h('label', {}, logScale, ' log scale'), smoothLabel),
    legend, chartEl, note);
  root.append(panel);

  loadUPlot().then((u) => { uPlot = u; if (!disposed) draw(true); }).catch((e) => chartMessage(chartEl, e.message));

  async function epochsOf(id) {
    const k = `${id}:epochs`;
    if (!cache.has(k)) cache.set(k, get(`/runs/${id}/epochs`).then((r) => r.epochs));
    return cache.get(k);
  }

  async function seriesOf(run, m) {
    const k = `${run.id}:${m.key}`;
    const spe = run.progress && run.progress.total_steps && run.progress.epochs ? run.progress.total_steps / run.progress.epochs : null;
    if (m.kind === 'epoch') {
      const eps = (await epochsOf(run.id)).filter((e) => e[m.key] !== null && e[m.key] !== undefined);
      return { xs: eps.map((e) => e.epoch), ys: eps.map((e) => (m.key === 'test_acc' ? e[m.key] * 100 : e[m.key])), spe };
    }
    if (!cache.has(k)) {
      cache.set(k, get(`/runs/${run.id}/metrics?key=${m.key}&max_points=${MAX_POINTS}`)
        .then((r) => ({ xs: r.points.map((p) => p[0]), ys: r.points.map((p) => p[1]) })));
    }
    return { ...(await cache.get(k)), spe };
  }

  // Which metrics every selected run has.
  async function common() {
    const eps = await Promise.all(runs.map((r) => epochsOf(r.id).catch(() => [])));
    return METRICS.filter((m) => (m.kind === 'step'
      ? runs.every((r) => r.progress && r.progress.global_step > 0)
      : eps.every((list) => list.some((e) => e[m.key] !== null && e[m.key] !== undefined))));
  }

  async function draw(rebuild) {
    if (!runs.length || panel.hidden) return;
    const ticket = ++drawing;
    let offered;
    try { offered = await common(); } catch (e) { chartMessage(chartEl, e.message); return; }
    if (ticket !== drawing || disposed) return;
    metric.replaceChildren(...offered.map((m) => h('option', { value: m.key, selected: m.key === view.metric }, m.label)));
    if (!offered.some((m) => m.key === view.metric) && offered.length) view.metric = offered[0].key;
    metric.value = view.metric;
    const m = offered.find((x) => x.key === view.metric);
    chartEl.dataset.metric = m ? m.key : '';
    xLabel.hidden = !m || m.kind === 'epoch';
    smoothLabel.hidden = !m || m.kind === 'epoch';
    const missing = METRICS.filter((x) => !offered.includes(x)).map((x) => x.key);
    note.textContent = missing.length ? `Not every selected run has ${missing.join(', ')}: those are not offered.` : '';
    if (!m) {
      if (chart) { chart.destroy(); chart = null; }
      chartMessage(chartEl, 'These runs have no metric in common yet (a queued run has none).');
      chartEl.dataset.series = '0';
      return;
    }
    let data;
    try { data = await Promise.all(runs.map((r) => seriesOf(r, m))); } catch (e) { chartMessage(chartEl, e.message); return; }
    if (ticket !== drawing || disposed || !uPlot) return;
    const byEpoch = m.kind === 'epoch' || view.x === 'epoch';
    const tables = data.map((d) => {
      const xs = m.kind === 'step' && byEpoch ? d.xs.map((s) => (d.spe ? s / d.spe : s)) : d.xs;
      const ys = m.kind === 'step' ? ema(d.ys, view.smoothing) : d.ys;
      return [xs, ys];
    });
    const joined = uPlot.join(tables);
    chartEl.dataset.series = String(runs.length);
    chartEl.dataset.points = String(data.reduce((n, d) => n + d.xs.length, 0));
    const fmt = m.key === 'test_acc' ? (v) => (v === null ? '' : `${v.toFixed(1)}%`) : (v) => (v === null ? '' : num(v));
    const positive = data.every((d) => d.ys.every((v) => v === null || v > 0));
    if (chart && !rebuild) { chart.setData(joined); return; }
    if (chart) chart.destroy();
    chart = mountChart(uPlot, chartEl, (width) => ({
      width, height: width < 500 ? 240 : 320,
      scales: { x: { time: false }, y: view.log && positive ? { distr: 3, log: 10 } : {} },
      series: [
        { label: byEpoch ? 'epoch' : 'step', value: (u, v) => (v === null ? '' : byEpoch ? v.toFixed(2) : String(Math.round(v))) },
        ...runs.map((r, i) => ({ label: `#${r.id}`, stroke: colorOf(i), width: 2, spanGaps: true, value: (u, v) => fmt(v),
          points: { show: m.kind === 'epoch' } })),
      ],
      axes: [{ label: byEpoch ? 'epoch' : 'step' }, { values: (u, vs) => (m.key === 'test_acc' ? ticks(vs).map((t) => `${t}%`) : ticks(vs)), size: 60 }],
      legend: { show: width >= 500, live: true },
    }), joined);
  }

  function renderLegend() {
    legend.replaceChildren(...runs.map((r, i) => h('li', { 'data-run': r.id },
      h('span', { class: 'swatch', style: `background:${colorOf(i)}` }), h('a', { href: `#/runs/${r.id}` }, `#${r.id}`), ' ',
      h('span', { class: 'muted' }, r.name || ''))));
  }

  return {
    panel,
    show(selected) {
      const before = runs.map((r) => r.id).join(',');
      runs = selected;
      panel.hidden = runs.length < 2;
      title.textContent = `Compare ${runs.length} runs`;
      renderLegend();
      if (panel.hidden) return;
      draw(before !== runs.map((r) => r.id).join(','));
    },
    // a selected run moved on (a step, an epoch, its end): its series are fetched again
    refresh(id) {
      for (const k of [...cache.keys()]) if (k.startsWith(`${id}:`)) cache.delete(k);
      if (!panel.hidden && runs.some((r) => r.id === id)) draw(false);
    },
    dispose() { disposed = true; if (chart) chart.destroy(); },
  };
}

