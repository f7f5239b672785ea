// A command run's own series: one small chart per metric key the script reported
// beyond loss and lr (from the `keys` that every /runs/{id}/metrics answer lists;
// samples_per_s only once it has a value). Kept live: refresh() asks each series for
// the points after the last one it has (?after=), one round at a time; a series grown
// past twice what a chart draws is fetched again, downsampled (?max_points=). The page
// calls poke() on step events and every 2 s while the run is live. While a restart does
// steps again (redo(true), from the page), each round fetches every series whole: the
// points it reports again replace the earlier attempt's (one point per step), so no
// stale point stays drawn. The charts mark where restarts began (attempt markers).
import { get } from './api.js';
import { attemptMarkersPlugin } from './attempts_view.js';
import { chartMessage, COLORS, loadUPlot, mountChart, ticks } from './charts.js';
import { h, int, num } from './format.js';

const MAX_POINTS = 1000; // a small chart is about 500 px wide
const ON_THE_LOSS_CHARTS = new Set(['loss', 'lr']);
const ALWAYS_LISTED = 'samples_per_s'; // asked for whether listed or not (a command run's keys list it once it has a value): the first request

export function seriesCharts(id, marks = () => []) {
  const grid = h('div', { class: 'series-grid', id: 'series-charts', dataset: { keys: '' } });
  const card = h('section', { class: 'card', id: 'series-card', hidden: true }, h('h2', {}, 'Reported series'), grid);
  const series = new Map(); // key -> { steps, values, el, chart, full }
  let uPlot = null, disposed = false, loading = null, again = false, timer = null, redoing = false;

  function learn(keys) {
    for (const key of keys) {
      if (ON_THE_LOSS_CHARTS.has(key) || series.has(key)) continue;
      series.set(key, { steps: [], values: [], el: null, chart: null, full: true });
    }
  }

  function shown(key, s) {
    return key !== ALWAYS_LISTED || s.values.some((v) => v !== null && Number.isFinite(v));
  }

  async function fetchOne(key, s) {
    const last = s.steps.length ? s.steps[s.steps.length - 1] : null;
    const whole = s.full || redoing || last === null;
    const m = await get(`/runs/${id}/metrics?key=${encodeURIComponent(key)}&max_points=${MAX_POINTS}${whole ? '' : `&after=${last}`}`);
    if (disposed) return;
    learn(m.keys || []);
    const steps = m.points.map((p) => p[0]), values = m.points.map((p) => p[1]);
    if (whole) { s.steps = steps; s.values = values; } else { s.steps.push(...steps); s.values.push(...values); }
    s.full = s.steps.length > 2 * MAX_POINTS; // downsample again next time
    if (s.el) s.el.dataset.downsampled = String(m.downsampled || s.steps.length > MAX_POINTS);
  }

  // One round at a time; a call during one makes another after it.
  function refresh() {
    if (loading) { again = true; return loading; }
    loading = (async () => {
      try {
        if (!series.size) learn([ALWAYS_LISTED]);
        for (const [key, s] of [...series]) await fetchOne(key, s);
        // keys heard of in this round (a script may start a series late): their first points now
        for (const [key, s] of [...series]) if (!s.steps.length && s.full) await fetchOne(key, s);
        if (!disposed) draw();
      } catch { /* the charts stay as they were; the next round tries again */ } finally {
        loading = null;
        if (again && !disposed) { again = false; refresh(); }
      }
    })();
    return loading;
  }

  // A step was reported: refresh, at most once a second.
  function poke() {
    if (timer || disposed) return;
    timer = setTimeout(() => { timer = null; if (!disposed) refresh(); }, 1000);
  }

  function draw() {
    const keys = [...series.keys()].filter((k) => shown(k, series.get(k)));
    grid.dataset.keys = keys.join(' ');
    card.hidden = !keys.length;
    keys.forEach((key, i) => {
      const s = series.get(key);
      if (!s.el) {
        s.el = h('div', { class: 'chart small series-chart', dataset: { seriesKey: key, points: '0' } });
        grid.append(h('figure', { class: 'series' }, h('figcaption', {}, h('code', {}, key)), s.el));
      }
      s.el.dataset.points = String(s.steps.length);
      s.el.dataset.last = s.values.length ? String(s.values[s.values.length - 1]) : '';
      s.el.dataset.attemptMarks = marks().map((m) => m.step).join(' ');
      if (!uPlot) return;
      if (!s.steps.length) { chartMessage(s.el, 'No points yet.'); return; }
      const data = [s.steps, s.values];
      if (s.chart) { s.chart.setData(data); return; }
      s.chart = mountChart(uPlot, s.el, (width) => ({
        width, height: 160,
        scales: { x: { time: false } },
        series: [{ label: 'step', value: (u, v) => (v === null ? '' : int(v)) },
          { label: key, stroke: COLORS[(i + 2) % COLORS.length], width: 1.5, value: (u, v) => num(v) }],
        axes: [{ label: 'step' }, { values: (u, vs) => ticks(vs), size: 60 }],
        legend: { live: true },
        plugins: [attemptMarkersPlugin(marks)],
      }), data);
    });
  }

  loadUPlot().then((u) => { uPlot = u; if (!disposed) draw(); })
    .catch((e) => { for (const s of series.values()) if (s.el) chartMessage(s.el, e.message); });

  return {
    card, refresh, poke,
    // a restart is doing steps again (true), or has passed the last one done before (false)
    redo(on) { redoing = on; refresh(); },
    redrawMarks() { draw(); for (const s of series.values()) if (s.chart) s.chart.plot.redraw(false, false); },
    dispose() {
      disposed = true;
      clearTimeout(timer);
      for (const s of series.values()) if (s.chart) s.chart.destroy();
    },
  };
}
