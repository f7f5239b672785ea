// Charts: uPlot (from npm, served by ddpd at /vendor/uplot/) for the run page's
// curves, sized to their container and redrawn on resize; EMA smoothing as
// TensorBoard does it (debiased); and the runs list's loss sparklines (a small SVG
// polyline: a few dozen points need no library).
import { h } from './format.js';

let uplotPromise = null;
// The uPlot class, or a rejected promise with a sentence when it is not installed.
export function loadUPlot() {
  if (!uplotPromise) {
    uplotPromise = import('/vendor/uplot/uPlot.esm.js').then((m) => m.default).catch(() => {
      throw new Error('The chart library (uPlot) is not installed on the server: run scripts/install-deps.sh.');
    });
  }
  return uplotPromise;
}

// TensorBoard's smoothing: an exponential moving average, debiased at the start.
export function ema(values, weight) {
  if (!weight) return values.slice();
  const out = new Array(values.length);
  let last = 0, n = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || !Number.isFinite(v)) { out[i] = null; continue; }
    last = last * weight + (1 - weight) * v;
    n++;
    out[i] = last / (1 - Math.pow(weight, n));
  }
  return out;
}

export const COLORS = ['#2563eb', '#dc2626', '#059669', '#d97706', '#7c3aed'];

// A uPlot in `el`, as wide as `el`. `make(width)` returns uPlot options. Returns
// { plot, setData(data), destroy() }.
export function mountChart(uPlot, el, make, data) {
  el.textContent = '';
  const width = () => Math.max(200, Math.floor(el.getBoundingClientRect().width || 600));
  let plot = new uPlot(make(width()), data, el);
  const ro = new ResizeObserver(() => {
    const w = width();
    if (plot && Math.abs(plot.width - w) > 2) plot.setSize({ width: w, height: plot.height });
  });
  ro.observe(el);
  return {
    get plot() { return plot; },
    setData(d) { plot.setData(d); },
    destroy() { ro.disconnect(); if (plot) plot.destroy(); plot = null; },
  };
}

// An axis's ticks in one format: when one needs scientific notation all get it (with
// the same mantissa digits), else all have the same decimals ("0.0010", "0.0008"
// never beside "8e-4"). For uPlot's axes: values: (u, vs) => ticks(vs).
export function ticks(vs) {
  const xs = vs.filter((v) => v !== null && Number.isFinite(v));
  const nonzero = xs.filter((v) => v !== 0).map(Math.abs);
  if (!nonzero.length) return vs.map((v) => (v === null ? '' : String(v)));
  const sci = Math.min(...nonzero) < 1e-3 || Math.max(...nonzero) >= 1e5;
  let digits = 0; // the most decimals any tick needs, at 3 significant digits
  for (const v of xs) {
    const short = Number(v.toPrecision(3));
    const mantissa = sci ? short.toExponential().split('e')[0] : String(short);
    digits = Math.max(digits, mantissa.includes('.') ? mantissa.split('.')[1].length : 0);
  }
  return vs.map((v) => (v === null ? '' : v === 0 ? '0' : sci ? v.toExponential(digits) : v.toFixed(digits)));
}

// A loss sparkline: `values` in step order; the newest point is marked.
export function sparkline(values, width = 120, height = 28) {
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  svg.setAttribute('class', 'spark');
  const vs = values.filter((v) => v !== null && Number.isFinite(v));
  svg.dataset.points = String(vs.length);
  if (vs.length < 2) return svg;
  let lo = Math.min(...vs), hi = Math.max(...vs);
  if (hi === lo) { hi += 1; lo -= 1; }
  const pts = vs.map((v, i) => [(i / (vs.length - 1)) * (width - 4) + 2, height - 2 - ((v - lo) / (hi - lo)) * (height - 4)]);
  const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
  line.setAttribute('points', pts.map((p) => p.map((x) => x.toFixed(1)).join(',')).join(' '));
  line.setAttribute('fill', 'none');
  line.setAttribute('stroke', COLORS[0]);
  line.setAttribute('stroke-width', '1.5');
  svg.append(line);
  const dot = document.createElementNS('http://www.w3.org/2000/svg', 'circle');
  const [x, y] = pts[pts.length - 1];
  dot.setAttribute('cx', x); dot.setAttribute('cy', y); dot.setAttribute('r', '2.2');
  dot.setAttribute('fill', COLORS[0]);
  svg.append(dot);
  return svg;
}

export function chartMessage(el, text) {
  el.textContent = '';
  el.append(h('p', { class: 'chart-empty' }, text));
}
