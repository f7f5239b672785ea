// The dashboard reads each thing once per page view, in headless Chromium against a
// real ddpd: every request the page makes is recorded (the browser's own request and
// response events), and on the runs page (#/) and a finished run's page (#/runs/{id})
// no resource is fetched twice, but for GET /runs and GET /runs/{id} asked again when
// the event stream opens: those carry If-None-Match with the ETag the first answer
// gave and are answered 304 Not Modified (nothing changed meanwhile). A run that
// changes (a cancel) is read again in full: 200 with a new ETag.
//
// Run by ctest: node --test tests/integration/web/loads_once.test.mjs (DDPD_BIN, DDP_TRAINER set).
import assert from 'node:assert/strict';
import { browserSuite, fmnist, until } from './ddpd_server.mjs';

const suite = browserSuite('loads_once', 300000);
const { it } = suite;

// A page whose every request (method, path, If-None-Match) and its answer's status are
// recorded from before it loads `hash`.
async function recorded(hash) {
  const page = await suite.browser.newPage();
  page.errors = [];
  page.on('pageerror', (e) => page.errors.push(e.message));
  page.log = [];
  page.lastAt = Date.now();
  page.on('request', (req) => {
    const u = new URL(req.url());
    if (!u.pathname.startsWith('/runs') && !u.pathname.startsWith('/users') && !u.pathname.startsWith('/events')) return;
    page.log.push({ req, path: u.pathname + u.search, inm: req.headers()['if-none-match'] || null, status: null });
    page.lastAt = Date.now();
  });
  page.on('response', (res) => {
    const e = page.log.find((x) => x.req === res.request());
    if (e) e.status = res.status();
    page.lastAt = Date.now();
  });
  await page.goto(`${suite.server.url}/${hash}`);
  return page;
}

// Waits for the live indicator and then for the page's reads to settle (every request
// answered, none new for a second), up to a deadline.
async function settled(page) {
  await until(() => page.evaluate(() => document.getElementById('conn').textContent === 'live'), 'the live indicator', 30000);
  await until(() => page.log.every((e) => e.status !== null || e.path.includes('/events')) && Date.now() - page.lastAt > 1000,
    'the page\'s reads to settle', 30000, 100);
}

// Each path's requests: the first without If-None-Match; any later one with the ETag
// and answered 304; `twice` names the paths that are asked again at all.
function loadedOnce(page, twice) {
  const by = new Map();
  for (const e of page.log.filter((x) => !x.path.includes('/events'))) {
    if (!by.has(e.path)) by.set(e.path, []);
    by.get(e.path).push(e);
  }
  const seen = [...by].map(([p, es]) => `${p}: ${es.map((e) => `${e.status}${e.inm ? ' (If-None-Match)' : ''}`).join(', ')}`).join('; ');
  for (const [p, es] of by) {
    const again = es.slice(1);
    if (again.length) {
      assert.ok(twice.some((t) => t.test(p)), `${p} was fetched ${es.length} times: ${seen}`);
      assert.ok(again.every((e) => e.inm && e.status === 304), `${p} asked again only with its ETag, answered 304: ${seen}`);
    }
  }
  return by;
}

it('the runs page and a run page load each resource once, and ask again only with If-None-Match', async () => {
  const s = suite.server;
  const done = (await s.api('POST', '/runs', fmnist({ name: 'once', train: { epochs: 1 }, distributed: { world_size: 1 } }))).json.id;
  const run = await until(async () => {
    const r = (await s.api('GET', `/runs/${done}`)).json;
    return ['succeeded', 'failed', 'canceled'].includes(r.status) ? r : null;
  }, 'the run to finish', 240000, 200);
  assert.equal(run.status, 'succeeded', run.reason);
  for (let i = 0; i < 3; i++) {
    const id = (await s.api('POST', '/runs', fmnist({ name: `canceled-${i}`, train: { epochs: 100 } }))).json.id;
    assert.equal((await s.api('POST', `/runs/${id}/cancel`)).status, 202);
  }
  await until(async () => (await s.api('GET', '/runs?status=canceled')).json.runs.length === 3, 'three canceled runs', 60000, 200);

  // the runs page: the list once, and once more with its ETag when the stream opens (304); each sparkline once
  const list = await recorded('#/');
  await list.waitForSelector(`tr[data-run="${done}"]`);
  await settled(list);
  const byList = loadedOnce(list, [/^\/runs\?limit=50$/]);
  const page = byList.get('/runs?limit=50') || [];
  assert.ok(page.length === 2 && page[0].status === 200 && page[1].status === 304,
    `the list read, then revalidated: ${page.map((e) => e.status)}`);
  assert.equal([...byList.keys()].filter((p) => p.startsWith(`/runs/${done}/metrics`)).length, 1,
    `its sparkline read once: ${[...byList.keys()].join(' ')}`);
  assert.deepEqual(list.errors, []);
  await list.close();

  // a finished run's page: the run, its loss, epochs, ranks, log and checkpoints once each
  const one = await recorded(`#/runs/${done}`);
  await one.waitForSelector('#loss-chart[data-points]');
  await settled(one);
  const byRun = loadedOnce(one, [new RegExp(`^/runs/${done}$`)]);
  const got = byRun.get(`/runs/${done}`) || [];
  assert.ok(got.length === 2 && got[0].status === 200 && got[1].status === 304,
    `the run read, then revalidated when the stream opened: ${got.map((e) => e.status)}`);
  for (const what of [`/runs/${done}/metrics?key=loss`, `/runs/${done}/epochs`, `/runs/${done}/ranks`, `/runs/${done}/checkpoints`])
    assert.equal([...byRun.keys()].filter((p) => p.startsWith(what)).length, 1, `${what} read once: ${[...byRun.keys()].join(' ')}`);
  assert.deepEqual(one.errors, []);
  await one.close();

  // a change is read in full: a queued run's page, then the run canceled (its `run` event)
  const slot = (await s.api('POST', '/runs', fmnist({ name: 'holds', train: { epochs: 500 }, distributed: { world_size: 2 } }))).json.id;
  const queued = (await s.api('POST', '/runs', fmnist({ name: 'waits', distributed: { world_size: 1 } }))).json.id;
  const q = await recorded(`#/runs/${queued}`);
  await q.waitForSelector('#timeline-strip .phase-queued');
  await settled(q);
  const before = q.log.filter((e) => e.path === `/runs/${queued}`).length;
  assert.equal((await s.api('POST', `/runs/${queued}/cancel`)).status, 202);
  await until(() => q.log.some((e, i) => i >= before && e.path === `/runs/${queued}` && e.inm && e.status === 200),
    'the canceled run read again in full (its ETag named, a new answer)', 30000);
  await s.api('POST', `/runs/${slot}/cancel`);
  assert.deepEqual(q.errors, []);
  await q.close();
});
