// A sweep's metric against one of its parameters: one point per trial that has a
// value of the metric (uPlot, points without lines), the best trial's point ringed,
// the x axis logarithmic where the parameter is searched on a log scale (its spec's
// "log": true). A parameter of listed values that are not numbers is drawn at the
// values' places in the list, named on the axis.
import { chartMessage, mountChart, ticks } from './charts.js';
import { h, num } from './format.js';

// The points of `path` for the trials with a metric: { xs, ys, labels }, by x.
export function scatterPoints(trials, path, spec) {
  const listed = spec && Array.isArray(spec.values) ? spec.values : null;
  const numeric = !listed || listed.every((v) => typeof v === 'number');
  const pts = trials.filter((t) => t.metric !== null && t.metric !== undefined && t.params && path in t.params)
    .map((t) => ({ x: numeric ? Number(t.params[path]) : listed.findIndex((v) => JSON.stringify(v) === JSON.stringify(t.params[path])),
      y: t.metric, trial: t.trial }))
    .filter((p) => Number.isFinite(p.x))
    .sort((a, b) => a.x - b.x);
  return { pts, labels: numeric ? null : listed.map((v) => String(v)) };
}

// A card in `root` for `path`; returns { update(trials, bestTrial), destroy() }.
export function mountScatter(root, uPlot, index, path, spec, metric) {
  const log = Boolean(spec && spec.log);
  const chartEl = h('div', { class: 'chart scatter', id: `sweep-scatter-${index}`, dataset: { param: path, points: '0', log: String(log) } });
  const card = h('section', { class: 'card scatter-card' },
    h('h3', {}, `${metric.key} against ${path}`, log ? h('span', { class: 'muted small' }, ' (log scale)') : ''), chartEl);
  root.append(card);
  let chart = null;

  function update(trials, bestTrial) {
    const { pts, labels } = scatterPoints(trials, path, spec);
    chartEl.dataset.points = String(pts.length);
    if (!pts.length) {
      if (chart) { chart.destroy(); chart = null; }
      chartMessage(chartEl, 'No trial has reached the metric yet.');
      return;
    }
    const data = [pts.map((p) => p.x), pts.map((p) => p.y), pts.map((p) => (p.trial === bestTrial ? p.y : null))];
    if (chart) chart.destroy();
    chart = mountChart(uPlot, chartEl, (width) => ({
      width, height: 220,
      scales: { x: log ? { time: false, distr: 3, log: 10, range: (u, lo, hi) => [lo / 1.5, hi * 1.5] }
        : { time: false, range: (u, lo, hi) => { const pad = (hi - lo || Math.abs(hi) || 1) * 0.08; return [lo - pad, hi + pad]; } } },
      series: [
        { label: path, value: (u, v) => (v === null ? '' : labels ? labels[v] ?? '' : num(v)) },
        { label: metric.key, stroke: '#2563eb', paths: () => null, points: { show: true, size: 8, fill: '#2563eb' }, value: (u, v) => (v === null ? '' : num(v)) },
        { label: 'best', stroke: '#dc2626', paths: () => null, points: { show: true, size: 14, width: 2, fill: 'transparent' }, value: (u, v) => (v === null ? '' : num(v)) },
      ],
      axes: [
        { label: path, values: (u, vs) => (labels ? vs.map((v) => (Number.isInteger(v) ? labels[v] ?? '' : '')) : ticks(vs)) },
        { label: metric.key, values: (u, vs) => ticks(vs), size: 60 },
      ],
      legend: { show: false },
    }), data);
  }

  return { update, destroy() { if (chart) chart.destroy(); card.remove(); } };
}
