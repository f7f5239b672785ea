// The dashboard in headless Chromium (Debian's, driven by playwright-core) against a
// real ddpd with the real trainer: the empty list; a run submitted from the form
// that moves live to succeeded, with the loss curve drawn, the LR's step decay
// visible (and on a log axis), its best and final test metrics, its epochs numbered
// from 0 with each column's numbers alike, and its checkpoint files as they are on
// disk, while the runs list (another tab) follows it; runs overlaid on one chart
// from the runs list; cancel, after a healthy run has gone unmarked by the
// straggler rule; a bad config's field error by its field (and, at 390 px, off the
// text); a failed run's reason; the nodes page (this host and an agent node that goes lost); a command run (the user's torch script, 2 ranks): its
// command, a chart per series it reported, each rank's own log, and a log and a chart
// that follow a live run without gaps or repeats; the connection lost and found again;
// a queued run's reason and estimate (the queue on the nodes page, the run page) and its timeline strip;
// a server with users: the sign-in before any page, live updates with the token, each
// run's owner, "mine", a replaced token bringing the sign-in back, and signing out.
// Screenshots at 1280 and 390 px go to $DDPD_TEST_ARTIFACTS (tests/integration/web/README.md).
//
// Run by ctest: node --test tests/integration/web/dashboard.test.mjs (DDPD_BIN, DDP_TRAINER, DDP_RUN set).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { browserSuite, commandWorkRoot, DDPD, elementShot, fmnist, screenshot, Server, TORCH_SCRIPT, until } from './ddpd_server.mjs';

const suite = browserSuite('dashboard', 240000);
const { it, open } = suite;

// No sideways scrolling: the page fits its width.
async function fits(page) {
  const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
  assert.ok(scroll <= width + 1, `the page is ${scroll} px wide in a ${width} px window`);
}

async function shots(page, name) {
  await screenshot(page, `${name}-1280`);
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(700); // charts follow their container's width
  await fits(page);
  await screenshot(page, `${name}-390`);
  await page.setViewportSize({ width: 1280, height: 900 });
}

// The texts of a table column's cells.
async function column(page, selector) { return page.$$eval(selector, (tds) => tds.map((td) => td.textContent.trim())); }

// Numbers formatted alike: all scientific with the same mantissa, or all with the same decimals.
function alike(texts, what) {
  const shape = (t) => (/e[-+]?\d+$/.test(t) ? `sci ${t.split('e')[0].split('.')[1]?.length ?? 0}` : `fixed ${t.split('.')[1]?.length ?? 0}`);
  assert.ok(texts.length > 0, `${what}: some numbers`);
  assert.equal(new Set(texts.map(shape)).size, 1, `${what}: one format for the column: ${texts.join(' ')}`);
}

// Every element's text on one line: nothing in it wrapped (its text's line boxes share one top).
async function oneLine(page, selector) {
  return page.$$eval(selector, (els) => els.every((el) => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size <= 1;
  }));
}

async function finished(id, timeout = 180000) {
  return until(async () => {
    const r = (await suite.server.api('GET', `/runs/${id}`)).json;
    return ['succeeded', 'failed', 'canceled'].includes(r.status) ? r : null;
  }, `run ${id} to finish`, timeout, 200);
}

it('the runs list says plainly that there are no runs', async () => {
  const page = await open('#/');
  await page.waitForSelector('#runs-empty:not([hidden])');
  assert.match(await page.textContent('#runs-empty'), /No runs yet/);
  await until(() => page.evaluate(() => document.getElementById('conn').textContent === 'live'), 'the live indicator');
  await shots(page, 'runs-empty');
  assert.deepEqual(page.errors, []);
  await page.close();
});

it('a queued run says why it waits and when it may start (the queue on the nodes page, the run page); its timeline strip shows its phases', async () => {
  const s = new Server([]);
  await s.start();
  try {
    const hold = await s.api('POST', '/runs', fmnist({ name: 'holds', train: { epochs: 200 } }));
    assert.equal(hold.status, 201);
    const holder = hold.json.id;
    await until(async () => (await s.api('GET', `/runs/${holder}`)).json.status === 'running', 'the holder running', 60000, 200);
    const w = await s.api('POST', '/runs', fmnist({ name: 'waits', distributed: { world_size: 1 } }));
    const waiting = w.json.id;
    const page = await suite.browser.newPage();
    await page.setViewportSize({ width: 1280, height: 900 });
    page.errors = [];
    page.on('pageerror', (e) => page.errors.push(e.message));
    await page.goto(`${s.url}/#/nodes`);
    await page.waitForSelector(`#queue-table:not([hidden]) tr[data-run="${waiting}"]`);
    const row = await page.textContent(`tr[data-run="${waiting}"]`);
    assert.match(row, new RegExp(`#${waiting}.*devices.*1 CPU slots on this host \\(0 free of 2\\).*runs ${holder}.*(no estimate|in \\d+ s)`),
      `the queue row: reason, what it waits for, behind which run, its estimate (none until the holder has an ETA): ${row}`);
    await shots(page, 'queue');
    await page.goto(`${s.url}/#/runs/${waiting}`);
    await page.waitForSelector('#timeline-strip .phase-queued');
    assert.match(await page.textContent('#run-progress-text'), /Queued: position 1 · devices: 1 CPU slots on this host/);
    // once the holder's steps give its ETA, the queued run has an estimate (the page reads it again every 2 s)
    await page.waitForFunction(() => /expected to start .* \(in \d+ s\)/.test(document.getElementById('run-progress-text').textContent),
      null, { timeout: 60000 });
    const kinds = await page.$$eval('#timeline-entries li', (lis) => lis.map((li) => li.dataset.kind));
    assert.deepEqual(kinds, ['submitted', 'pending'], `submitted, then its reason: ${kinds}`);
    // the holder ends: the queued run is admitted and starts, and the strip grows its phases
    assert.equal((await s.api('POST', `/runs/${holder}/cancel`)).status, 202);
    await page.waitForSelector('#timeline-strip .phase-running', { timeout: 60000 });
    const phases = await page.$$eval('#timeline-strip .phase', (els) => els.map((e) => e.dataset.phase));
    assert.deepEqual(phases, ['queued', 'starting', 'running'], `its phases in order: ${phases}`);
    await shots(page, 'run-timeline');
    await s.api('POST', `/runs/${waiting}/cancel`);
    assert.deepEqual(page.errors, []);
    await page.close();
  } finally {
    await s.stop();
    s.cleanup();
  }
});

it('the nodes page lists this host and an agent node, and shows the node lost once it stops heartbeating', async () => {
  const coord = new Server(['--node-timeout', '2', '--node-name', 'coord']);
  await coord.start();
  try {
    const reg = await coord.api('POST', '/nodes', { name: 'node-b', address: '10.9.0.2', slots: 2, gpus: ['GPU-a'] });
    assert.equal(reg.status, 201, `the node registers: ${JSON.stringify(reg.json)}`);
    const page = await suite.browser.newPage();
    await page.setViewportSize({ width: 1280, height: 900 });
    page.errors = [];
    page.on('pageerror', (e) => page.errors.push(e.message));
    await page.goto(`${coord.url}/#/nodes`);
    await page.waitForSelector('#nodes-table:not([hidden]) tr[data-node="node-b"]');
    const rowText = (name) => page.textContent(`tr[data-node="${name}"]`);
    assert.match(await rowText('coord'), /coord \(this host\).*none: not in runs across nodes.*up.*2 free of 2/);
    assert.match(await rowText('node-b'), /node-b.*10\.9\.0\.2.*up.*2 free of 2.*1 free of 1/);
    assert.equal(await page.getAttribute('nav a[href="#/nodes"]', 'class'), 'active', 'the Nodes tab is the active one');
    assert.match(await page.textContent('#nodes-status'), /1 agent node, besides this host/);
    await shots(page, 'nodes');
    // no heartbeat: lost after the node timeout, and the page (polling) says so
    await page.waitForSelector('tr[data-node="node-b"] .badge-node-lost', { timeout: 20000 });
    assert.match(await page.textContent('#nodes-status'), /1 agent node, 1 lost/);
    assert.deepEqual(page.errors, []);
    await page.close();
  } finally {
    await coord.stop();
    coord.cleanup();
  }
});

it('a run submitted from the form goes live to succeeded, with its curves', async () => {
  const list = await open('#/'); // the runs list, in another tab, follows it live
  await list.waitForSelector('#runs-empty:not([hidden])');
  const page = await open('#/submit');
  await page.waitForSelector('#config-text[data-ready]');
  const defaults = JSON.parse(await page.inputValue('#config-text'));
  assert.equal(defaults.train.batch_size, 128, 'the editor holds the schema defaults');
  assert.equal(defaults.train.lr_schedule.gamma, 0.3);
  const cfg = { ...defaults, ...fmnist({ name: 'from-the-form' }) };
  await page.fill('#config-text', JSON.stringify(cfg, null, 2));
  await page.click('#submit-run');
  await page.waitForURL(/#\/runs\/\d+$/, { timeout: 30000 });
  const id = Number(/#\/runs\/(\d+)$/.exec(page.url())[1]);

  // Watch it move: statuses and progress as the page shows them, without reloading.
  const seen = [];
  await until(async () => {
    const s = await page.evaluate(() => ({
      status: document.querySelector('#run-status .badge')?.dataset.status,
      fraction: Number(document.getElementById('run-progress')?.dataset.fraction || 0),
      points: Number(document.getElementById('loss-chart')?.dataset.points || 0),
    }));
    seen.push(s);
    return s.status === 'succeeded' || s.status === 'failed';
  }, 'the run to finish', 180000, 100);
  const last = seen[seen.length - 1];
  assert.equal(last.status, 'succeeded', `the run succeeded (${JSON.stringify(last)})`);
  const midway = seen.filter((s) => s.status === 'running' && s.fraction > 0 && s.fraction < 1);
  assert.ok(midway.length >= 2, `progress was seen moving while running: ${JSON.stringify(seen.filter((_, i) => i % 5 === 0))}`);
  assert.ok(new Set(midway.map((s) => s.fraction)).size >= 2, 'the progress bar moved');
  assert.ok(seen.some((s) => s.status === 'running' && s.points > 0), 'the loss curve grew while running');

  // The curves: the loss chart's points (every step: fewer than max_points), the LR's step.
  const run = (await suite.server.api('GET', `/runs/${id}`)).json;
  await until(() => page.evaluate((n) => Number(document.getElementById('loss-chart').dataset.points) === n, run.progress.total_steps),
    'every step on the loss chart');
  assert.ok(await page.$('#loss-chart canvas'), 'the loss chart is drawn by uPlot');
  await until(() => page.evaluate(() => document.getElementById('lr-chart').dataset.points === '5'), 'the five epochs');
  assert.equal(await page.getAttribute('#lr-chart', 'data-distinct-lr'), '3', 'the LR steps down twice in 5 epochs (every 2)');
  const lrs = await page.$$eval('#epochs-table tbody td.lr', (tds) => tds.map((td) => Number(td.textContent)));
  assert.deepEqual(lrs.map((v) => v.toPrecision(2)), ['0.0010', '0.0010', '0.00030', '0.00030', '0.000090'], 'the epochs table shows the decay');
  // one epoch numbering: from 0, as the API; the count after it
  assert.deepEqual(await column(page, '#epochs-table tbody td:first-child'), ['0', '1', '2', '3', '4'], 'epochs numbered from 0');
  assert.match(await page.textContent('#run-progress-text'), /^epoch 4 \(5 of 5\) · /, 'the progress line: "epoch 4 (5 of 5)"');
  // each column's numbers alike ("1.00e-3" above "3.00e-4", never "0.001")
  alike(await column(page, '#epochs-table tbody td.lr'), 'LR');
  alike(await column(page, '#epochs-table tbody td.train-loss'), 'train loss');
  alike(await column(page, '#epochs-table tbody td.test-loss'), 'test loss');
  alike(await column(page, '#epochs-table tbody td.seconds'), 'time');
  // the summary: best and final test metrics, as the epochs say
  const eps = (await suite.server.api('GET', `/runs/${id}/epochs`)).json.epochs;
  const bestAcc = eps.reduce((a, e) => (e.test_acc > a.test_acc ? e : a));
  const bestLoss = eps.reduce((a, e) => (e.test_loss < a.test_loss ? e : a));
  const lastEp = eps[eps.length - 1];
  const dd = (sel) => page.evaluate((s) => ({ text: document.querySelector(s).textContent, epoch: document.querySelector(s).dataset.epoch }), sel);
  assert.deepEqual(await dd('#summary-best-acc'), { text: `${(bestAcc.test_acc * 100).toFixed(1)}% epoch ${bestAcc.epoch}`, epoch: String(bestAcc.epoch) });
  assert.deepEqual(await dd('#summary-final-acc'), { text: `${(lastEp.test_acc * 100).toFixed(1)}% epoch 4`, epoch: '4' });
  assert.equal((await dd('#summary-best-loss')).epoch, String(bestLoss.epoch), 'the best test loss names its epoch');
  assert.match(await page.textContent('#run-summary'), /Final test accuracy/, 'a finished run says final');
  // the checkpoint files, as they are on disk (checkpoint.keep 2: the newest two of five)
  const files = (await suite.server.api('GET', `/runs/${id}/checkpoints`)).json.checkpoints.map((c) => c.file);
  assert.deepEqual(files, ['epoch-0003.safetensors', 'epoch-0004.safetensors']);
  await until(() => page.evaluate(() => document.getElementById('checkpoints').dataset.files === '2'), 'the checkpoint list');
  assert.deepEqual(await page.$$eval('#checkpoints-table tbody tr', (trs) => trs.map((tr) => tr.dataset.file)), files, 'the list is the files on disk');
  assert.match(await page.textContent('#checkpoints-kept'), /checkpoint\.keep is 2: the newest 2 stay/);
  assert.match(await page.textContent('#checkpoints'), new RegExp(`"load": "${id}/checkpoints/epoch-0004.safetensors"`), 'how to evaluate one');
  // the LR on a log axis, where the later decays would be flat at 0 on a linear one
  await page.check('#opt-lr-log');
  await until(() => page.evaluate(() => document.getElementById('lr-chart').dataset.log === 'true' && !!document.querySelector('#lr-chart canvas')),
    'the LR chart on a log axis');
  assert.equal(await page.getAttribute('#lr-chart', 'data-distr'), '3', 'uPlot draws the LR on a log (base 10) scale');
  await page.uncheck('#opt-lr-log');
  await until(() => page.evaluate(() => document.getElementById('lr-chart').dataset.distr === '1'), 'and back on a linear one');
  assert.ok(await page.$('#eval-chart canvas'), 'test loss and accuracy are drawn');
  assert.equal(await page.$$eval('#ranks .rank', (r) => r.length), 2, 'a tile per rank');
  assert.match(await page.textContent('#run-log'), /run succeeded/);
  assert.match(await page.textContent('#run-config'), /"from-the-form"/);
  // a built-in run: none of a command run's parts
  for (const sel of ['#command-card', '#series-card', '#log-controls']) assert.ok(await page.isHidden(sel), `no ${sel} on a built-in run`);
  assert.ok(await page.isVisible('#checkpoints') && await page.isVisible('#run-summary'), 'its checkpoints and test summary');
  assert.deepEqual(await page.$$eval('#run-facts dt', (dts) => dts.map((d) => d.textContent)),
    ['Step loss', 'LR', 'Samples/s', 'ETA', 'Devices', 'Owner', 'Priority', 'Submitted', 'Duration', 'Exit'], 'every fact of a built-in run');

  // The chart's controls: log scale, smoothing, x by epoch.
  await page.check('#opt-log');
  await page.selectOption('#opt-x', 'epoch');
  await page.fill('#opt-smooth', '0.9');
  await page.waitForTimeout(300);
  assert.match(await page.textContent('#loss-chart'), /epoch/, 'the x axis is in epochs');
  await page.uncheck('#opt-log');
  await page.selectOption('#opt-x', 'step');
  await shots(page, 'run-succeeded');
  // at 390 px: the epochs table fits without a hidden sideways scroll, nothing wraps
  // inside a number, and the checkpoint list reads
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(500);
  const scroll = await page.evaluate(() => { const el = document.getElementById('epochs-scroll'); return { sw: el.scrollWidth, cw: el.clientWidth, hint: !document.getElementById('epochs-scroll-hint').hidden }; });
  assert.ok(scroll.sw <= scroll.cw + 1 || scroll.hint, `the epochs table fits at 390 px, or says it scrolls: ${JSON.stringify(scroll)}`);
  assert.ok(scroll.sw <= scroll.cw + 1, `at 390 px the epochs table fits its card: ${JSON.stringify(scroll)}`);
  assert.ok(await oneLine(page, '#epochs-table tbody td'), 'no number in the epochs table wraps ("3.00e-/4")');
  assert.ok(await oneLine(page, '#checkpoints-table td.num'), 'nor in the checkpoint list');
  await elementShot(page.locator('#checkpoints').locator('xpath=ancestor::section[1]'), 'checkpoints-390');
  await elementShot(page.locator('#epochs-table').locator('xpath=ancestor::section[1]'), 'epochs-390');
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.waitForTimeout(300);
  await elementShot(page.locator('#checkpoints').locator('xpath=ancestor::section[1]'), 'checkpoints-1280');
  assert.deepEqual(page.errors, []);

  // The list followed it without a reload.
  await until(() => list.evaluate((n) => document.querySelector(`tr[data-run="${n}"] .badge`)?.dataset.status === 'succeeded', id),
    'the runs list to show it succeeded');
  await until(() => list.evaluate((n) => Number(document.querySelector(`tr[data-run="${n}"] svg.spark`)?.dataset.points) > 10, id),
    'its loss sparkline');
  assert.match(await list.textContent(`tr[data-run="${id}"]`), /cpu:0, cpu:1/);
  assert.match(await list.textContent(`tr[data-run="${id}"] .progress-text`), /^epoch 4 \(5 of 5\) · 100%$/, 'the list numbers epochs as the API');
  await shots(list, 'runs-list');
  assert.deepEqual(list.errors, []);
  await list.close();
  await page.close();
});

it('the runs list overlays the selected runs on one chart, with the metrics they share', async () => {
  const made = [];
  for (const [name, lr] of [['cmp-slow', 0.0005], ['cmp-fast', 0.003]]) {
    const { status, json } = await suite.server.api('POST', '/runs', fmnist({ name, train: { epochs: 3, optimizer: { lr } } }));
    assert.equal(status, 201);
    made.push(json.id);
  }
  const bad = fmnist({ name: 'cmp-bad' });
  bad.data.train.images = 'fashion-mnist/train-labels-idx1-ubyte.gz'; // fails before its first step
  const badId = (await suite.server.api('POST', '/runs', bad)).json.id;
  for (const id of [...made, badId]) await finished(id);
  const [a, b] = made;

  const page = await open('#/');
  await page.waitForSelector(`tr[data-run="${b}"] .pick-run`);
  assert.ok(await page.isHidden('#compare'), 'no chart before two runs are ticked');
  await page.check(`tr[data-run="${a}"] .pick-run`);
  assert.ok(await page.isHidden('#compare') && await page.isVisible('#compare-hint'), 'one ticked: a hint, no chart');
  await page.check(`tr[data-run="${b}"] .pick-run`);
  await page.waitForSelector('#compare:not([hidden]) #compare-chart canvas');
  await until(() => page.evaluate(() => document.getElementById('compare-chart').dataset.series === '2'), 'two lines');
  assert.equal(await page.getAttribute('#compare-chart', 'data-metric'), 'loss', 'the loss first');
  const steps = (await suite.server.api('GET', `/runs/${a}`)).json.progress.total_steps;
  assert.equal(Number(await page.getAttribute('#compare-chart', 'data-points')), 2 * steps, 'every step of both runs');
  assert.deepEqual(await page.$$eval('#compare-legend li', (lis) => lis.map((li) => Number(li.dataset.run))), [b, a], 'a legend entry per run');
  assert.match(page.url(), new RegExp(`#/\\?compare=${a},${b}$`), 'the selection is in the address');
  const offered = await page.$$eval('#compare-metric option', (os) => os.map((o) => o.value));
  assert.deepEqual(offered.sort(), ['loss', 'lr', 'samples_per_s', 'test_acc', 'test_loss', 'train_loss'], 'every metric both have');
  assert.equal(await page.textContent('#compare-title'), 'Compare 2 runs');
  await shots(page, 'compare-loss');

  // any common metric: test accuracy per epoch, a point per epoch and run
  await page.selectOption('#compare-metric', 'test_acc');
  await until(() => page.evaluate(() => document.getElementById('compare-chart').dataset.metric === 'test_acc'
    && document.getElementById('compare-chart').dataset.points === '6'), 'test accuracy, 3 epochs of 2 runs');
  assert.ok(await page.isHidden('#compare-x'), 'per-epoch metrics have no step axis to choose');
  await page.selectOption('#compare-metric', 'loss');
  await page.selectOption('#compare-x', 'epoch');
  await page.check('#compare-log');
  await until(() => page.evaluate(() => document.getElementById('compare-chart').dataset.metric === 'loss'), 'back to the loss');
  assert.match(await page.textContent('#compare-chart'), /epoch/, 'by epoch');
  await shots(page, 'compare-loss-by-epoch');

  // a run without steps or epochs in the selection: nothing is common
  await page.check(`tr[data-run="${badId}"] .pick-run`);
  await until(async () => /no metric in common/.test(await page.textContent('#compare-chart')), 'no common metric');
  assert.equal(await page.getAttribute('#compare-chart', 'data-series'), '0');
  await page.uncheck(`tr[data-run="${badId}"] .pick-run`);
  await until(() => page.evaluate(() => document.getElementById('compare-chart').dataset.series === '2'), 'two lines again');

  // the address brings the comparison back
  await page.goto(`${suite.server.url}/#/?compare=${a},${b}`);
  await page.reload();
  await until(() => page.evaluate(() => document.getElementById('compare-chart')?.dataset.series === '2'), 'the comparison after a reload');
  assert.equal(await page.isChecked(`tr[data-run="${a}"] .pick-run`), true);
  // the list's step loss column: one format
  alike((await column(page, '#runs-table tbody .loss-value')).filter((t) => t !== '—'), 'the step loss column');
  await page.click('#compare-clear');
  assert.ok(await page.isHidden('#compare'), 'cleared');
  assert.match(page.url(), /#\/$/, 'and the address with it');
  assert.deepEqual(page.errors, []);
  await page.close();
});

it('the straggler rule judges a window of step times, not one heartbeat', async () => {
  const page = await open('#/');
  await page.waitForLoadState('load');
  const marks = await page.evaluate(async () => {
    const { rankMarks, addSample, WINDOW } = await import('/ui/ranks.js');
    const now = Date.now(), seen = new Date(now).toISOString();
    const rank = (n, times) => { const r = { rank: n, state: 'training', last_seen: seen }; for (const t of times) addSample(r, t); return r; };
    const healthy = [4.6, 4.7, 4.5, 4.8, 4.6, 4.7];
    const out = {};
    // one heartbeat of 8.2 ms against 4.6 ms (what flagged rank 0 before): no mark
    out.spike = [...rankMarks([rank(0, [...healthy.slice(0, 5), 8.2]), rank(1, healthy)], true, now)];
    // too few step times to judge
    out.early = [...rankMarks([rank(0, [14, 15]), rank(1, [4.6, 4.7])], true, now)];
    // a rank slow step after step: marked
    out.slow = [...rankMarks([rank(0, healthy), rank(1, [14, 15, 13.5, 14.2, 14.8, 15.1])], true, now)];
    // the window forgets: a rank that was slow and has caught up is not marked
    out.recovered = [...rankMarks([rank(0, [...Array(WINDOW)].map(() => 4.6)), rank(1, [14, 14, 14, ...Array(WINDOW).fill(4.7)])], true, now)];
    // a finished run marks nothing
    out.finished = [...rankMarks([rank(0, healthy), rank(1, [14, 15, 13.5, 14.2, 14.8])], false, now)];
    return out;
  });
  assert.deepEqual(marks.spike, [], 'one slow heartbeat is no straggler');
  assert.deepEqual(marks.early, [], 'nor are two');
  assert.deepEqual(marks.slow, [[1, ['straggler']]], 'a rank slower at every step is one');
  assert.deepEqual(marks.recovered, [], 'and stops being one when it catches up');
  assert.deepEqual(marks.finished, [], 'a finished run has no stragglers');
  await page.close();
});

it('a bad config shows the server\'s error next to the field it names', async () => {
  const before_ = (await suite.server.api('GET', '/runs')).json.runs.length;
  const page = await open('#/submit');
  await page.waitForSelector('#config-text[data-ready]');
  const cfg = JSON.parse(await page.inputValue('#config-text'));
  cfg.train.batch_size = 7;
  cfg.distributed.world_size = 2;
  const text = JSON.stringify(cfg, null, 2);
  await page.fill('#config-text', text);
  await page.click('#submit-run');
  const err = await page.waitForSelector('.field-error[data-pointer="/train/batch_size"]', { timeout: 30000 });
  assert.match(await err.textContent(), /must be a multiple of \/distributed\/world_size \(2\)/);
  // Its line: where "batch_size" is in the editor.
  const line = text.split('\n').findIndex((l) => l.includes('"batch_size"'));
  const area = await (await page.$('#config-text')).boundingBox();
  const box = await err.boundingBox();
  const lineTop = area.y + 8 + line * 20;
  assert.ok(Math.abs(box.y - lineTop) < 12, `the error sits on line ${line + 1} (${box.y} vs ${lineTop})`);
  assert.ok(box.x > area.x + area.width - 5, 'beside the editor, at 1280 px');
  const bad = await page.$$eval('.gutter .bad', (els) => els.map((e) => Number(e.textContent)));
  assert.deepEqual(bad, [line + 1], 'the line is marked in the gutter');
  assert.match(await page.textContent('#submit-errors'), /\/train\/batch_size/);
  await shots(page, 'submit-error');
  // At 390 px no note covers the text or takes the taps meant for it: the gutter marks
  // the line, and with the caret on it the reason shows, in view, under the editor.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(300);
  assert.ok(!(await err.isVisible()), 'no note over the text at 390 px');
  for (const l of [line, line + 1]) {
    const hit = await page.evaluate((n) => {
      const t = document.getElementById('config-text').getBoundingClientRect();
      window.scrollTo(0, t.top + window.scrollY + 8 + n * 20 + 10 - 200); // the line's middle at y = 200
      const el = document.elementFromPoint(document.getElementById('config-text').getBoundingClientRect().left + 60, 200);
      return el ? el.id || el.className || el.tagName : null;
    }, l);
    assert.equal(hit, 'config-text', `a tap on line ${l + 1} reaches the editor`);
  }
  await page.click('#submit-errors a');
  const help = await page.waitForSelector('#field-help.has-error');
  assert.match(await help.textContent(), /\/train\/batch_size must be a multiple of \/distributed\/world_size \(2\)/);
  const hb = await help.boundingBox();
  assert.ok(hb.y >= 0 && hb.y + hb.height <= 844, `the reason is in view (${hb.y})`);
  const caretLine = await page.evaluate(() => { const t = document.getElementById('config-text'); return t.value.slice(0, t.selectionStart).split('\n').length - 1; });
  assert.equal(caretLine, line, 'the caret is on the refused line');
  await screenshot(page, 'submit-error-390-caret');
  assert.equal((await suite.server.api('GET', '/runs')).json.runs.length, before_, 'nothing was submitted');
  assert.deepEqual(page.errors, []);
  await page.close();
});

it('a run is canceled from its page', async () => {
  const { status, json } = await suite.server.api('POST', '/runs', fmnist({ name: 'to-cancel', train: { epochs: 200 } }));
  assert.equal(status, 201);
  const page = await open(`#/runs/${json.id}`);
  await until(() => page.evaluate(() => Number(document.getElementById('run-progress').dataset.fraction) > 0),
    'the run to make progress', 120000);
  // A healthy 2-rank CPU run, judged over a window of heartbeats: no rank is a straggler.
  let seenMarked = false;
  await until(async () => {
    const s = await page.evaluate(() => ({ marked: document.querySelectorAll('#ranks .rank.straggler').length,
      samples: [...document.querySelectorAll('#ranks .rank')].map((r) => Number(r.dataset.samples)) }));
    seenMarked ||= s.marked > 0;
    return s.samples.length === 2 && s.samples.every((n) => n >= 6);
  }, 'six heartbeats from each rank', 60000, 100);
  assert.equal(seenMarked, false, 'a healthy run never has a straggler mark');
  await page.click('#cancel-run'); // the confirm() is accepted
  await until(() => page.evaluate(() => document.querySelector('#run-status .badge')?.dataset.status === 'canceled'),
    'the page to show it canceled', 60000);
  assert.match(await page.textContent('#run-reason'), /Canceled: canceled by request/);
  assert.ok(await page.isHidden('#cancel-run'), 'no cancel button on a finished run');
  await shots(page, 'run-canceled');
  assert.deepEqual(page.errors, []);
  await page.close();
});

// The address changes before the page hears of it (hashchange is a task of its own): a
// runs list that finishes loading in between must leave the new address alone. Played
// out slowly: the list's answer held back, the address moved without the event, then
// the answer let through, then the event.
it('a run opened while the runs list is still loading stays open', async () => {
  const id = (await suite.server.api('GET', '/runs?limit=1')).json.runs[0]?.id ?? (await suite.server.api('POST', '/runs', fmnist({ name: 'to-open' }))).json.id;
  const page = await suite.browser.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e.message));
  let release, asked = false;
  const held = new Promise((r) => { release = r; });
  await page.route((url) => url.pathname === '/runs' && url.searchParams.has('limit'), async (route) => { asked = true; await held; await route.continue(); });
  await page.goto(`${suite.server.url}/#/`);
  await until(() => asked, 'the list to ask for the runs');
  await page.evaluate((to) => history.pushState(null, '', to), `#/runs/${id}`);
  const answered = page.waitForResponse((r) => new URL(r.url()).pathname === '/runs');
  release();
  await answered;
  await until(() => page.evaluate((n) => document.body.innerText.includes(`#${n} `), id), 'the list to show its rows');
  assert.equal(await page.evaluate(() => location.hash), `#/runs/${id}`, 'the list left the address alone');
  await page.evaluate(() => window.dispatchEvent(new HashChangeEvent('hashchange')));
  await page.waitForSelector('#run-status .badge');
  assert.deepEqual(page.errors, []);
  await page.close();
});

it('a failed run shows its reason plainly', async () => {
  const cfg = fmnist({ name: 'bad-data' });
  cfg.data.train.images = 'fashion-mnist/train-labels-idx1-ubyte.gz'; // a labels file: the trainer refuses it
  const { json } = await suite.server.api('POST', '/runs', cfg);
  const page = await open(`#/runs/${json.id}`);
  await until(() => page.evaluate(() => document.querySelector('#run-status .badge')?.dataset.status === 'failed'),
    'the run to fail', 120000);
  await until(() => page.evaluate(() => /Failed: cannot load the training data/.test(document.getElementById('run-reason').textContent)),
    'its reason');
  assert.equal(await page.getAttribute('#run-reason', 'class'), 'error-box');
  assert.match(await page.textContent('#loss-chart'), /no steps/, 'an empty chart says so');
  await shots(page, 'run-failed');
  const list = await open('#/');
  await list.waitForSelector(`tr[data-run="${json.id}"] .reason-short`);
  assert.match(await list.textContent(`tr[data-run="${json.id}"] .reason-short`), /cannot load the training data/);
  await list.close();
  await page.close();
});

// A server that runs command runs, in a work root holding `files`; fn(cmdServer, work).
async function withCommands(files, fn) {
  const work = await commandWorkRoot(files);
  const s = new Server(work.args);
  const was = suite.server;
  await s.start();
  suite.server = s; // open() and finished() talk to it; its log is printed when a case fails
  try { await fn(s, work); } catch (e) {
    process.stderr.write(`---- ddpd log (command runs) ----\n${s.log.slice(-4000)}\n`);
    throw e;
  } finally {
    suite.server = was;
    await s.stop();
    s.cleanup();
    work.cleanup();
  }
}

// The text of a log, as the API has it from its first byte.
async function wholeLog(s, id, rank) {
  const res = await fetch(`${s.url}/runs/${id}/logs?${rank === undefined ? '' : `rank=${rank}&`}offset=0`);
  return res.text();
}

it('a command run shows its command, a chart per series its script reported, and each rank\'s own log', async () => {
  const script = fs.readFileSync(TORCH_SCRIPT, 'utf8');
  await withCommands({ 'proj/ddp_fmnist.py': script }, async (s) => {
    const { status, json } = await s.api('POST', '/runs', { name: 'my-torch-script', command: ['/usr/bin/python3', 'ddp_fmnist.py', '--epochs', '2'],
      working_dir: 'proj', env: { MY_FLAG: 'on', OTHER_FLAG: 'a value' }, distributed: { world_size: 2 } });
    assert.equal(status, 201, JSON.stringify(json));
    const page = await open(`#/runs/${json.id}`);
    const run = await finished(json.id, 240000);
    assert.equal(run.status, 'succeeded', `the script ran: ${run.reason}`);
    await until(() => page.evaluate(() => document.querySelector('#run-status .badge')?.dataset.status === 'succeeded'), 'the page to show it succeeded');

    // what it runs, and none of the built-in model's summary
    assert.equal(await page.textContent('#run-command'), '/usr/bin/python3 ddp_fmnist.py --epochs 2');
    assert.equal(await page.textContent('#run-working-dir'), 'proj');
    assert.deepEqual(await page.$$eval('#run-env .env-name', (els) => els.map((e) => e.textContent)), ['MY_FLAG', 'OTHER_FLAG'], 'env: the names');
    assert.doesNotMatch(await page.textContent('#command-card'), /a value/, 'not the values');
    assert.ok(await page.isHidden('#run-summary'), 'no test summary: the script tests nothing');
    assert.ok(await page.isHidden('#checkpoints'), 'no checkpoint list: ddpd writes none for a command run');
    const facts = await page.$$eval('#run-facts dt', (dts) => dts.map((d) => d.textContent));
    assert.deepEqual(facts, ['Step loss', 'LR', 'Devices', 'Owner', 'Priority', 'Submitted', 'Duration', 'Exit'], 'no samples/s or ETA it cannot know');
    assert.match(await page.textContent('#run-progress-text'), /32 steps reported · 100%/);

    // a chart for its own series, every point of it; loss and lr on their own charts
    const own = (await s.api('GET', `/runs/${json.id}/metrics?key=grad_steps`)).json;
    assert.equal(own.count, 32, '16 steps an epoch, 2 epochs');
    await until(() => page.evaluate(() => document.querySelector('[data-series-key="grad_steps"]')?.dataset.points === '32'), 'the grad_steps chart');
    assert.ok(await page.$('[data-series-key="grad_steps"] canvas'), 'drawn by uPlot');
    assert.equal(await page.getAttribute('#series-charts', 'data-keys'), 'grad_steps', 'one chart per series beyond loss and lr (samples_per_s: none reported)');
    await until(() => page.evaluate(() => document.getElementById('loss-chart').dataset.points === '32'), 'the loss chart');

    // the log: all ranks, then rank 1's own lines only, then rank 0's
    const all = await wholeLog(s, json.id);
    await until(async () => (await page.textContent('#run-log')) === all, 'the run\'s whole log on the page');
    assert.match(all, /\[rank 1\] rank 1: epoch 1 done/);
    assert.deepEqual(await page.$$eval('#log-rank option', (os) => os.map((o) => o.textContent)), ['All ranks', 'Rank 0', 'Rank 1']);
    await page.selectOption('#log-rank', '1');
    const one = await wholeLog(s, json.id, 1);
    await until(async () => (await page.textContent('#run-log')) === one, 'rank 1\'s log on the page');
    const [banner, ...lines] = one.trim().split('\n');
    assert.match(banner, /^--- ddp-run: attempt 0 starting \(TORCHELASTIC_RESTART_COUNT=0; .*\); program \/\S+; working directory \S+\/proj ---$/,
      'the attempt\'s banner first: the interpreter found and the working directory');
    assert.deepEqual(lines, ['rank 1: epoch 0 done, 16 steps', 'rank 1: epoch 1 done, 16 steps'], 'rank 1 wrote two lines');
    await shots(page, 'command-run');
    await page.selectOption('#log-rank', '0');
    await until(async () => /final loss/.test(await page.textContent('#run-log')), 'rank 0\'s log');
    assert.doesNotMatch(await page.textContent('#run-log'), /rank 1|\[rank|launcher/, 'rank 0\'s own lines only');
    await page.selectOption('#log-rank', 'all');
    await until(async () => (await page.textContent('#run-log')) === all, 'all ranks again');

    // argv with spaces and quotes reads back as a shell would take it
    const joined = await page.evaluate(async () => (await import('/ui/command_view.js')).shellJoin(['python3', 'train.py', '--name', 'two words', "it's", '', '--lr=1e-3']));
    assert.equal(joined, "python3 train.py --name 'two words' 'it'\\''s' '' --lr=1e-3");
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

// Reports 5 steps and 5 log lines a rank, then waits for a file "go" in its directory,
// then 5 more: what the page shows while it waits is what it had live.
const GATED = `import os, time
import ddpd
rank = int(os.environ["RANK"])
def steps(first, word):
    for s in range(first, first + 5):
        print(f"rank {rank}: {word} {s}", flush=True)
        ddpd.log_step(s, loss=1.0 / s, grad_norm=s * 0.5)
steps(1, "before")
while not os.path.exists("go"):
    time.sleep(0.05)
steps(6, "after")
`;

it('a live command run: its log is read on from where it was, its series chart grows', async () => {
  await withCommands({ 'gate/gated.py': GATED }, async (s, work) => {
    const { json } = await s.api('POST', '/runs', { name: 'gated', command: ['/usr/bin/python3', 'gated.py'], working_dir: 'gate', distributed: { world_size: 2 } });
    const page = await open('#/');
    const reads = [];
    page.on('request', (r) => { if (r.url().includes(`/runs/${json.id}/logs`)) reads.push(new URL(r.url()).search); });
    await page.goto(`${s.url}/#/runs/${json.id}`);
    await until(() => page.evaluate(() => document.querySelector('[data-series-key="grad_norm"]')?.dataset.points === '5'), 'the first 5 points, live', 120000);
    await until(async () => /\[rank 1\] rank 1: before 5/.test(await page.textContent('#run-log')), 'the first lines, live');
    assert.equal((await s.api('GET', `/runs/${json.id}`)).json.status, 'running', 'the script is waiting');
    fs.writeFileSync(path.join(work.root, 'gate', 'go'), '');
    await finished(json.id, 120000);
    await until(() => page.evaluate(() => document.querySelector('[data-series-key="grad_norm"]')?.dataset.points === '10'), 'the chart grew to 10 points');
    const all = await wholeLog(s, json.id);
    await until(async () => (await page.textContent('#run-log')) === all, 'the page\'s log is the whole log, once');
    for (const r of [0, 1]) for (const w of ['before 1', 'after 10']) assert.equal(all.split(`[rank ${r}] rank ${r}: ${w}\n`).length, 2, `rank ${r}'s "${w}" once`);
    // read on from an offset, the one each answer gave: after the first (the tail), offsets only, never backwards
    assert.match(reads[0], /tail=/, `the first read takes the tail: ${reads[0]}`);
    const offsets = reads.slice(1).map((q) => Number(new URLSearchParams(q).get('offset')));
    assert.ok(offsets.length >= 2 && offsets.every((o) => Number.isInteger(o)), `later reads ask for an offset: ${reads.join(' ')}`);
    assert.ok(offsets.every((o, i) => i === 0 || o >= offsets[i - 1]), `offsets never go back: ${offsets.join(' ')}`);
    assert.equal(Number(await page.getAttribute('#run-log', 'data-offset')), Buffer.byteLength(all), 'the page read up to the end of the log');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

// Attempt 0 reports steps 1 to 5, waits for a file "go", then rank 1 gives up (status
// 3); attempt 1 (TORCHELASTIC_RESTART_COUNT=1, from its "snapshot" at step 2) does
// steps 3 to 5 again with other values and ends.
const RESTARTED = `import os, sys, time
import ddpd
rank, attempt = int(os.environ["RANK"]), int(os.environ["TORCHELASTIC_RESTART_COUNT"])
if attempt == 0:
    for s in range(1, 6):
        ddpd.log_step(s, loss=1.0 / s, grad_norm=float(s))
    while not os.path.exists("go"):
        time.sleep(0.05)
    if rank == 1:
        print("rank 1 gives up on attempt 0", flush=True)
        sys.exit(3)
    time.sleep(60)
for s in range(3, 6):
    ddpd.log_step(s, loss=10.0 + s, grad_norm=100.0 + s)
print(f"rank {rank} done on attempt {attempt}", flush=True)
`;

it('a restarted command run: its attempts listed, a marker where the restart began, the steps done again replacing theirs live', async () => {
  await withCommands({ 'again/restarted.py': RESTARTED }, async (s, work) => {
    const { json } = await s.api('POST', '/runs', { name: 'restarted', command: ['/usr/bin/python3', 'restarted.py'], working_dir: 'again',
      distributed: { world_size: 2, max_restarts: 1 } });
    const page = await open(`#/runs/${json.id}`);
    await until(() => page.evaluate(() => document.querySelector('[data-series-key="grad_norm"]')?.dataset.points === '5'), 'the first 5 points, live', 120000);
    assert.ok(await page.isVisible('#attempts-card'), 'restarts are allowed: the attempts card is shown');
    assert.equal(await page.getAttribute('#loss-chart', 'data-attempt-marks'), '', 'no restart yet, no marker');
    fs.writeFileSync(path.join(work.root, 'again', 'go'), '');
    const run = await finished(json.id, 120000);
    assert.equal(run.status, 'succeeded', `restarted once, it succeeds: ${run.reason}`);
    assert.deepEqual(run.attempts.map((a) => [a.attempt, a.status, a.failing_rank, a.first_step]), [[0, 'failed', 1, null], [1, 'succeeded', null, 3]]);

    // the steps done twice: one point each, the second attempt's, on the page that watched them live
    await until(() => page.evaluate(() => document.getElementById('loss-chart').dataset.last === '15'), 'the loss chart\'s step 5: attempt 1\'s', 60000);
    assert.equal(await page.getAttribute('#loss-chart', 'data-points'), '5', 'one point per step');
    await until(() => page.evaluate(() => document.querySelector('[data-series-key="grad_norm"]')?.dataset.last === '105'), 'grad_norm\'s step 5: attempt 1\'s', 60000);
    assert.equal(await page.getAttribute('[data-series-key="grad_norm"]', 'data-points'), '5', 'one point per step');
    // where the restart began, on each chart
    await until(async () => (await page.getAttribute('#loss-chart', 'data-attempt-marks')) === '3', 'the loss chart\'s marker at step 3');
    assert.equal(await page.getAttribute('[data-series-key="grad_norm"]', 'data-attempt-marks'), '3');

    // the attempts, each with how it ended
    await until(async () => (await page.getAttribute('#attempts-table tbody', 'data-attempts')) === '2', 'two attempts listed');
    const rows = await page.$$eval('#attempts-table tbody tr', (trs) => trs.map((tr) => [tr.dataset.attempt, tr.dataset.status,
      tr.querySelector('.failing-rank').textContent, tr.querySelector('.attempt-why').textContent, tr.cells[0].textContent]));
    assert.deepEqual(rows.map((r) => r[4]), ['0', '1'], 'numbered as the API, ddpctl and the rank log number them, from 0');
    assert.deepEqual(rows.map((r) => r.slice(0, 3)), [['0', 'failed', '1'], ['1', 'succeeded', '—']]);
    assert.match(rows[0][3], /rank 1 exited with status 3/);
    assert.match(rows[0][3], /rank 1 gives up on attempt 0/, 'its last line');
    assert.match(await page.textContent('#attempts-note'), /Restart count 1; distributed\.max_restarts is 1/);
    const href = await page.getAttribute('#attempts-table tr[data-attempt="0"] .attempt-logs a:nth-of-type(2)', 'href');
    assert.equal(href, `/runs/${json.id}/logs?rank=1&attempt=0`);
    const part = await (await fetch(`${s.url}${href}`)).text();
    assert.match(part, /^--- ddp-run: attempt 0 starting \(TORCHELASTIC_RESTART_COUNT=0; the last allowed is attempt 1\); program \S+; working directory \S+ ---\nrank 1 gives up on attempt 0\n$/,
      'the link: rank 1\'s output in attempt 0 alone, after its banner');
    await shots(page, 'command-run-restarted');
    assert.deepEqual(page.errors, []);
    await page.close();
  });
});

it('with a token, the dashboard sends the one the user enters', async () => {
  const guarded = new Server(['--token', 'web-s3cret']);
  await guarded.start();
  try {
    const page = await suite.browser.newPage();
    page.errors = [];
    page.on('pageerror', (e) => page.errors.push(e.message));
    await page.goto(`${guarded.url}/#/submit`);
    await page.waitForSelector('#config-text[data-ready]');
    await page.fill('#config-text', JSON.stringify(fmnist({ name: 'with-token', train: { epochs: 1 } }), null, 2));
    await page.click('#submit-run');
    await until(async () => /needs a token/.test(await page.textContent('#submit-status')), 'the token refusal');
    await page.click('#token-button');
    await page.fill('#token-input', 'web-s3cret');
    await page.click('#token-form button[type=submit]');
    assert.equal(await page.evaluate(() => localStorage.getItem('ddpd.token')), 'web-s3cret', 'kept in localStorage');
    await page.click('#submit-run');
    await page.waitForURL(/#\/runs\/\d+$/, { timeout: 30000 });
    await until(() => page.evaluate(() => document.querySelector('#run-status .badge')?.dataset.status === 'succeeded'),
      'the run to succeed', 120000);
    await page.evaluate(() => localStorage.removeItem('ddpd.token'));
    assert.deepEqual(page.errors, []);
    await page.close();
  } finally {
    await guarded.stop();
    guarded.cleanup();
  }
});

it('with users, the dashboard signs in with a token before any page, follows live, shows each run\'s owner and "mine", and signs out', async () => {
  const shared = new Server();
  const tokens = {};
  const userCmd = (...args) => {
    const r = spawnSync(DDPD, ['user', ...args, '--state-dir', shared.stateDir], { encoding: 'utf8' });
    assert.equal(r.status, 0, `ddpd user ${args.join(' ')}: ${r.stderr}`);
    return r.stdout.trim().split('\n').pop();
  };
  for (const name of ['alice', 'bob']) tokens[name] = userCmd('add', name);
  await shared.start();
  const as = async (token, method, p, body) => {
    const res = await fetch(shared.url + p, { method, body: body ? JSON.stringify(body) : undefined,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) } });
    return res.status === 204 ? null : res.json();
  };
  const ids = [];
  try {
    const hers = (await as(tokens.alice, 'POST', '/runs', fmnist({ name: 'alices', train: { epochs: 1 } }))).id;
    const his = (await as(tokens.bob, 'POST', '/runs', fmnist({ name: 'bobs', train: { epochs: 1 } }))).id;
    ids.push([hers, 'alice'], [his, 'bob']);
    const page = await suite.browser.newPage();
    await page.setViewportSize({ width: 1280, height: 900 });
    page.errors = [];
    page.on('pageerror', (e) => page.errors.push(e.message));
    // without a token: the sign-in page, and nothing of the runs
    await page.goto(`${shared.url}/#/`);
    await page.waitForSelector('#signin-form');
    assert.match(await page.textContent('#signin-hint'), /ddpd user add/);
    assert.equal(await page.$('tr[data-run]'), null, 'no run is shown before signing in');
    assert.doesNotMatch(await page.textContent('main'), /alices|bobs/);
    await shots(page, 'signin');
    await page.goto(`${shared.url}/#/runs/${hers}`);
    await page.waitForSelector('#signin-form');
    assert.equal(await page.$('#run-facts'), null, 'a run\'s page asks for the token too');
    await page.fill('#signin-token', 'f'.repeat(64));
    await page.click('#signin-form button[type=submit]');
    await until(() => page.isVisible('#signin-error'), 'a token nobody has is said so');
    assert.match(await page.textContent('#signin-error'), /not a token this server knows/);
    // signed in as alice: the page she asked for, then the runs with their owners
    await page.fill('#signin-token', tokens.alice);
    await page.click('#signin-form button[type=submit]');
    await until(async () => /Owner\s*alice/.test((await page.textContent('#run-facts').catch(() => '')) || ''), 'her run\'s page');
    await until(async () => /Token ✓ alice/.test(await page.textContent('#token-button')), 'the button to name alice');
    assert.ok(await page.isVisible('#sign-out'), 'a way to sign out');
    await page.goto(`${shared.url}/#/`);
    await page.waitForSelector(`tr[data-run="${his}"]`);
    const owner = (id) => page.textContent(`tr[data-run="${id}"] td[data-label="Owner"]`);
    assert.equal((await owner(hers)).trim(), 'alice');
    assert.equal((await owner(his)).trim(), 'bob');
    // live updates with the token (the event stream takes it as ?access_token=)
    await until(() => page.evaluate(() => document.getElementById('conn').textContent === 'live'), 'live');
    const third = (await as(tokens.bob, 'POST', '/runs', fmnist({ name: 'bobs-live', train: { epochs: 1 } }))).id;
    ids.push([third, 'bob']);
    await until(() => page.$(`tr[data-run="${third}"]`), 'a run submitted now, without a reload', 60000);
    assert.ok(await page.isVisible('#mine-label'), 'a user\'s token: the "Mine" filter is there');
    await page.check('#mine-filter');
    // the filter asks the server again: bob's rows leave once its answer is in
    await until(() => page.isHidden(`tr[data-run="${his}"]`), 'mine: bob\'s run hidden');
    assert.ok(await page.isVisible(`tr[data-run="${hers}"]`), 'mine: alice\'s run stays');
    await screenshot(page, 'runs-mine-1280');
    // the token kept: a reload signs in by itself, and the filter holds
    await page.reload();
    await page.waitForSelector(`tr[data-run="${hers}"]`);
    await until(async () => /alice/.test(await page.textContent('#token-button')), 'the token kept');
    assert.equal(await page.$('#signin-form'), null, 'no sign-in after a reload');
    await until(() => page.isHidden(`tr[data-run="${his}"]`), 'the filter kept after a reload');
    await page.uncheck('#mine-filter');
    // her token replaced mid-session: the next read brings the sign-in back
    const renewed = userCmd('token', 'alice');
    await until(async () => (await fetch(`${shared.url}/runs`, { headers: { Authorization: `Bearer ${tokens.alice}` } })).status === 401,
      'the server to refuse her old token');
    tokens.alice = renewed;
    await page.evaluate(() => { location.hash = '#/nodes'; });
    await page.waitForSelector('#signin-form');
    assert.match(await page.textContent('#signin-hint'), /no longer accepted/);
    await page.fill('#signin-token', renewed);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#nodes, main h1');
    assert.equal(await page.$('#signin-form'), null, 'signed in again with the new token');
    // signing out forgets the token and shows the sign-in
    await page.click('#sign-out');
    await page.waitForSelector('#signin-form');
    assert.equal(await page.evaluate(() => localStorage.getItem('ddpd.token')), null, 'the token is forgotten');
    await page.evaluate(() => { localStorage.removeItem('ddpd.mine'); localStorage.removeItem('ddpd.token-asked'); });
    assert.deepEqual(page.errors, []);
    await page.close();
  } finally {
    for (const [id, owner] of ids) await as(tokens[owner], 'POST', `/runs/${id}/cancel`).catch(() => {});
    for (const [id] of ids) {
      await until(async () => ['succeeded', 'failed', 'canceled'].includes((await as(tokens.bob, 'GET', `/runs/${id}`)).status),
        `run ${id} to end`, 120000).catch(() => {});
    }
    await shared.stop();
    shared.cleanup();
  }
});

it('a lost connection is said plainly, and the page recovers', async () => {
  const page = await open('#/');
  await until(() => page.evaluate(() => document.getElementById('conn').textContent === 'live'), 'live');
  assert.ok(await page.isHidden('#banner'));
  await suite.server.stop();
  await until(() => page.isVisible('#banner'), 'the banner', 30000);
  assert.match(await page.textContent('#banner'), /Lost the connection to ddpd/);
  assert.equal(await page.textContent('#conn'), 'offline');
  await shots(page, 'connection-lost');
  await suite.server.start(); // same port, same state
  await until(() => page.isHidden('#banner'), 'the banner to go', 60000);
  assert.equal(await page.textContent('#conn'), 'live');
  // After reconnecting, a run submitted now appears without a reload.
  const { json } = await suite.server.api('POST', '/runs', fmnist({ name: 'after-reconnect', train: { epochs: 1 } }));
  await until(() => page.$(`tr[data-run="${json.id}"]`), 'the new run in the list', 60000);
  await page.close();
});
