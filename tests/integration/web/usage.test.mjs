// The dashboard's usage page (#/usage) in headless Chromium against a real ddpd with two
// users (alice, bob) whose real runs hold devices (the real trainer on Fashion-MNIST,
// a checkpoint each epoch; one of alice's canceled and resumed, so that some is lost; and
// bob's command run that reports nothing: unknown time).
// Each bar's phases (startup, productive, checkpoint, lost, idle, unknown) are
// GET /usage?by=day's numbers for that day and user, and each segment's width is its
// share of the longest bar; each user is listed with GET /usage?by=user's goodput, and
// the box's goodput is shown; the from/to range asks the API for those days (an empty
// range says so, a reversed one is refused in words, one the server refuses says
// why); the nav links the page. Screenshots at 1280 and 390 px go to
// $DDPD_TEST_ARTIFACTS.
//
// Run by ctest: node --test tests/integration/web/usage.test.mjs (DDPD_BIN, DDP_TRAINER set).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { browserSuite, commandWorkRoot, DDPD, fmnist, screenshot, Server, until } from './ddpd_server.mjs';

const suite = browserSuite('usage', 300000);
const { it, open } = suite;
const PHASES = ['startup', 'productive', 'checkpoint', 'lost', 'idle', 'unknown'];
const utcDay = (back = 0) => new Date(Date.now() - back * 86400000).toISOString().slice(0, 10);
const pct = (v) => (v === null ? '—' : `${(v * 100).toFixed(1)}%`);

// What the page draws: per day and user, its bar's phases (data-seconds, as numbers) and
// the segments' widths over the track's; per user, the goodput text.
function readPage(page) {
  return page.evaluate(() => {
    const bars = [...document.querySelectorAll('#usage-days .usage-bar')].map((b) => {
      const track = b.getBoundingClientRect().width;
      return {
        day: b.dataset.day, user: b.dataset.user, held: Number(b.dataset.held), track,
        segs: [...b.querySelectorAll('.seg')].map((s) => ({
          phase: s.dataset.phase, seconds: Number(s.dataset.seconds), width: s.getBoundingClientRect().width,
        })),
      };
    });
    const users = [...document.querySelectorAll('#usage-users tr.usage-user')].map((tr) => ({
      user: tr.dataset.user, goodput: tr.querySelector('.goodput').textContent.trim(),
      phases: Object.fromEntries([...tr.querySelectorAll('.seg')].map((s) => [s.dataset.phase, Number(s.dataset.seconds)])),
    }));
    const box = document.getElementById('usage-box-goodput');
    return { bars, users, boxGoodput: box ? box.firstChild.textContent.trim() : null };
  });
}

// Whether the page shows exactly the API's by=day and by=user answers; else what differs.
function differences(seen, byDay, byUser) {
  const out = [];
  if (seen.bars.length !== byDay.groups.length) out.push(`${seen.bars.length} bars for ${byDay.groups.length} day/user groups`);
  const scale = Math.max(...byDay.groups.map((g) => g.held_device_s));
  for (const g of byDay.groups) {
    const who = g.user ?? '(no owner)';
    const bar = seen.bars.find((b) => b.day === g.day && b.user === who);
    if (!bar) { out.push(`no bar for ${who} on ${g.day}`); continue; }
    if (bar.held !== g.held_device_s) out.push(`${who} ${g.day}: the bar holds ${bar.held}, GET /usage ${g.held_device_s}`);
    const phases = bar.segs.map((s) => s.phase);
    if (phases.join() !== PHASES.join()) out.push(`${who} ${g.day}: segments ${phases} (wanted ${PHASES})`);
    for (const p of PHASES) {
      const s = bar.segs.find((x) => x.phase === p);
      if (!s) continue;
      if (s.seconds !== g.phases[p]) out.push(`${who} ${g.day} ${p}: the bar says ${s.seconds}, GET /usage ${g.phases[p]}`);
      const want = (bar.track * g.phases[p]) / scale;
      if (Math.abs(s.width - want) > 1.5) out.push(`${who} ${g.day} ${p}: ${s.width.toFixed(1)} px wide, wanted ${want.toFixed(1)}`);
    }
  }
  if (seen.users.length !== byUser.groups.length) out.push(`${seen.users.length} user rows for ${byUser.groups.length} users`);
  for (const g of byUser.groups) {
    const row = seen.users.find((u) => u.user === (g.user ?? '(no owner)'));
    if (!row) { out.push(`no row for user ${g.user}`); continue; }
    if (row.goodput !== pct(g.goodput)) out.push(`${g.user}'s goodput reads ${row.goodput}, GET /usage ${pct(g.goodput)}`);
    for (const p of PHASES) if (row.phases[p] !== g.phases[p]) out.push(`${g.user}'s ${p}: ${row.phases[p]}, GET /usage ${g.phases[p]}`);
  }
  if (seen.boxGoodput !== pct(byUser.box.goodput)) out.push(`the box's goodput reads ${seen.boxGoodput}, GET /usage ${pct(byUser.box.goodput)}`);
  return out;
}

it('no run yet: the page says no device time was held, with the last 7 UTC days as its range; the nav links it', async () => {
  const page = await open('#/');
  await page.click('nav a[href="#/usage"]');
  await page.waitForSelector('#usage-empty:not([hidden])');
  assert.equal(await page.locator('nav a.active').textContent(), 'Usage', 'the nav marks Usage');
  assert.equal(await page.inputValue('#usage-from'), utcDay(6));
  assert.equal(await page.inputValue('#usage-to'), utcDay(0));
  assert.match(await page.textContent('#usage-empty'), /No device time in this range/);
  // a range typed into the address that is no day: the server's refusal, in its words
  await page.goto(`${suite.server.url}/#/usage?from=someday&to=${utcDay(0)}`);
  await until(async () => /Cannot read the usage: .*from/.test(await page.textContent('#usage-status')),
    'the page to say why the range is refused', 10000, 100);
  assert.deepEqual(page.errors, [], 'no script errors');
  await page.close();
});

it('two users\' runs: a stacked bar per user and day with GET /usage\'s phases, goodput per user and for the box, a range', async () => {
  // command runs too (bob's reports nothing: its time is unknown); with users, a command
  // run as the server's own user is refused unless the operator says so knowingly
  const work = await commandWorkRoot();
  const shared = new Server(work.args.includes('--unsafe-commands-as-server') ? work.args : [...work.args, '--unsafe-commands-as-server']);
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
  try {
    // alice: one run of 1 rank; bob: one of 2 ranks (twice the devices held)
    const small = (name, world) => fmnist({ name, model: { hidden: [32] }, data: { limit: 2000, test_limit: 200 },
      train: { epochs: 2, batch_size: 32 }, distributed: { world_size: world } });
    const runs = [];
    for (const [who, world] of [['alice', 1], ['bob', 2]]) {
      const r = await as(tokens[who], 'POST', '/runs', small(`${who}-usage`, world));
      assert.equal(r.status, 201, `${who}'s run: ${JSON.stringify(r.json)}`);
      runs.push(r.json.id);
    }
    // bob's command run that never reports a step: its device time is unknown
    const quiet = await as(tokens.bob, 'POST', '/runs', { name: 'bob-quiet', command: ['/bin/sleep', '1'], distributed: { world_size: 1 } });
    assert.equal(quiet.status, 201, `bob's command run: ${JSON.stringify(quiet.json)}`);
    runs.push(quiet.json.id);
    // alice's long run, canceled well past its newest checkpoint and resumed: the resume
    // goes back to that checkpoint, and the steps since it are lost time; canceled again
    // once that is counted
    const long = await as(tokens.alice, 'POST', '/runs', fmnist({ name: 'alice-resumed', model: { hidden: [32] },
      data: { limit: 60000, test_limit: 200 }, train: { epochs: 100, batch_size: 32 }, distributed: { world_size: 1 } }));
    assert.equal(long.status, 201, `alice's long run: ${JSON.stringify(long.json)}`);
    const lid = long.json.id;
    await until(async () => {
      const r = (await as(tokens.alice, 'GET', `/runs/${lid}`)).json;
      const ck = r.checkpoints[r.checkpoints.length - 1];
      return ck && r.progress.global_step - ck.global_step >= 300;
    }, 'alice\'s long run 300 steps past a checkpoint', 120000, 50);
    assert.equal((await as(tokens.alice, 'POST', `/runs/${lid}/cancel`)).status, 202, 'cancel');
    await until(async () => (await as(tokens.alice, 'GET', `/runs/${lid}`)).json.status === 'canceled', 'the long run canceled', 60000, 200);
    const resumed = await as(tokens.alice, 'POST', `/runs/${lid}/resume`);
    assert.equal(resumed.status, 202, `resume: ${JSON.stringify(resumed.json)}`);
    await until(async () => ((await as(tokens.alice, 'GET', '/usage?by=run')).json.groups.find((g) => g.run === lid) || { phases: {} }).phases.lost > 0,
      'the resumed run\'s lost time to be counted', 120000, 200);
    assert.equal((await as(tokens.alice, 'POST', `/runs/${lid}/cancel`)).status, 202, 'cancel again');
    await until(async () => (await as(tokens.alice, 'GET', `/runs/${lid}`)).json.status === 'canceled', 'the long run canceled again', 60000, 200);
    for (const id of runs) {
      await until(async () => (await as(tokens.alice, 'GET', `/runs/${id}`)).json.status === 'succeeded', `run ${id} to succeed`, 240000, 300);
    }

    const page = await suite.browser.newPage();
    await page.setViewportSize({ width: 1280, height: 900 });
    page.errors = [];
    page.on('pageerror', (e) => page.errors.push(e.message));
    await page.goto(`${shared.url}/#/usage`);
    await page.waitForSelector('#signin-form');
    await page.fill('#signin-token', tokens.alice);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#usage-content:not([hidden])', { timeout: 30000 });

    // the page against the API over the same range (read again until they agree: a
    // run's last piece of time is counted as its last event comes)
    const range = `from=${await page.inputValue('#usage-from')}&to=${await page.inputValue('#usage-to')}`;
    let last = [];
    const agree = async () => {
      const byDay = (await as(tokens.alice, 'GET', `/usage?by=day&${range}`)).json;
      const byUser = (await as(tokens.alice, 'GET', `/usage?by=user&${range}`)).json;
      last = differences(await readPage(page), byDay, byUser);
      return last.length === 0 ? { byDay, byUser } : false;
    };
    let api;
    try { api = await until(agree, 'the page to show GET /usage\'s numbers', 20000, 500); } catch (e) {
      throw new Error(`${e.message}\n${last.join('\n')}`);
    }
    const users = api.byUser.groups.map((g) => g.user).sort();
    assert.deepEqual(users, ['alice', 'bob'], 'each user who ran is a group');
    assert.ok(api.byUser.groups.find((g) => g.user === 'bob').phases.unknown > 0, 'bob\'s quiet run is unknown time');
    assert.ok(api.byUser.groups.find((g) => g.user === 'alice').phases.lost > 0, 'alice\'s resumed run has lost time');
    for (const g of api.byUser.groups) {
      assert.ok(g.phases.productive > 0 && g.phases.startup > 0, `${g.user} has startup and productive time: ${JSON.stringify(g.phases)}`);
      assert.ok(g.goodput > 0 && g.goodput < 1, `${g.user}'s goodput is a share: ${g.goodput}`);
    }
    const seen = await readPage(page);
    assert.deepEqual(seen.users.map((u) => u.user).sort(), ['alice', 'bob'], 'each user is shown');
    assert.ok(seen.bars.every((b) => b.day === utcDay(0)), 'the runs\' time is today\'s (UTC)');
    assert.match(await page.textContent('#usage-box'), /Goodput\s*\d+\.\d%/, 'the box\'s goodput is shown');
    await screenshot(page, 'usage-1280');

    // a phone: nothing wider than the screen, the bars still there
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(500);
    const { scroll, win } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, win: window.innerWidth }));
    assert.ok(scroll <= win + 1, `the usage page fits 390 px: ${scroll}`);
    assert.equal(differences(await readPage(page), api.byDay, api.byUser).join('\n'), '', 'the same bars at 390 px');
    await screenshot(page, 'usage-390');
    await page.setViewportSize({ width: 1280, height: 900 });

    // the range: a reversed one is refused in words, an empty one says so, and
    // today's alone asks the API for today
    await page.fill('#usage-from', utcDay(0));
    await page.fill('#usage-to', utcDay(1));
    await page.click('#usage-range button[type=submit]');
    await page.waitForSelector('#usage-range-error:not([hidden])');
    assert.match(await page.textContent('#usage-range-error'), /is after To/);
    await page.fill('#usage-from', utcDay(3));
    await page.fill('#usage-to', utcDay(1));
    await page.click('#usage-range button[type=submit]');
    await page.waitForSelector('#usage-empty:not([hidden])');
    assert.ok(page.url().endsWith(`#/usage?from=${utcDay(3)}&to=${utcDay(1)}`), `the range is in the address: ${page.url()}`);
    assert.match(await page.textContent('#usage-empty'), new RegExp(`from ${utcDay(3)} to ${utcDay(1)}`));
    await page.fill('#usage-from', utcDay(0));
    await page.fill('#usage-to', utcDay(0));
    await page.click('#usage-range button[type=submit]');
    await page.waitForSelector('#usage-content:not([hidden])');
    const today = `from=${utcDay(0)}&to=${utcDay(0)}`;
    const byDay = (await as(tokens.alice, 'GET', `/usage?by=day&${today}`)).json;
    const byUser = (await as(tokens.alice, 'GET', `/usage?by=user&${today}`)).json;
    assert.equal(differences(await readPage(page), byDay, byUser).join('\n'), '', 'today\'s range shows today\'s numbers');
    assert.deepEqual(page.errors, [], 'no script errors');
    await page.close();
  } finally {
    await shared.stop();
    shared.cleanup();
    work.cleanup();
  }
});
