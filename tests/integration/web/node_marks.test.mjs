// The nodes page's marks (#/nodes, docs/failures.md), in headless Chromium against a
// real ddpd with users: alice's command run (ddp-run, python3) fails twice on this
// host's cpu:0 with a collective error whose line carries a secret of hers
// (restart_policy.max_restarts 1: two attempts), so the host's cpu:0 alone is suspect.
// Bob (a user) sees the mark, the failures (class, run, when) and "<hidden>" in place
// of the evidence, and no Clear button; alice (the run's owner, no admin) sees her own
// line and no button; carol (an admin) sees the line and a Clear button, and her
// clear removes the mark from the page, and GET /nodes agrees. Each poll of the page
// after the first sends GET /nodes' ETag (If-None-Match). Screenshots at 1280 and 390 px.
//
// Run by ctest: node --test tests/integration/web/node_marks.test.mjs (DDPD_BIN, DDP_TRAINER, DDP_RUN set).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { browserSuite, commandWorkRoot, DDPD, screenshot, Server, until } from './ddpd_server.mjs';

const suite = browserSuite('node_marks', 300000);
const { it } = suite;

const SECRET = `alice-secret-${process.pid}`;
// one line a collective class is read from (base/failure_class.c), then a failed exit
const FAILS = `import sys
print("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error (${SECRET})", file=sys.stderr, flush=True)
sys.exit(1)
`;

it('a suspect device shows its mark, the failures and the evidence (hidden from another user), and an admin clears it', async () => {
  const work = await commandWorkRoot({ 'fails/fails.py': FAILS });
  const s = new Server([...work.args, '--node-name', 'web-host']);
  const tokens = {};
  const userCmd = (...args) => {
    const r = spawnSync(DDPD, ['user', ...args, '--state-dir', s.stateDir], { encoding: 'utf8' });
    assert.equal(r.status, 0, `ddpd user ${args.join(' ')}: ${r.stderr}`);
    return r.stdout.trim().split('\n').pop();
  };
  tokens.alice = userCmd('add', 'alice');
  tokens.bob = userCmd('add', 'bob');
  tokens.carol = userCmd('add', 'carol', '--admin');
  await s.start();
  const as = async (who, method, p, body) => {
    const res = await fetch(s.url + p, { method, body: body ? JSON.stringify(body) : undefined,
      headers: { Authorization: `Bearer ${tokens[who]}`, ...(body ? { 'Content-Type': 'application/json' } : {}) } });
    const text = await res.text();
    return { status: res.status, json: text ? JSON.parse(text) : null };
  };
  const was = suite.server;
  suite.server = s; // its log on a failure
  try {
    const sub = await as('alice', 'POST', '/runs', { name: 'fails', command: ['/usr/bin/python3', 'fails.py'], working_dir: 'fails',
      distributed: { world_size: 1, restart_policy: { max_restarts: 1, backoff: { initial_s: 0, max_s: 0 } } } });
    assert.equal(sub.status, 201, JSON.stringify(sub.json));
    const rid = sub.json.id;
    const run = await until(async () => {
      const r = (await as('alice', 'GET', `/runs/${rid}`)).json;
      return ['succeeded', 'failed', 'canceled'].includes(r.status) ? r : null;
    }, 'her run to end', 120000, 200);
    assert.deepEqual(run.attempts.map((a) => (a.failure || {}).class), ['collective', 'collective'],
      `two attempts, each a collective failure: ${run.reason} ${JSON.stringify(run.attempts)}`);
    const mark = await until(async () => (await as('carol', 'GET', '/nodes')).json.nodes.find((n) => n.name === 'web-host')?.suspect,
      'the host to be marked', 30000, 200);
    assert.ok(mark.state === 'suspect' && !mark.suspect && mark.device === 'cpu:0' && mark.evidence.includes(SECRET),
      `this host's cpu:0 alone is suspect, with her line as evidence (to an admin): ${JSON.stringify(mark)}`);

    // a page signed in as `who` (the token in localStorage, as the sign-in keeps it), on #/nodes
    const pageAs = async (who) => {
      const page = await suite.browser.newPage();
      await page.setViewportSize({ width: 1280, height: 900 });
      page.errors = [];
      page.on('pageerror', (e) => page.errors.push(e.message));
      page.nodeReads = [];
      page.on('request', (req) => {
        // her signed-in page's reads only: the load before the token is set may read too
        if (new URL(req.url()).pathname === '/nodes' && req.method() === 'GET' && req.headers().authorization)
          page.nodeReads.push(req.headers()['if-none-match'] || null);
      });
      await page.goto(`${s.url}/#/nodes`);
      await page.evaluate((t) => localStorage.setItem('ddpd.token', t), tokens[who]);
      await page.reload();
      await page.waitForSelector('#nodes-table:not([hidden]) tr[data-node="web-host"]');
      await until(async () => /Token ✓/.test(await page.textContent('#token-button')), `${who}'s token in use`);
      await page.waitForSelector('.node-mark[data-node="web-host"][data-state="suspect"]');
      return page;
    };
    const card = '.node-mark[data-node="web-host"]';

    // bob: the mark and the failures, not her line, no button
    const bob = await pageAs('bob');
    assert.match(await bob.textContent('tr[data-node="web-host"] td[data-label="Mark"]'), /suspect: cpu:0/);
    assert.equal(await bob.getAttribute(`${card} [data-device="cpu:0"]`, 'data-state'), 'suspect');
    assert.equal(await bob.getAttribute(`${card} [data-device="cpu:1"]`, 'data-state'), 'fine');
    const rows = await bob.$$eval(`${card} tr.mark-failure`, (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent.trim())));
    assert.equal(rows.length, 2, `two failures count: ${JSON.stringify(rows)}`);
    for (const r of rows) assert.ok(r[0] === 'collective' && r[1].startsWith(`#${rid}`) && r[3] === 'cpu:0' && /ago|now/.test(r[4]),
      `each failure: its class, run, device and when: ${JSON.stringify(r)}`);
    assert.equal((await bob.textContent(`${card} .mark-evidence`)).trim(), '<hidden>');
    assert.equal(await bob.getAttribute(`${card} .mark-evidence`, 'data-hidden'), 'evidence');
    assert.doesNotMatch(await bob.textContent('main'), new RegExp(SECRET), 'her line is nowhere on his page');
    assert.equal(await bob.$(`${card} button.clear-mark`), null, 'no Clear button for a user');
    assert.match(await bob.textContent('#node-marks-status'), /Only an admin clears/);
    const refused = await as('bob', 'POST', '/nodes/web-host/clear');
    assert.equal(refused.status, 403, `the API refuses him too: ${JSON.stringify(refused.json)}`);
    // the page polls with the ETag of its last answer
    await until(() => bob.nodeReads.length >= 2, 'a second read of GET /nodes', 30000);
    assert.ok(bob.nodeReads[0] === null && bob.nodeReads.slice(1).every((e) => e && e.endsWith('-nodes"')),
      `the first read plain, the next with If-None-Match: ${JSON.stringify(bob.nodeReads)}`);
    assert.deepEqual(bob.errors, []);
    await bob.close();

    // alice: her own run's line, no button
    const alice = await pageAs('alice');
    assert.match(await alice.textContent(`${card} .mark-evidence`), new RegExp(SECRET));
    assert.equal(await alice.$(`${card} button.clear-mark`), null, 'no Clear button for the run\'s owner either');
    assert.deepEqual(alice.errors, []);
    await alice.close();

    // carol (an admin): the line and the button; the clear empties the marks
    const carol = await pageAs('carol');
    assert.match(await carol.textContent(`${card} .mark-evidence`), new RegExp(SECRET));
    assert.equal(await carol.getAttribute(`${card} .mark-evidence`, 'data-hidden'), null);
    await screenshot(carol, 'nodes-marks-1280');
    await carol.setViewportSize({ width: 390, height: 844 });
    const { scroll, width } = await carol.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
    assert.ok(scroll <= width + 1, `the page is ${scroll} px wide in a ${width} px window`);
    await screenshot(carol, 'nodes-marks-390');
    await carol.setViewportSize({ width: 1280, height: 900 });
    await carol.click(`${card} button.clear-mark`);
    await carol.waitForSelector('#node-marks', { state: 'hidden' });
    assert.equal(await carol.$(card), null, 'the card is gone');
    assert.match(await carol.textContent('tr[data-node="web-host"] td[data-label="Mark"]'), /^fine$/);
    const after = (await as('carol', 'GET', '/nodes')).json;
    assert.ok(after.suspects.length === 0 && after.nodes.find((n) => n.name === 'web-host').suspect === null &&
      after.nodes.find((n) => n.name === 'web-host').suspect_devices.length === 0, `GET /nodes agrees: ${JSON.stringify(after)}`);
    assert.deepEqual(carol.errors, []);
    await carol.close();
  } finally {
    suite.server = was;
    await s.stop();
    s.cleanup();
    work.cleanup();
  }
});
