// The dashboard's sweep pages in headless Chromium against a real ddpd running the real
// trainer on Fashion-MNIST: a 2x2 sweep (learning rate on a log scale, by min/max
// random search, and a width by listed values) followed live from the sweeps list to
// its end; its page's trials table sorted by the metric, best first, with each trial's
// parameters and run; the best trial named; the trials' curves overlaid (one line per
// trial); the metric against each parameter, one point per trial, the learning rate's
// axis logarithmic; the nav; cancel of a second sweep stops its trials; a command
// run's sweep of another user shows its hidden values as <hidden>, with no scatter
// for them, while its owner sees them. Screenshots at 1280 and 390 px go to
// $DDPD_TEST_ARTIFACTS.
//
// Run by ctest: node --test tests/integration/web/sweeps.test.mjs (DDPD_BIN, DDP_TRAINER set).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { browserSuite, commandWorkRoot, DDPD, fmnist, screenshot, Server, until } from './ddpd_server.mjs';

const suite = browserSuite('sweeps', 300000);
const { it, open } = suite;

// A small base run: 1 rank, a few hundred examples, 2 epochs.
function base() {
  return fmnist({ name: 'sweep-base', model: { hidden: [32] }, data: { limit: 600, test_limit: 200 },
    train: { epochs: 2, batch_size: 32 }, distributed: { world_size: 1 } });
}

let sweepId = null;

it('a sweep followed live from the list to its page: trials sorted by the metric, the best named, curves and scatters', async () => {
  const list = await open('#/sweeps');
  await list.waitForSelector('#sweeps-empty:not([hidden])');
  const r = await suite.server.api('POST', '/sweeps', {
    name: 'lr-width', base: base(), method: 'random', seed: 7, max_trials: 4, parallel: 2,
    parameters: { 'train.optimizer.lr': { min: 0.001, max: 0.1, log: true }, 'model.hidden.0': { values: [16, 48] } },
    metric: { key: 'test_loss', goal: 'minimize' },
  });
  assert.equal(r.status, 201, `POST /sweeps: ${JSON.stringify(r.json)}`);
  sweepId = r.json.id;
  // the list learns of it live (a trial's run event), without a reload
  await list.waitForSelector(`#sweeps-table tr[data-sweep="${sweepId}"]`, { timeout: 60000 });
  assert.equal(await list.locator('nav a.active').textContent(), 'Sweeps', 'the nav marks Sweeps');
  await list.click(`#sweeps-table tr[data-sweep="${sweepId}"] a`);
  await list.waitForSelector('#sweep-trials tbody tr');

  // live to its end, on the page that is open
  await until(async () => (await list.locator('.title-line .badge').textContent()).trim().toLowerCase() === 'succeeded',
    'the sweep page shows it succeeded', 240000, 500);
  const api = (await suite.server.api('GET', `/sweeps/${sweepId}`)).json;
  assert.equal(api.trials.length, 4);
  assert.ok(api.trials.every((t) => t.status === 'succeeded'), `every trial succeeded: ${JSON.stringify(api.trials.map((t) => [t.status, t.reason]))}`);
  await until(async () => (await list.locator('#sweep-trials tbody tr').count()) === 4 &&
    (await list.$$eval('#sweep-trials tbody tr', (trs) => trs.every((tr) => tr.dataset.status === 'succeeded'))),
  'four trials, each succeeded', 20000, 200);

  // sorted by the metric, best first; the best trial named, as the API names it
  const order = await list.$$eval('#sweep-trials tbody tr', (trs) => trs.map((tr) => Number(tr.dataset.trial)));
  const wanted = api.trials.slice().sort((a, b) => a.metric - b.metric || a.trial - b.trial).map((t) => t.trial);
  assert.deepEqual(order, wanted, 'the trials table is sorted by test_loss, lowest first');
  assert.equal(order[0], api.best.trial, 'the first row is the best trial');
  assert.match(await list.locator('#sweep-best').textContent(), new RegExp(`trial ${api.best.trial}\\b`));
  const firstRow = await list.locator('#sweep-trials tbody tr').first().textContent();
  assert.ok(firstRow.includes(`#${api.best.run_id}`), `the best trial's run is linked: ${firstRow}`);
  const headers = await list.$$eval('#sweep-trials thead th', (ths) => ths.map((th) => th.textContent));
  assert.ok(headers.includes('train.optimizer.lr') && headers.includes('model.hidden.0'), `a column per parameter: ${headers}`);

  // the metric against each parameter: a point per trial, the learning rate on a log axis
  await until(async () => (await list.locator('#sweep-scatters .chart').count()) === 2, 'two scatters', 20000, 200);
  const scatters = await list.$$eval('#sweep-scatters .chart', (els) => els.map((e) => ({ ...e.dataset })));
  const lr = scatters.find((s) => s.param === 'train.optimizer.lr');
  const width = scatters.find((s) => s.param === 'model.hidden.0');
  assert.ok(lr && lr.points === '4' && lr.log === 'true', `the lr scatter: 4 points, log axis: ${JSON.stringify(lr)}`);
  assert.ok(width && width.points === '4' && width.log === 'false', `the width scatter: 4 points: ${JSON.stringify(width)}`);
  assert.ok(await list.locator('#sweep-scatters canvas').count() >= 2, 'the scatters are drawn');

  // the trials' curves overlaid: one line per trial
  await until(async () => (await list.locator('#compare-chart').getAttribute('data-series')) === '4',
    'the compare chart has a line per trial', 30000, 200);
  assert.equal(await list.locator('#compare-chart').getAttribute('data-metric'), 'test_loss', 'by the sweep\'s metric');
  await screenshot(list, 'sweep-1280');
  await list.setViewportSize({ width: 390, height: 844 });
  await list.waitForTimeout(700);
  const { scroll, win } = await list.evaluate(() => ({ scroll: document.documentElement.scrollWidth, win: window.innerWidth }));
  assert.ok(scroll <= win + 1, `the sweep page fits 390 px: ${scroll}`);
  await screenshot(list, 'sweep-390');
  assert.deepEqual(list.errors, [], 'no script errors');
  await list.close();
});

it('cancel on a sweep page stops its trials', async () => {
  const r = await suite.server.api('POST', '/sweeps', {
    name: 'to-cancel', base: fmnist({ name: 'c', data: { limit: 4000, test_limit: 200 }, train: { epochs: 20 },
      distributed: { world_size: 1 } }),
    method: 'grid', parallel: 1, parameters: { 'train.optimizer.lr': { values: [0.01, 0.02, 0.03] } },
    metric: { key: 'test_loss', goal: 'minimize' },
  });
  assert.equal(r.status, 201, JSON.stringify(r.json));
  const page = await open(`#/sweeps/${r.json.id}`);
  await page.waitForSelector('#cancel-sweep:not([hidden])');
  await page.click('#cancel-sweep');
  await until(async () => (await page.locator('.title-line .badge').textContent()).trim().toLowerCase() === 'canceled',
    'the page shows the sweep canceled', 60000, 300);
  assert.ok(await page.locator('#cancel-sweep').isHidden(), 'no cancel button on a canceled sweep');
  const api = (await suite.server.api('GET', `/sweeps/${r.json.id}`)).json;
  assert.ok(api.trials.every((t) => !['pending', 'running', 'paused'].includes(t.status)),
    `no trial is left queued or running: ${api.trials.map((t) => t.status)}`);
  assert.deepEqual(page.errors, [], 'no script errors');
  await page.close();
});

it('another user\'s command sweep: its env and placeholder values read <hidden>, no scatter of them; its owner sees them', async () => {
  const work = await commandWorkRoot();
  // with users, a command run as the server's own user is refused unless the operator
  // says so knowingly (these pages are not about the accounts)
  const args = work.args.includes('--unsafe-commands-as-server') ? work.args : [...work.args, '--unsafe-commands-as-server'];
  const shared = new Server(args);
  const userCmd = (...a) => {
    const r = spawnSync(DDPD, ['user', ...a, '--state-dir', shared.stateDir], { encoding: 'utf8' });
    assert.equal(r.status, 0, `ddpd user ${a.join(' ')}: ${r.stderr}`);
    return r.stdout.trim().split('\n').pop();
  };
  const tokens = { alice: userCmd('add', 'alice'), bob: userCmd('add', 'bob') };
  await shared.start();
  const as = async (token, method, p, body) => {
    const res = await fetch(shared.url + p, { method, body: body ? JSON.stringify(body) : undefined,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) } });
    return { status: res.status, json: await res.json() };
  };
  const secrets = ['sekrit-env-A1', 'sekrit-arg-B2', 'sekrit-lr-C3'];
  try {
    const r = await as(tokens.bob, 'POST', '/sweeps', {
      name: 'secret', parallel: 2, method: 'grid',
      base: { command: ['/usr/bin/python3', '-c', 'import ddpd, os; ddpd.log_epoch(0, test_loss=float(os.environ["N"])); ddpd.flush()',
        '--token=sekrit-arg-B2'], env: { API_KEY: 'sekrit-env-A1', N: '1' }, distributed: { world_size: 1 } },
      parameters: { 'env.LR': { values: ['sekrit-lr-C3'] }, priority: { values: [-1, 0] } },
      metric: { key: 'test_loss', goal: 'minimize' },
    });
    assert.equal(r.status, 201, `bob's command sweep: ${JSON.stringify(r.json)}`);
    const id = r.json.id;
    await until(async () => (await as(tokens.bob, 'GET', `/sweeps/${id}`)).json.status === 'succeeded', 'the sweep to succeed', 120000, 300);
    const seen = {};
    for (const who of ['alice', 'bob']) {
      const page = await suite.browser.newPage();
      await page.setViewportSize({ width: 1280, height: 900 });
      page.errors = [];
      page.on('pageerror', (e) => page.errors.push(e.message));
      // signed in as `who` on the sweep's page (signed out at the end: the next starts afresh)
      await page.goto(`${shared.url}/#/sweeps/${id}`);
      await page.waitForSelector('#signin-form');
      await page.fill('#signin-token', tokens[who]);
      await page.click('#signin-form button[type=submit]');
      await page.waitForSelector('#sweep-trials tbody tr', { timeout: 60000 });
      await until(async () => (await page.locator('#sweep-trials tbody tr').count()) === 2, 'two trials', 20000, 200);
      await until(async () => (await page.locator('#sweep-scatters .chart').count()) >= 1, 'a scatter', 20000, 200);
      seen[who] = {
        text: await page.textContent('main'),
        cells: await page.$$eval('#sweep-trials tbody td[data-label="env.LR"]', (tds) => tds.map((td) => td.textContent)),
        scatters: await page.$$eval('#sweep-scatters .chart', (els) => els.map((e) => e.dataset.param)),
        summary: await page.textContent('#sweep-summary'),
      };
      if (who === 'alice') await screenshot(page, 'sweep-hidden-1280');
      assert.deepEqual(page.errors, [], `no script errors (${who})`);
      await page.click('#sign-out');
      await page.waitForSelector('#signin-form');
      await page.close();
    }
    assert.ok(secrets.every((x) => !seen.alice.text.includes(x)), `alice's page shows no hidden value: ${secrets.filter((x) => seen.alice.text.includes(x))}`);
    assert.deepEqual(seen.alice.cells, ['<hidden>', '<hidden>'], 'her trials table reads <hidden> for env.LR');
    assert.deepEqual(seen.alice.scatters, ['priority'], 'no scatter of values she may not see, the others\' drawn');
    assert.match(seen.alice.summary, /values of env\.LR are hidden/, 'the summary says what is hidden');
    assert.deepEqual(seen.bob.cells, ['sekrit-lr-C3', 'sekrit-lr-C3'], 'bob, its owner, reads the values');
    assert.deepEqual(seen.bob.scatters.sort(), ['env.LR', 'priority'], 'and gets a scatter per parameter');
    assert.doesNotMatch(seen.bob.summary, /hidden/);
  } finally {
    await shared.stop();
    shared.cleanup();
    work.cleanup();
  }
});
