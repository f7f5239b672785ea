// A run's page (#/runs/{id}): status (and a failed run's reason), its best and final
// test metrics, progress, cancel; the loss curve (uPlot; log scale, EMA smoothing, x
// by step or epoch; fetched downsampled with max_points, so a million-step run loads
// as fast as a short one); the per-epoch LR (stepped, so a step decay shows; a log
// axis on request, where later decays would look like 0), test loss and accuracy
// per epoch; the epochs table (each column's numbers formatted alike); the
// checkpoint files on disk; the rank grid (stragglers and silent ranks marked); the
// log, followed from where it was (log_panel.js); the config. A command run (the
// user's own script) shows its command (command_view.js), a chart per series it
// reported (series_charts.js) and a log per rank, and none of the built-in model's
// test summary or checkpoints. A run with restarts lists its attempts and its charts
// mark where each restart began (attempts_view.js); an elastic run its ranks now and
// its changes of size (sizes_view.js); the steps a restart does again
// replace the earlier attempt's points. Kept live by /runs/{id}/events.
import { ApiError, get, post, revalidate } from './api.js';
import { chartMessage, COLORS, ema, loadUPlot, mountChart, ticks } from './charts.js';
import { ago, badge, bytes, columnFormat, devices, duration, epochText, FINISHED, h, int, LIVE, num, pct, runDuration } from './format.js';
import { subscribe } from './live.js';
import { addSample, rankMarks } from './ranks.js';
import { commandFacts, isCommandRun } from './command_view.js';
import { logPanel } from './log_panel.js';
import { seriesCharts } from './series_charts.js';
import { attemptMarkersPlugin, attemptMarks, attemptsCard } from './attempts_view.js';
import { timelineStrip } from './timeline_strip.js';
import { sizesFacts } from './sizes_view.js';

const MAX_POINTS = 2000; // what the loss chart fetches: about its width in pixels, twice

export function mountRun(root, id) {
  let disposed = false;
  let run = null, epochs = [], ranks = [], checkpoints = null;
  const loss = { steps: [], values: [] };
  const view = { log: false, smoothing: 0.6, x: 'step', lrLog: false };
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
  const summary = h('dl', { class: 'summary', id: 'run-summary' });
  const lossEl = h('div', { class: 'chart', id: 'loss-chart', dataset: { points: '0' } });
  const lrEl = h('div', { class: 'chart small', id: 'lr-chart', dataset: { points: '0' } });
  const evalEl = h('div', { class: 'chart small', id: 'eval-chart', dataset: { points: '0' } });
  const epochsBody = h('tbody');
  const epochsTable = h('table', { class: 'epochs', id: 'epochs-table' },
    h('thead', {}, h('tr', {}, ['Epoch', 'LR', 'Train loss', 'Test loss', 'Test acc', 'Time (s)', 'Samples/s'].map((t) => h('th', {}, t)))), epochsBody);
  const epochsScroll = h('div', { class: 'scroll-x', id: 'epochs-scroll' }, epochsTable);
  const scrollHint = h('p', { class: 'scroll-hint muted', id: 'epochs-scroll-hint', hidden: true }, 'More columns: scroll the table sideways →');
  const checkpointsEl = h('div', { id: 'checkpoints' }, h('p', { class: 'muted' }, 'Loading…'));
  const ranksEl = h('div', { class: 'ranks', id: 'ranks' });
  const log = logPanel(id);
  const marks = () => attemptMarks(run);
  const series = seriesCharts(id, marks);
  const attempts = attemptsCard(id);
  const timeline = timelineStrip(id);
  let timelineStatus = null;
  const commandCard = h('section', { class: 'card', id: 'command-card', hidden: true }, h('h2', {}, 'Command'));
  let commandShown = false;
  const configEl = h('pre', { class: 'config', id: 'run-config' });

  const logScale = h('input', { type: 'checkbox', id: 'opt-log', onchange: () => { view.log = logScale.checked; drawLoss(true); } });
  const smooth = h('input', { type: 'range', id: 'opt-smooth', min: 0, max: 0.99, step: 0.01, value: view.smoothing,
    oninput: () => { view.smoothing = Number(smooth.value); smoothOut.textContent = smooth.value; drawLoss(false); } });
  const smoothOut = h('output', {}, String(view.smoothing));
  const xAxis = h('select', { id: 'opt-x', onchange: () => { view.x = xAxis.value; drawLoss(true); } },
    h('option', { value: 'step' }, 'step'), h('option', { value: 'epoch' }, 'epoch'));
  const lrLog = h('input', { type: 'checkbox', id: 'opt-lr-log', onchange: () => { view.lrLog = lrLog.checked; renderEpochs(true); } });

  const card = (heading, ...body) => h('section', { class: 'card' }, h('h2', {}, heading), ...body);
  const checkpointsCard = card('Checkpoints', checkpointsEl);
  root.append(
    h('p', {}, h('a', { href: '#/' }, '← Runs')),
    h('div', { class: 'page-head' }, h('div', { class: 'title-line' }, title, statusSlot), h('div', { class: 'actions' }, actionMsg, cancelBtn)),
    reasonBox,
    h('section', { class: 'card' }, summary, progressEl, progressText, facts),
    commandCard,
    timeline.card,
    attempts.card,
    card('Loss',
      h('div', { class: 'controls' },
        h('label', {}, logScale, ' log scale'),
        h('label', {}, 'smoothing ', smooth, ' ', smoothOut),
        h('label', {}, 'x axis ', xAxis)),
      lossEl),
    series.card,
    h('div', { class: 'two' },
      card('Learning rate per epoch', h('div', { class: 'controls' }, h('label', {}, lrLog, ' log scale')), lrEl),
      card('Test loss and accuracy per epoch', evalEl)),
    card('Epochs', scrollHint, epochsScroll),
    checkpointsCard,
    card('Ranks', ranksEl),
    card('Log', log.controls, log.pre),
    card('Config', h('p', {}, h('a', { href: '#/submit', onclick: resubmit }, 'Edit and submit as a new run')), configEl));

  // ---- the run ----
  // "Queued: position 2 · fair_share: behind run 5, ... · expected to start 12:03:10 (in 40 s)"
  function queuedText(r) {
    const p = r.pending;
    const head = `Queued${r.queue_position ? `: position ${r.queue_position}` : ''}`;
    if (!p) return `${head}, waiting for ${r.waiting_for || 'devices'}`;
    const at = p.estimated_start ? Date.parse(p.estimated_start) : null;
    const when = at === null ? `no start estimate: ${p.estimate_basis}`
      : `expected to start ${new Date(at).toLocaleTimeString()} (${at > Date.now() ? `in ${Math.round((at - Date.now()) / 1000)} s` : 'now'})`;
    return `${head} · ${p.reason}: ${p.detail || r.waiting_for || ''} · ${when}`;
  }

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
      reasonBox.replaceChildren(h('strong', {}, run.status === 'failed' ? 'Failed: ' : run.status === 'canceled' ? 'Canceled: ' : run.status === 'stopped' ? 'Stopped: ' : 'Note: '), run.reason);
    } else reasonBox.hidden = true;
    const p = run.progress || {};
    const command = isCommandRun(run);
    // a script that does not say how many steps it has: a step count, no percentage
    const open = command && !p.total_steps && p.fraction === null && LIVE.has(run.status);
    const fraction = p.fraction ?? (run.status === 'succeeded' ? 1 : 0);
    progressBar.style.width = open ? '100%' : `${(fraction * 100).toFixed(1)}%`;
    progressBar.className = `bar bar-${run.status}${open ? ' bar-open' : ''}`;
    if (open) progressEl.removeAttribute('aria-valuenow');
    else progressEl.setAttribute('aria-valuenow', Math.round(fraction * 100));
    progressEl.dataset.fraction = String(fraction);
    const spe = stepsPerEpoch();
    const parts = [];
    if (p.epochs) parts.push(epochText(p.epoch ?? 0, p.epochs));
    else if (command && p.epoch !== null && p.epoch !== undefined) parts.push(epochText(p.epoch));
    if (spe && p.step !== null && p.step !== undefined) parts.push(`step ${int(p.step + 1)} of ${int(spe)}`);
    if (p.total_steps) parts.push(`${int(p.global_step ?? 0)} / ${int(p.total_steps)} steps`);
    else if (command) parts.push(p.global_step ? `${int(p.global_step)} steps reported` : 'no step reported');
    if (!open) parts.push(`${Math.round(fraction * 100)}%`);
    progressText.textContent = run.status === 'queued' ? queuedText(run) : parts.join(' · ');
    const fact = (k, v) => [h('dt', {}, k), h('dd', {}, v)];
    // a command run's samples/s and ETA only when its script gives what they come from
    const sps = !command || (p.samples_per_s !== null && p.samples_per_s !== undefined);
    const eta = !command || Boolean(p.total_steps);
    facts.replaceChildren(
      ...fact('Step loss', num(p.loss)), ...fact('LR', num(p.lr, 3)), ...(sps ? fact('Samples/s', int(p.samples_per_s)) : []),
      ...(eta ? fact('ETA', LIVE.has(run.status) ? duration(p.eta_s) : '—') : []), ...fact('Devices', devices(run)), ...sizesFacts(run),
      ...fact('Owner', run.owner || '—'),
      // a sweep's trial links to its sweep
      ...(run.sweep_id ? fact('Sweep', h('a', { href: `#/sweeps/${run.sweep_id}`, class: 'sweep-link' },
        `sweep #${run.sweep_id}, trial ${run.trial}`)) : []),
      ...fact('Priority', `${run.priority ?? 0}${run.preemptible ? ', preemptible' : ''}`),
      ...(run.preemptions ? fact('Preempted', h('span', { title: run.preempted_at || '' },
        `${run.preemptions}×, last by `, h('a', { href: `#/runs/${run.preempted_by}` }, `#${run.preempted_by}`), ` ${ago(run.preempted_at)}`)) : []),
      ...fact('Submitted', h('span', { title: run.created_at || '' }, ago(run.created_at))),
      ...fact('Duration', h('span', { class: 'duration' }, duration(runDuration(run)))),
      ...fact('Exit', run.exit_signal ? `signal ${run.exit_signal}` : run.exit_code ?? '—'));
    configEl.textContent = JSON.stringify(run.config, null, 2);
    if (command) renderCommand();
    renderAttempts();
    renderCheckpoints();
    renderSummary(); // "Latest" becomes "Final" when the status does, whichever event came first
  }

  // ---- a command run: what it runs, its ranks' logs, its own series ----
  function renderCommand() {
    if (!commandShown) {
      commandShown = true;
      commandCard.hidden = false;
      checkpointsCard.hidden = true; // ddpd writes none for a command run; its script keeps its own
      series.refresh();
    }
    commandCard.replaceChildren(h('h2', {}, 'Command'), commandFacts(run.config));
    log.setRanks(run.world_size || (run.config.distributed && run.config.distributed.world_size) || 1);
  }

  // ---- attempts: the card, and the charts' markers where restarts began ----
  let marksShown = null; // what the charts' markers show now (null: not drawn yet)
  function renderAttempts() {
    attempts.render(run);
    const now = marks().map((m) => `${m.attempt}:${m.step}`).join(' ');
    if (now === marksShown) return;
    marksShown = now;
    lossEl.dataset.attemptMarks = marks().map((m) => m.step).join(' ');
    if (lossChart) lossChart.plot.redraw(false, false);
    series.redrawMarks();
  }

  // ---- the summary: best and final test metrics ----
  function renderSummary() {
    const tested = epochs.filter((e) => e.test_loss !== null || e.test_acc !== null);
    summary.hidden = isCommandRun(run) && !tested.length; // a script need not test at all
    if (!tested.length) {
      summary.replaceChildren(h('div', { class: 'summary-none muted' },
        run && run.status === 'queued' ? 'Test metrics appear when the first epoch ends.' : 'No epoch has been evaluated yet.'));
      summary.dataset.epochs = '0';
      return;
    }
    const last = tested[tested.length - 1];
    const best = (key, better) => tested.filter((e) => e[key] !== null).reduce((a, e) => (!a || better(e[key], a[key]) ? e : a), null);
    const bestAcc = best('test_acc', (x, y) => x > y), bestLoss = best('test_loss', (x, y) => x < y);
    const done = run && FINISHED.has(run.status);
    const item = (label, value, epoch, id) => [h('dt', {}, label),
      h('dd', { id, dataset: { epoch: epoch === undefined ? '' : String(epoch) } }, value,
        epoch === undefined ? null : h('span', { class: 'muted' }, ` epoch ${epoch}`))];
    summary.dataset.epochs = String(tested.length);
    summary.replaceChildren(
      ...item('Best test accuracy', pct(bestAcc && bestAcc.test_acc), bestAcc ? bestAcc.epoch : undefined, 'summary-best-acc'),
      ...item(done ? 'Final test accuracy' : 'Latest test accuracy', pct(last.test_acc), last.epoch, 'summary-final-acc'),
      ...item('Best test loss', num(bestLoss && bestLoss.test_loss), bestLoss ? bestLoss.epoch : undefined, 'summary-best-loss'),
      ...item(done ? 'Final test loss' : 'Latest test loss', num(last.test_loss), last.epoch, 'summary-final-loss'));
  }

  // ---- checkpoints: the files on disk (GET /runs/{id}/checkpoints) ----
  async function loadCheckpoints() {
    try {
      const r = await get(`/runs/${id}/checkpoints`);
      if (disposed) return;
      checkpoints = r.checkpoints;
      renderCheckpoints();
    } catch (e) {
      if (!disposed && !checkpoints) checkpointsEl.replaceChildren(h('p', { class: 'muted' }, e.message));
    }
  }

  function renderCheckpoints() {
    if (!checkpoints) return;
    const reported = (run && run.checkpoints) || [];
    const stepOf = new Map(reported.map((c) => [c.path && c.path.split('/').pop(), c.global_step]));
    const cfg = run && run.config && run.config.checkpoint;
    const rows = checkpoints.map((c) => h('tr', { 'data-file': c.file },
      h('td', { class: 'ckpt-file' }, h('code', { title: c.path }, c.file),
        h('div', { class: 'ckpt-when muted' }, `written ${ago(c.modified_at)}`)), // on a phone, in place of the last column
      h('td', { class: 'num' }, c.epoch ?? '—'),
      h('td', { class: 'num' }, stepOf.has(c.file) ? int(stepOf.get(c.file)) : '—'),
      h('td', { class: 'num' }, bytes(c.bytes)),
      h('td', { class: 'when' }, h('span', { title: c.modified_at }, ago(c.modified_at)))));
    const parts = [];
    if (rows.length) {
      parts.push(h('div', { class: 'scroll-x' }, h('table', { class: 'checkpoints', id: 'checkpoints-table' },
        h('thead', {}, h('tr', {}, ['File', 'Epoch', 'Step', 'Size', 'Written'].map((t) => h('th', { class: t === 'Written' ? 'when' : undefined }, t)))),
        h('tbody', {}, rows))));
    } else {
      parts.push(h('p', { class: 'muted', id: 'checkpoints-none' }, cfg && cfg.every_epochs === 0
        ? 'This run writes no checkpoints (checkpoint.every_epochs is 0).'
        : run && LIVE.has(run.status) ? 'The first checkpoint is written when an epoch ends.' : 'No checkpoint file is in the run\'s directory.'));
    }
    // the run lists only what is on disk (the trainer says which ones checkpoint.keep removed)
    const keeping = Boolean(cfg && cfg.keep && checkpoints.length >= cfg.keep);
    if (keeping) {
      parts.push(h('p', { class: 'muted', id: 'checkpoints-kept' },
        `checkpoint.keep is ${cfg.keep}: the newest ${cfg.keep} stay, older ones are removed as new ones are written.`));
    }
    if (rows.length) {
      parts.push(h('p', { class: 'muted small' }, 'To evaluate one, submit a run with ', h('code', {}, '"mode": "eval"'),
        ' and ', h('code', {}, `"checkpoint": {"load": "${id}/checkpoints/${checkpoints[checkpoints.length - 1].file}"}`), '.'));
    }
    checkpointsEl.dataset.files = String(checkpoints.length);
    checkpointsEl.dataset.kept = String(keeping);
    checkpointsEl.replaceChildren(...parts);
  }

  // The run, revalidated with its ETag: true when it changed since the page read it
  // (a 304 keeps what the page has, the live events' changes included).
  async function loadRun() {
    try {
      const r = await revalidate(`/runs/${id}`);
      if (disposed) return false;
      if (!r.changed && run) return false;
      run = r.value;
      renderRun();
      if (run.status !== timelineStatus || (run.pending && run.pending.reason) !== timeline.reason) {
        timelineStatus = run.status; // a new phase: the timeline read again
        timeline.reason = run.pending && run.pending.reason;
        timeline.refresh(run);
      }
      if (!loss.steps.length) drawLoss(false); // its empty-chart sentence depends on the status
      return true;
    } catch (e) {
      if (disposed) return false;
      if (e instanceof ApiError && e.status === 404) {
        root.replaceChildren(h('div', { class: 'empty', id: 'run-missing' }, h('h2', {}, `There is no run ${id}`),
          h('p', {}, 'It may have been deleted.'), h('a', { class: 'button', href: '#/' }, 'All runs')));
        dispose();
      } else {
        reasonBox.hidden = false;
        reasonBox.className = 'error-box';
        reasonBox.textContent = e.message;
      }
      return true;
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
    lossEl.dataset.last = loss.values.length ? String(loss.values[loss.values.length - 1]) : '';
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
      axes: [{ label: byEpoch ? 'epoch' : 'step' }, { values: (u, vs) => ticks(vs), size: 60 }],
      legend: { live: true },
      plugins: [attemptMarkersPlugin(marks, (step) => (byEpoch ? step / byEpoch : step))],
    }), lossData());
  }

  // A restart does steps again from its script's snapshot (or the run's checkpoint):
  // until it passes `redoUntil` (the last step before it began), the points it reports
  // replace theirs; the chart and the series are fetched again (the feed keeps only the
  // newest step: one it skipped must not stay drawn as it was), once more after.
  let redoUntil = null;
  function redoing(d) {
    if (redoUntil === null) return false;
    if (d.global_step > redoUntil) { redoUntil = null; loadLoss(); if (commandShown) series.redo(false); return false; }
    const i = loss.steps.indexOf(d.global_step);
    if (i >= 0 && d.loss !== null) loss.values[i] = d.loss;
    loadLoss();
    return true;
  }

  function appendStep(d) {
    if (d.loss === null || d.global_step === null) return;
    if (redoing(d)) return;
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

  function renderEpochs(rebuildLr = false) {
    // each column's numbers in one format: "1.00e-3" and "3.00e-4", never "0.001" above "3.00e-4"
    const f = {
      lr: columnFormat(epochs.map((e) => e.lr), 3), train: columnFormat(epochs.map((e) => e.train_loss), 4),
      test: columnFormat(epochs.map((e) => e.test_loss), 4), secs: columnFormat(epochs.map((e) => e.seconds), 3),
    };
    epochsBody.replaceChildren(...epochs.map((e) => h('tr', {},
      h('td', {}, e.epoch), h('td', { class: 'lr' }, f.lr(e.lr)), h('td', { class: 'train-loss' }, f.train(e.train_loss)),
      h('td', { class: 'test-loss' }, f.test(e.test_loss)), h('td', { class: 'test-acc' }, pct(e.test_acc)),
      h('td', { class: 'seconds' }, f.secs(e.seconds)), h('td', { class: 'sps' }, int(e.samples_per_s)))));
    if (!epochs.length) epochsBody.append(h('tr', {}, h('td', { colspan: 7, class: 'muted empty-row' }, 'No epoch has finished yet.')));
    renderSummary();
    markScroll();
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
    lrEl.dataset.log = String(view.lrLog);
    if (lrChart && rebuildLr) { lrChart.destroy(); lrChart = null; }
    if (lrChart) lrChart.setData([lrX, lrY]);
    else lrChart = mountChart(uPlot, lrEl, (width) => ({
      width, height: 200,
      scales: { x: { time: false }, y: view.lrLog && lrY.every((v) => v > 0) ? { distr: 3, log: 10 } : {} },
      series: [{ label: 'epoch' }, { label: 'lr', stroke: COLORS[3], width: 2, paths: uPlot.paths.stepped({ align: 1 }), points: { show: true }, value: (u, v) => num(v, 3) }],
      axes: [{ label: 'epoch', incrs: [1, 2, 5, 10, 20, 50, 100] }, { values: (u, vs) => ticks(vs), size: 60 }],
    }), [lrX, lrY]);
    lrEl.dataset.distr = String(lrChart.plot.scales.y.distr || 1);
    const evalData = [xs, epochs.map((e) => e.test_loss), epochs.map((e) => e.train_loss), epochs.map((e) => (e.test_acc === null ? null : e.test_acc * 100))];
    if (evalChart) evalChart.setData(evalData);
    else evalChart = mountChart(uPlot, evalEl, (width) => ({
      width, height: 200,
      scales: { x: { time: false }, acc: { range: (u, lo, hi) => [Math.max(0, Math.floor(lo - 2)), Math.min(100, Math.ceil(hi + 2))] } },
      series: [{ label: 'epoch' },
        { label: 'test loss', stroke: COLORS[1], width: 2, points: { show: true }, value: (u, v) => num(v) },
        { label: 'train loss', stroke: COLORS[0], width: 1, dash: [4, 4], value: (u, v) => num(v) },
        { label: 'test acc %', stroke: COLORS[2], width: 2, scale: 'acc', points: { show: true }, value: (u, v) => (v === null ? '' : `${v.toFixed(1)}%`) }],
      axes: [{ label: 'epoch', incrs: [1, 2, 5, 10, 20, 50, 100] }, { values: (u, vs) => ticks(vs), size: 50 },
        { scale: 'acc', side: 1, grid: { show: false }, values: (u, vs) => vs.map((v) => `${v}%`), size: 50 }],
    }), evalData);
  }

  // ---- ranks ----
  async function loadRanks() {
    try {
      const r = await get(`/runs/${id}/ranks`);
      if (disposed) return;
      // keep the step times heard so far: the straggler rule judges a window of them
      const before = new Map(ranks.map((x) => [x.rank, x.samples || []]));
      ranks = r.ranks.map((x) => ({ ...x, samples: before.get(x.rank) || [] }));
      for (const x of ranks) if (!x.samples.length) addSample(x, x.step_ms);
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
    const stepMs = columnFormat(ranks.map((r) => r.step_ms || null), 3);
    ranksEl.replaceChildren(...ranks.map((r) => {
      const m = marks.get(r.rank) || [];
      const device = (run && run.devices && run.devices[r.rank]) || r.device || '—';
      // A run that ended without the rank saying so (canceled, a peer died): it stopped where it was.
      const stopped = run && FINISHED.has(run.status) && !['done', 'failed'].includes(r.state);
      const state = stopped ? 'stopped' : r.state;
      return h('div', { class: `rank ${m.join(' ')}`, 'data-rank': r.rank, 'data-state': state || '', 'data-samples': (r.samples || []).length,
        'data-window': (r.samples || []).map((v) => v.toFixed(2)).join(' ') },
        h('div', { class: 'rank-head' }, h('strong', {}, `rank ${r.rank}`), h('span', { class: `state state-${state}` }, state || '—')),
        stopped && r.state ? h('div', { class: 'muted' }, `last said: ${r.state}`) : null,
        h('div', { class: 'rank-device' }, device, r.device && r.device !== device ? ` (${r.device})` : ''),
        h('div', {}, `step ${int(r.global_step)}`),
        h('div', {}, `step time ${r.step_ms ? `${stepMs(r.step_ms)} ms` : '—'}`),
        h('div', { class: 'muted' }, `seen ${ago(r.last_seen)}`),
        m.length ? h('div', { class: 'rank-marks' }, m.map((k) => h('span', { class: `mark mark-${k}` }, k))) : null,
        r.detail ? h('div', { class: 'muted rank-detail', title: r.detail }, r.detail) : null);
    }));
  }

  const loadLog = () => log.poll();

  // ---- live ----
  // The page's reads: the run first, then the rest (each answered after the run, so
  // as new as it or newer). The event stream's first `ready` (it is open: what changes
  // from then on comes as events) asks only whether the run changed since (its ETag:
  // 304, nothing to read again); a later one (reconnected) reads everything again.
  const loadRest = () => { loadLoss(); loadEpochs(); loadRanks(); loadLog(); loadCheckpoints(); if (commandShown) series.refresh(); };
  let opened = null, readies = 0;
  const close = subscribe(`/runs/${id}/events`, {
    ready: () => {
      const first = readies++ === 0;
      (opened || Promise.resolve()).then(() => loadRun()).then((changed) => { if (!disposed && (changed || !first)) loadRest(); });
    },
    run: (d) => {
      if (run) { run.status = d.status; if (d.reason !== undefined) run.reason = d.reason; renderRun(); }
      loadRun();
      if (FINISHED.has(d.status)) { // the whole story, at the end
        loadLoss(); loadEpochs(); loadRanks(); loadLog(); loadCheckpoints();
        if (commandShown) series.refresh();
      }
    },
    step: (d) => {
      if (!run || FINISHED.has(run.status)) return;
      run.progress = { ...run.progress, ...d };
      renderRun();
      appendStep(d);
      if (commandShown) series.poke();
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
      addSample(r, d.step_ms);
      r.last_seen = new Date(d.t).toISOString();
      renderRanks();
    },
    checkpoint: () => { loadRun(); loadCheckpoints(); timeline.refresh(run); },
    attempt: (d) => {
      loadRun(); // the attempts card, the markers
      if (d.phase !== 'started' || d.attempt === 0) return;
      redoUntil = loss.steps.length ? loss.steps[loss.steps.length - 1] : null;
      if (redoUntil !== null) { loadLoss(); if (commandShown) series.redo(true); }
    },
    deleted: () => { reasonBox.hidden = false; reasonBox.className = 'note-box'; reasonBox.textContent = 'This run was deleted.'; },
  });

  // the log, and a command run's own series: read on every 2 s while the run is live
  // (a burst of steps before the event stream is open has no step event to say so)
  timers.push(setInterval(() => { if (run && LIVE.has(run.status)) { loadLog(); if (commandShown) series.poke(); } }, 2000));
  // a queued run's reason and estimate move with the others' runs, with no event of its own
  timers.push(setInterval(() => { if (run && run.status === 'queued') loadRun(); }, 2000));
  timers.push(setInterval(() => {
    if (!run || !LIVE.has(run.status)) return;
    const d = root.querySelector('.duration');
    if (d) d.textContent = duration(runDuration(run));
    renderRanks(); // "seen … ago", silent ranks
    timeline.tick(run); // its open phase grows
  }, 1000));

  loadUPlot().then((u) => { uPlot = u; if (!disposed) { drawLoss(true); renderEpochs(); } })
    .catch((e) => { for (const el of [lossEl, lrEl, evalEl]) chartMessage(el, e.message); });
  opened = loadRun().then(() => { if (!disposed) { loadLoss(); loadEpochs(); loadRanks(); loadLog(); loadCheckpoints(); } });

  // An epochs table wider than its card scrolls sideways: say so, not only by a cut edge.
  function markScroll() {
    const over = epochsScroll.scrollWidth > epochsScroll.clientWidth + 1;
    epochsScroll.classList.toggle('overflowing', over);
    scrollHint.hidden = !over;
  }
  const scrollObserver = new ResizeObserver(markScroll);
  scrollObserver.observe(epochsScroll);

  function dispose() {
    if (disposed) return;
    disposed = true;
    close();
    timers.forEach(clearInterval);
    scrollObserver.disconnect();
    log.dispose();
    series.dispose();
    for (const c of [lossChart, lrChart, evalChart]) if (c) c.destroy();
  }
  return dispose;
}
