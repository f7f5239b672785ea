// A run's page (#/runs/{id}): status (and a failed run's reason), progress, cancel;
// the loss curve (uPlot; log scale, EMA smoothing, x by step or epoch; fetched
// downsampled with max_points, so a million-step run loads as fast as a short one);
// the per-epoch LR (stepped, so a step decay shows), test loss and accuracy per
// epoch; the rank grid (stragglers and silent ranks marked); the log tail; the
// config. Kept live by /runs/{id}/events.
import { ApiError, get, post } from './api.js';
import { chartMessage, COLORS, ema, loadUPlot, mountChart, tick } from './charts.js';
import { ago, badge, devices, duration, FINISHED, h, int, LIVE, num, pct, runDuration } from './format.js';
import { subscribe } from './live.js';
import { rankMarks } from './ranks.js';

const MAX_POINTS = 2000; // what the loss chart fetches: about its width in pixels, twice
const LOG_LINES = 200;

export function mountRun(root, id) {
  let disposed = false;
  let run = null, epochs = [], ranks = [];
  const loss = { steps: [], values: [] };
  const view = { log: false, smoothing: 0.6, x: 'step' };
  let uPlot = null, lossChart = null, lrChart = null, evalChart = null;
  const timers = [];

  // ---- skeleton ----
  const title = h('h1', { id: 'run-title' }, `Run #${id}`);
  const statusSlot = h('span', { id: 'run-status' });
  const cancelBtn = h('button', { class: 'button danger', id: 'cancel-run', hidden: true, onclick: cancel }, 'Cancel run');
  const actionMsg = h('span', { class: 'action-msg', id: 'action-msg' });
  const reasonBox = h('div', { id: 'run-reason', hidden: true });
  const progressBar = h('div', { class: 'bar' });
  const progressEl = h('div', { class: 'progress big', id: 'run-progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100 }, progressBar);
  const progressText = h('div', { class: 'progress-text', id: 'run-progress-text' });
  const facts = h('dl', { class: 'facts', id: 'run-facts' });
  const lossEl = h('div', { class: 'chart', id: 'loss-chart', dataset: { points: '0' } });
  const lrEl = h('div', { class: 'chart small', id: 'lr-chart', dataset: { points: '0' } });
  const evalEl = h('div', { class: 'chart small', id: 'eval-chart', dataset: { points: '0' } });
  const epochsBody = h('tbody');
  const epochsTable = h('table', { class: 'epochs', id: 'epochs-table' },
    h('thead', {}, h('tr', {}, ['Epoch', 'LR', 'Train loss', 'Test loss', 'Test acc', 'Time', 'Samples/s'].map((t) => h('th', {}, t)))), epochsBody);
  const ranksEl = h('div', { class: 'ranks', id: 'ranks' });
  const logEl = h('pre', { class: 'log', id: 'run-log' }, 'Loading…');
  const configEl = h('pre', { class: 'config', id: 'run-config' });

  const logScale = h('input', { type: 'checkbox', id: 'opt-log', onchange: () => { view.log = logScale.checked; drawLoss(true); } });
  const smooth = h('input', { type: 'range', id: 'opt-smooth', min: 0, max: 0.99, step: 0.01, value: view.smoothing,
    oninput: () => { view.smoothing = Number(smooth.value); smoothOut.textContent = smooth.value; drawLoss(false); } });
  const smoothOut = h('output', {}, String(view.smoothing));
  const xAxis = h('select', { id: 'opt-x', onchange: () => { view.x = xAxis.value; drawLoss(true); } },
    h('option', { value: 'step' }, 'step'), h('option', { value: 'epoch' }, 'epoch'));

  const card = (heading, ...body) => h('section', { class: 'card' }, h('h2', {}, heading), ...body);
  root.append(
    h('p', {}, h('a', { href: '#/' }, '← Runs')),
    h('div', { class: 'page-head' }, h('div', { class: 'title-line' }, title, statusSlot), h('div', { class: 'actions' }, actionMsg, cancelBtn)),
    reasonBox,
    h('section', { class: 'card' }, progressEl, progressText, facts),
    card('Loss',
      h('div', { class: 'controls' },
        h('label', {}, logScale, ' log scale'),
        h('label', {}, 'smoothing ', smooth, ' ', smoothOut),
        h('label', {}, 'x axis ', xAxis)),
      lossEl),
    h('div', { class: 'two' },
      card('Learning rate per epoch', lrEl),
      card('Test loss and accuracy per epoch', evalEl)),
    card('Epochs', h('div', { class: 'scroll-x' }, epochsTable)),
    card('Ranks', ranksEl),
    card('Log', logEl),
    card('Config', h('p', {}, h('a', { href: '#/submit', onclick: resubmit }, 'Edit and submit as a new run')), configEl));

  // ---- the run ----
  function stepsPerEpoch() {
    const p = run && run.progress;
    if (p && p.total_steps && p.epochs) return p.total_steps / p.epochs;
    return null;
  }

  function renderRun() {
    if (!run) return;
    title.textContent = `#${run.id} ${run.name || ''}`;
    document.title = `#${run.id} ${run.name || ''} · ddpd`;
    statusSlot.replaceChildren(badge(run.status));
    cancelBtn.hidden = !LIVE.has(run.status) || run.status === 'canceling';
    if (run.reason && run.status !== 'succeeded') {
      reasonBox.hidden = false;
      reasonBox.className = run.status === 'failed' ? 'error-box' : 'note-box';
      reasonBox.replaceChildren(h('strong', {}, run.status === 'failed' ? 'Failed: ' : run.status === 'canceled' ? 'Canceled: ' : 'Note: '), run.reason);
    } else reasonBox.hidden = true;
    const p = run.progress || {};
    const fraction = p.fraction ?? (run.status === 'succeeded' ? 1 : 0);
    progressBar.style.width = `${(fraction * 100).toFixed(1)}%`;
    progressBar.className = `bar bar-${run.status}`;
    progressEl.setAttribute('aria-valuenow', Math.round(fraction * 100));
    progressEl.dataset.fraction = String(fraction);
    const spe = stepsPerEpoch();
    const parts = [];
    if (p.epochs) parts.push(`epoch ${Math.min((p.epoch ?? 0) + 1, p.epochs)} of ${p.epochs}`);
    if (spe && p.step !== null && p.step !== undefined) parts.push(`step ${int(p.step + 1)} of ${int(spe)}`);
    if (p.total_steps) parts.push(`${int(p.global_step ?? 0)} / ${int(p.total_steps)} steps`);
    parts.push(`${Math.round(fraction * 100)}%`);
    progressText.textContent = run.status === 'queued' ? `Queued${run.queue_position ? `: position ${run.queue_position}` : ''}, waiting for devices` : parts.join(' · ');
    const fact = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
    facts.replaceChildren(
      ...fact('Loss', num(p.loss)), ...fact('LR', num(p.lr, 3)), ...fact('Samples/s', int(p.samples_per_s)),
      ...fact('ETA', LIVE.has(run.status) ? duration(p.eta_s) : '—'), ...fact('Devices', devices(run)),
      ...fact('Submitted', h('span', { title: run.created_at || '' }, ago(run.created_at))),
      ...fact('Duration', h('span', { class: 'duration' }, duration(runDuration(run)))),
      ...fact('Exit', run.exit_signal ? `signal ${run.exit_signal}` : run.exit_code ?? '—'));
    configEl.textContent = JSON.stringify(run.config, null, 2);
  }

  async function loadRun() {
    try {
      run = await get(`/runs/${id}`);
      if (disposed) return;
      renderRun();
      if (!loss.steps.length) drawLoss(false); // its empty-chart sentence depends on the status
    } catch (e) {
      if (disposed) return;
      if (e instanceof ApiError && e.status === 404) {
        root.replaceChildren(h('div', { class: 'empty', id: 'run-missing' }, h('h2', {}, `There is no run ${id}`),
          h('p', {}, 'It may have been deleted.'), h('a', { class: 'button', href: '#/' }, 'All runs')));
        dispose();
      } else {
        reasonBox.hidden = false;
        reasonBox.className = 'error-box';
        reasonBox.textContent = e.message;
      }
    }
  }

  async function cancel() {
    if (!window.confirm(`Cancel run #${id}? Its trainer is stopped; its checkpoints stay.`)) return;
    cancelBtn.disabled = true;
    actionMsg.textContent = 'Canceling…';
    try {
      run = await post(`/runs/${id}/cancel`);
      actionMsg.textContent = '';
      renderRun();
    } catch (e) {
      actionMsg.textContent = e.message;
      actionMsg.className = 'action-msg error';
    } finally {
      cancelBtn.disabled = false;
    }
  }

  function resubmit() {
    try { sessionStorage.setItem('ddpd.resubmit', JSON.stringify(run.config, null, 2)); } catch { /* no storage */ }
  }

  // ---- loss curve ----
  let lossDirty = false, lossLoading = null, lossAgain = false;
  // One fetch at a time; a call during one fetches again after it (the run moved on).
  function loadLoss() {
    if (lossLoading) { lossAgain = true; return lossLoading; }
    lossLoading = (async () => {
      try {
        const m = await get(`/runs/${id}/metrics?key=loss&max_points=${MAX_POINTS}`);
        if (disposed) return;
        loss.steps = m.points.map((pt) => pt[0]);
        loss.values = m.points.map((pt) => pt[1]);
        lossEl.dataset.downsampled = String(m.downsampled);
        drawLoss(!lossChart);
      } catch (e) {
        if (!disposed && !loss.steps.length) chartMessage(lossEl, e.message);
      } finally {
        lossLoading = null;
        if (lossAgain && !disposed) { lossAgain = false; loadLoss(); }
      }
    })();
    return lossLoading;
  }

  function lossData() {
    const spe = stepsPerEpoch();
    const xs = view.x === 'epoch' && spe ? loss.steps.map((s) => s / spe) : loss.steps;
    return [xs, loss.values, ema(loss.values, view.smoothing)];
  }

  function drawLoss(rebuild) {
    lossEl.dataset.points = String(loss.steps.length);
    if (!uPlot) return;
    if (!loss.steps.length) {
      if (lossChart) { lossChart.destroy(); lossChart = null; }
      chartMessage(lossEl, run && LIVE.has(run.status) ? 'No steps yet: the curve starts with the first one.' : 'This run has no steps.');
      return;
    }
    if (lossChart && !rebuild) { lossChart.setData(lossData()); return; }
    if (lossChart) lossChart.destroy();
    const byEpoch = view.x === 'epoch' && stepsPerEpoch();
    lossChart = mountChart(uPlot, lossEl, (width) => ({
      width, height: 300,
      scales: { x: { time: false }, y: view.log ? { distr: 3, log: 10 } : {} },
      series: [
        { label: byEpoch ? 'epoch' : 'step', value: (u, v) => (v === null ? '' : byEpoch ? v.toFixed(2) : int(v)) },
        { label: 'loss', stroke: view.smoothing > 0 ? 'rgba(37,99,235,0.28)' : COLORS[0], width: 1, value: (u, v) => num(v) },
        { label: `EMA ${view.smoothing}`, stroke: COLORS[0], width: 2, show: view.smoothing > 0, value: (u, v) => num(v) },
      ],
      axes: [{ label: byEpoch ? 'epoch' : 'step' }, { values: (u, vs) => vs.map(tick), size: 60 }],
      legend: { live: true },
    }), lossData());
  }

  function appendStep(d) {
    if (d.loss === null || d.global_step === null) return;
    const last = loss.steps.length ? loss.steps[loss.steps.length - 1] : -1;
    if (d.global_step <= last) return;
    loss.steps.push(d.global_step);
    loss.values.push(d.loss);
    if (loss.steps.length > 2 * MAX_POINTS) { loadLoss(); return; } // downsample again
    if (!lossDirty) {
      lossDirty = true;
      setTimeout(() => { lossDirty = false; if (!disposed) drawLoss(!lossChart); }, 250);
    }
  }

  // ---- epochs: LR, test loss and accuracy ----
  async function loadEpochs() {
    try {
      const r = await get(`/runs/${id}/epochs`);
      if (disposed) return;
      epochs = r.epochs;
      renderEpochs();
    } catch { /* stays as it was */ }
  }

  function renderEpochs() {
    epochsBody.replaceChildren(...epochs.map((e) => h('tr', {},
      h('td', {}, e.epoch), h('td', { class: 'lr' }, num(e.lr, 3)), h('td', {}, num(e.train_loss)), h('td', {}, num(e.test_loss)),
      h('td', {}, pct(e.test_acc)), h('td', {}, e.seconds === null ? '—' : `${num(e.seconds, 3)} s`), h('td', {}, int(e.samples_per_s)))));
    if (!epochs.length) epochsBody.append(h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No epoch has finished yet.')));
    lrEl.dataset.points = String(epochs.length);
    lrEl.dataset.distinctLr = String(new Set(epochs.map((e) => e.lr)).size);
    evalEl.dataset.points = String(epochs.length);
    if (!uPlot) return;
    if (!epochs.length) {
      if (lrChart) { lrChart.destroy(); lrChart = null; }
      if (evalChart) { evalChart.destroy(); evalChart = null; }
      chartMessage(lrEl, 'Appears when the first epoch ends.');
      chartMessage(evalEl, 'Appears when the first epoch ends.');
      return;
    }
    const xs = epochs.map((e) => e.epoch);
    // The LR an epoch ran at holds until the next epoch: drawn as steps, with one
    // more point so the last epoch has its width.
    const lrX = [...xs, xs[xs.length - 1] + 1], lrY = [...epochs.map((e) => e.lr), epochs[epochs.length - 1].lr];
    if (lrChart) lrChart.setData([lrX, lrY]);
    else lrChart = mountChart(uPlot, lrEl, (width) => ({
      width, height: 200,
      scales: { x: { time: false } },
      series: [{ label: 'epoch' }, { label: 'lr', stroke: COLORS[3], width: 2, paths: uPlot.paths.stepped({ align: 1 }), points: { show: true }, value: (u, v) => num(v, 3) }],
      axes: [{ label: 'epoch', incrs: [1, 2, 5, 10, 20, 50, 100] }, { values: (u, vs) => vs.map(tick), size: 60 }],
    }), [lrX, lrY]);
    const evalData = [xs, epochs.map((e) => e.test_loss), epochs.map((e) => e.train_loss), epochs.map((e) => (e.test_acc === null ? null : e.test_acc * 100))];
    if (evalChart) evalChart.setData(evalData);
    else evalChart = mountChart(uPlot, evalEl, (width) => ({
      width, height: 200,
      scales: { x: { time: false }, acc: { range: (u, lo, hi) => [Math.max(0, Math.floor(lo - 2)), Math.min(100, Math.ceil(hi + 2))] } },
      series: [{ label: 'epoch' },
        { label: 'test loss', stroke: COLORS[1], width: 2, points: { show: true }, value: (u, v) => num(v) },
        { label: 'train loss', stroke: COLORS[0], width: 1, dash: [4, 4], value: (u, v) => num(v) },
        { label: 'test acc %', stroke: COLORS[2], width: 2, scale: 'acc', points: { show: true }, value: (u, v) => (v === null ? '' : `${v.toFixed(1)}%`) }],
      axes: [{ label: 'epoch', incrs: [1, 2, 5, 10, 20, 50, 100] }, { values: (u, vs) => vs.map(tick), size: 50 },
        { scale: 'acc', side: 1, grid: { show: false }, values: (u, vs) => vs.map((v) => `${v}%`), size: 50 }],
    }), evalData);
  }

  // ---- ranks ----
  async function loadRanks() {
    try {
      const r = await get(`/runs/${id}/ranks`);
      if (disposed) return;
      ranks = r.ranks;
      renderRanks();
    } catch { /* stays */ }
  }

  function rankFor(n) {
    let r = ranks.find((x) => x.rank === n);
    if (!r) { r = { rank: n }; ranks.push(r); ranks.sort((a, b) => a.rank - b.rank); }
    return r;
  }

  function renderRanks() {
    if (!ranks.length) {
      ranksEl.replaceChildren(h('p', { class: 'muted' }, run && run.status === 'queued' ? 'The ranks start when devices are free.' : 'No rank has reported yet.'));
      return;
    }
    const live = run && LIVE.has(run.status);
    const marks = rankMarks(ranks, live, Date.now());
    ranksEl.replaceChildren(...ranks.map((r) => {
      const m = marks.get(r.rank) || [];
      const device = (run && run.devices && run.devices[r.rank]) || r.device || '—';
      // A run that ended without the rank saying so (canceled, a peer died): it stopped where it was.
      const stopped = run && FINISHED.has(run.status) && !['done', 'failed'].includes(r.state);
      const state = stopped ? 'stopped' : r.state;
      return h('div', { class: `rank ${m.join(' ')}`, 'data-rank': r.rank, 'data-state': state || '' },
        h('div', { class: 'rank-head' }, h('strong', {}, `rank ${r.rank}`), h('span', { class: `state state-${state}` }, state || '—')),
        stopped && r.state ? h('div', { class: 'muted' }, `last said: ${r.state}`) : null,
        h('div', { class: 'rank-device' }, device, r.device && r.device !== device ? ` (${r.device})` : ''),
        h('div', {}, `step ${int(r.global_step)}`),
        h('div', {}, `step time ${r.step_ms ? `${num(r.step_ms, 3)} ms` : '—'}`),
        h('div', { class: 'muted' }, `seen ${ago(r.last_seen)}`),
        m.length ? h('div', { class: 'rank-marks' }, m.map((k) => h('span', { class: `mark mark-${k}` }, k))) : null,
        r.detail ? h('div', { class: 'muted rank-detail', title: r.detail }, r.detail) : null);
    }));
  }

  // ---- log ----
  async function loadLog() {
    try {
      const text = await get(`/runs/${id}/logs?tail=${LOG_LINES}`);
      if (disposed) return;
      const atBottom = logEl.scrollTop + logEl.clientHeight >= logEl.scrollHeight - 8;
      logEl.textContent = text || '(the log is empty)';
      if (atBottom) logEl.scrollTop = logEl.scrollHeight;
    } catch (e) {
      if (!disposed) logEl.textContent = e.message;
    }
  }

  // ---- live ----
  const close = subscribe(`/runs/${id}/events`, {
    ready: () => { loadRun(); loadLoss(); loadEpochs(); loadRanks(); loadLog(); },
    run: (d) => {
      if (run) { run.status = d.status; if (d.reason !== undefined) run.reason = d.reason; renderRun(); }
      loadRun();
      if (FINISHED.has(d.status)) { loadLoss(); loadEpochs(); loadRanks(); loadLog(); } // the whole story, at the end
    },
    step: (d) => {
      if (!run || FINISHED.has(run.status)) return;
      run.progress = { ...run.progress, ...d };
      renderRun();
      appendStep(d);
    },
    epoch: (d) => {
      const i = epochs.findIndex((e) => e.epoch === d.epoch);
      const e = { epoch: d.epoch, lr: d.lr, train_loss: d.train_loss, test_loss: d.test_loss, test_acc: d.test_acc, seconds: d.seconds, samples_per_s: d.samples_per_s };
      if (i >= 0) epochs[i] = e; else { epochs.push(e); epochs.sort((a, b) => a.epoch - b.epoch); }
      renderEpochs();
    },
    rank: (d) => {
      const r = rankFor(d.rank);
      r.state = d.state;
      if (d.detail !== undefined) r.detail = d.detail;
      if (d.device) r.device = d.device;
      r.last_seen = new Date(d.t).toISOString();
      renderRanks();
    },
    heartbeat: (d) => {
      const r = rankFor(d.rank);
      r.global_step = d.global_step;
      r.step_ms = d.step_ms;
      r.last_seen = new Date(d.t).toISOString();
      renderRanks();
    },
    deleted: () => { reasonBox.hidden = false; reasonBox.className = 'note-box'; reasonBox.textContent = 'This run was deleted.'; },
  });

  timers.push(setInterval(() => { if (run && LIVE.has(run.status)) loadLog(); }, 2000));
  timers.push(setInterval(() => {
    if (!run || !LIVE.has(run.status)) return;
    const d = root.querySelector('.duration');
    if (d) d.textContent = duration(runDuration(run));
    renderRanks(); // "seen … ago", silent ranks
  }, 1000));

  loadUPlot().then((u) => { uPlot = u; if (!disposed) { drawLoss(true); renderEpochs(); } })
    .catch((e) => { for (const el of [lossEl, lrEl, evalEl]) chartMessage(el, e.message); });
  loadRun(); loadLoss(); loadEpochs(); loadRanks(); loadLog();

  function dispose() {
    if (disposed) return;
    disposed = true;
    close();
    timers.forEach(clearInterval);
    for (const c of [lossChart, lrChart, evalChart]) if (c) c.destroy();
  }
  return dispose;
}
