// The dashboard in headless Chromium (Debian's, driven by playwright-core) against a
// real ddpd with the real trainer: the empty list; a run submitted from the form
// that moves live to succeeded, with the loss curve drawn and the LR's step decay
// visible, while the runs list (another tab) follows it; cancel; a bad config's
// field error next to its field; a failed run's reason; the connection lost and
// found again. Screenshots at 1280 and 390 px go to $DDPD_TEST_ARTIFACTS.
//
// Run by ctest: node --test tests/web/dashboard.test.mjs (DDPD_BIN, DDP_TRAINER set).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { closeBrowser, fmnist, launchBrowser, screenshot, Server, until } from './ddpd_server.mjs';

let server, browser;
let passed = 0, failed = 0;
const TIMEOUT = 240000;

// Each case counts toward the closing "N passed, N failed" line.
function it(name, fn) {
  test(name, { timeout: TIMEOUT }, async () => {
    try { await fn(); passed++; } catch (e) {
      failed++;
      if (server) process.stderr.write(`---- ddpd log ----\n${server.log.slice(-4000)}\n`);
      throw e;
    }
  });
}

before(async () => {
  server = new Server();
  await server.start();
  browser = await launchBrowser();
});

after(async () => {
  if (browser) await closeBrowser(browser);
  if (server) { await server.stop(); server.cleanup(); }
  console.log(`dashboard: ${passed} passed, ${failed} failed`);
});

async function open(hash, width = 1280) {
  const page = await browser.newPage();
  await page.setViewportSize({ width, height: 900 });
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e.message));
  page.on('dialog', (d) => d.accept());
  await page.goto(`${server.url}/${hash}`);
  return page;
}

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

it('the runs list says plainly that there are no runs', async () => {
  const page = await open('#/');
  await page.waitForSelector('#runs-empty:not([hidden])');
  assert.match(await page.textContent('#runs-empty'), /No runs yet/);
  await until(() => page.evaluate(() => document.getElementById('conn').textContent === 'live'), 'the live indicator');
  await shots(page, 'runs-empty');
  assert.deepEqual(page.errors, []);
  await page.close();
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
  const run = (await server.api('GET', `/runs/${id}`)).json;
  await until(() => page.evaluate((n) => Number(document.getElementById('loss-chart').dataset.points) === n, run.progress.total_steps),
    'every step on the loss chart');
  assert.ok(await page.$('#loss-chart canvas'), 'the loss chart is drawn by uPlot');
  await until(() => page.evaluate(() => document.getElementById('lr-chart').dataset.points === '5'), 'the five epochs');
  assert.equal(await page.getAttribute('#lr-chart', 'data-distinct-lr'), '3', 'the LR steps down twice in 5 epochs (every 2)');
  const lrs = await page.$$eval('#epochs-table tbody td.lr', (tds) => tds.map((td) => Number(td.textContent)));
  assert.deepEqual(lrs.map((v) => v.toPrecision(2)), ['0.0010', '0.0010', '0.00030', '0.00030', '0.000090'], 'the epochs table shows the decay');
  assert.ok(await page.$('#eval-chart canvas'), 'test loss and accuracy are drawn');
  assert.equal(await page.$$eval('#ranks .rank', (r) => r.length), 2, 'a tile per rank');
  assert.match(await page.textContent('#run-log'), /run succeeded/);
  assert.match(await page.textContent('#run-config'), /"from-the-form"/);

  // The chart's controls: log scale, smoothing, x by epoch.
  await page.check('#opt-log');
  await page.selectOption('#opt-x', 'epoch');
  await page.fill('#opt-smooth', '0.9');
  await page.waitForTimeout(300);
  assert.match(await page.textContent('#loss-chart'), /epoch/, 'the x axis is in epochs');
  await page.uncheck('#opt-log');
  await page.selectOption('#opt-x', 'step');
  await shots(page, 'run-succeeded');
  assert.deepEqual(page.errors, []);

  // The list followed it without a reload.
  await until(() => list.evaluate((n) => document.querySelector(`tr[data-run="${n}"] .badge`)?.dataset.status === 'succeeded', id),
    'the runs list to show it succeeded');
  await until(() => list.evaluate((n) => Number(document.querySelector(`tr[data-run="${n}"] svg.spark`)?.dataset.points) > 10, id),
    'its loss sparkline');
  assert.match(await list.textContent(`tr[data-run="${id}"]`), /cpu:0, cpu:1/);
  await shots(list, 'runs-list');
  assert.deepEqual(list.errors, []);
  await list.close();
  await page.close();
});

it('a bad config shows the server\'s error next to the field it names', async () => {
  const before_ = (await server.api('GET', '/runs')).json.runs.length;
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
  // At 390 px it sits just under its line.
  await page.setViewportSize({ width: 390, height: 844 });
  const area2 = await (await page.$('#config-text')).boundingBox();
  const box2 = await err.boundingBox();
  assert.ok(Math.abs(box2.y - (area2.y + 8 + (line + 1) * 20)) < 12, 'under its line at 390 px');
  assert.equal((await server.api('GET', '/runs')).json.runs.length, before_, 'nothing was submitted');
  assert.deepEqual(page.errors, []);
  await page.close();
});

it('a run is canceled from its page', async () => {
  const { status, json } = await server.api('POST', '/runs', fmnist({ name: 'to-cancel', train: { epochs: 200 } }));
  assert.equal(status, 201);
  const page = await open(`#/runs/${json.id}`);
  await until(() => page.evaluate(() => Number(document.getElementById('run-progress').dataset.fraction) > 0),
    'the run to make progress', 120000);
  await page.click('#cancel-run'); // the confirm() is accepted
  await until(() => page.evaluate(() => document.querySelector('#run-status .badge')?.dataset.status === 'canceled'),
    'the page to show it canceled', 60000);
  assert.match(await page.textContent('#run-reason'), /Canceled: canceled by request/);
  assert.ok(await page.isHidden('#cancel-run'), 'no cancel button on a finished run');
  await shots(page, 'run-canceled');
  assert.deepEqual(page.errors, []);
  await page.close();
});

it('a failed run shows its reason plainly', async () => {
  const cfg = fmnist({ name: 'bad-data' });
  cfg.data.train.images = 'fashion-mnist/train-labels-idx1-ubyte.gz'; // a labels file: the trainer refuses it
  const { json } = await server.api('POST', '/runs', cfg);
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

it('with a token, the dashboard sends the one the user enters', async () => {
  const guarded = new Server(['--token', 'web-s3cret']);
  await guarded.start();
  try {
    const page = await browser.newPage();
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

it('a lost connection is said plainly, and the page recovers', async () => {
  const page = await open('#/');
  await until(() => page.evaluate(() => document.getElementById('conn').textContent === 'live'), 'live');
  assert.ok(await page.isHidden('#banner'));
  await server.stop();
  await until(() => page.isVisible('#banner'), 'the banner', 30000);
  assert.match(await page.textContent('#banner'), /Lost the connection to ddpd/);
  assert.equal(await page.textContent('#conn'), 'offline');
  await shots(page, 'connection-lost');
  await server.start(); // same port, same state
  await until(() => page.isHidden('#banner'), 'the banner to go', 60000);
  assert.equal(await page.textContent('#conn'), 'live');
  // After reconnecting, a run submitted now appears without a reload.
  const { json } = await server.api('POST', '/runs', fmnist({ name: 'after-reconnect', train: { epochs: 1 } }));
  await until(() => page.$(`tr[data-run="${json.id}"]`), 'the new run in the list', 60000);
  await page.close();
});
