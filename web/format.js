// Small formatting and DOM helpers the pages share: numbers, durations, times,
// status badges, and `h`, a tiny element builder.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const LIVE = new Set(['queued', 'starting', 'running', 'canceling']);
export const FINISHED = new Set(['succeeded', 'failed', 'canceled', 'stopped', 'timeout']); // stopped: a sweep's trial its searcher stopped; timeout: its max_duration_s

export function badge(status) {
  return h('span', { class: `badge badge-${status}`, 'data-status': status }, status);
}

export function num(v, digits = 4) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  if (v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e6)) return v.toExponential(2);
  return Number(v.toPrecision(digits)).toString();
}

// Epochs are numbered from 0, as the API numbers them; the count follows:
// "epoch 5 (6 of 10)" (a finished run's progress may point one past the last).
export function epochText(epoch, epochs) {
  if (epoch === null || epoch === undefined) return epochs ? `epoch — (of ${epochs})` : 'epoch —';
  const e = epochs ? Math.min(Math.max(epoch, 0), epochs - 1) : Math.max(epoch, 0);
  return epochs ? `epoch ${e} (${e + 1} of ${epochs})` : `epoch ${e}`;
}

// One format for a whole column, so that its numbers read alike: fixed with the same
// decimals (enough for `digits` significant ones in the smallest), or, when some are
// tiny or huge, all in scientific notation with the same mantissa. Returns v -> text.
export function columnFormat(values, digits = 4) {
  const xs = values.filter((v) => typeof v === 'number' && Number.isFinite(v));
  const nonzero = xs.filter((v) => v !== 0).map(Math.abs);
  if (!nonzero.length) return (v) => (typeof v === 'number' && Number.isFinite(v) ? String(v) : '—');
  const lo = Math.min(...nonzero), hi = Math.max(...nonzero);
  if (lo < 1e-3 || hi >= 1e6) return (v) => (typeof v === 'number' && Number.isFinite(v) ? v.toExponential(digits - 1) : '—');
  const decimals = Math.min(8, Math.max(0, digits - 1 - Math.floor(Math.log10(lo))));
  return (v) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(decimals) : '—');
}

export function bytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : 1)} ${units[i]}`;
}

export function int(v) {
  if (v === null || v === undefined) return '—';
  return Math.round(v).toLocaleString('en-US');
}

export function pct(v) {
  if (v === null || v === undefined) return '—';
  return `${(v * 100).toFixed(1)}%`;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60), r = s % 60;
  if (m < 60) return `${m}m ${String(r).padStart(2, '0')}s`;
  const hr = Math.floor(m / 60);
  return `${hr}h ${String(m % 60).padStart(2, '0')}m`;
}

export function ago(iso) {
  if (!iso) return '—';
  const s = (Date.now() - Date.parse(iso)) / 1000;
  if (s < 5) return 'just now';
  if (s < 60) return `${Math.round(s)}s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

// How long a run took, or has taken so far.
// Every attempt's time: since its newest start, plus what the attempts before that start
// took (GET /runs/{id}'s earlier_attempts_s; a list's row has the newest start's alone).
export function runDuration(run) {
  if (!run.started_at) return null;
  const end = run.finished_at ? Date.parse(run.finished_at) : Date.now();
  return (end - Date.parse(run.started_at)) / 1000 + (run.earlier_attempts_s || 0);
}

export function devices(run) {
  if (run.devices && run.devices.length) return run.devices.join(', ');
  return `${run.world_size} × ${run.device_kind}`;
}
