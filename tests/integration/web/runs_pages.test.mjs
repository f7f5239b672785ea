// The runs page (#/) through a history longer than one page, in headless Chromium
// against a real ddpd: 121 runs (one holding both CPU slots, 120 queued behind it, named
// alpha-N and beta-N). Older and Newer page through every run, 50 a page, each page the
// rows GET /runs gives for that cursor; a name prefix and a status are asked of the
// server (the requests carry them, the rows are its answer), and the filtered history
// pages through too; a filter that passes nothing says so. Screenshots at 1280 px go to
// $DDPD_TEST_ARTIFACTS.
//
// Run by ctest: node --test tests/integration/web/runs_pages.test.mjs (DDPD_BIN, DDP_TRAINER set).
import assert from 'node:assert/strict';
import { browserSuite, fmnist, screenshot, until } from './ddpd_server.mjs';

const suite = browserSuite('runs_pages', 300000);
const { it, open } = suite;

// The run ids the table shows, top to bottom.
async function shown(page) {
  return page.$$eval('#runs-table tr[data-run]', (trs) => trs.filter((tr) => !tr.hidden).map((tr) => Number(tr.dataset.run)));
}

// The ids of GET /runs for a query, every page.
async function apiIds(query) {
  const out = [];
  let url = `/runs?limit=50${query ? `&${query}` : ''}`;
  while (url) {
    const page = (await suite.server.api('GET', url)).json;
    out.push(...page.runs.map((r) => r.id));
    url = page.next;
  }
  return out;
}

// Waits until the table shows exactly `want` (the page's newest load done).
async function showsExactly(page, want, what) {
  await until(async () => JSON.stringify(await shown(page)) === JSON.stringify(want), what, 30000);
}

it('Older and Newer page through the whole history, and the filters are asked of the server', async () => {
  const server = suite.server;
  const holder = (await server.api('POST', '/runs', fmnist({ name: 'holder', train: { epochs: 500 } }))).json.id;
  await until(async () => (await server.api('GET', `/runs/${holder}`)).json.status === 'running', 'the holder to run', 120000);
  for (let i = 0; i < 120; i++) {
    const r = await server.api('POST', '/runs', fmnist({ name: `${i % 2 ? 'beta' : 'alpha'}-${i}`, distributed: { world_size: 1 } }));
    assert.equal(r.status, 201, `POST /runs ${i}: ${r.status}`);
  }
  const all = await apiIds('');
  assert.equal(all.length, 121, 'the API lists 121 runs');

  const page = await open('#/');
  const asked = [];
  page.on('request', (req) => { if (/\/runs\?/.test(req.url())) asked.push(req.url()); });
  await showsExactly(page, all.slice(0, 50), 'the newest 50');
  assert.ok(await page.isDisabled('#runs-newer'), 'the newest page: no Newer');
  assert.match(await page.textContent('#runs-page-info'), /^1–50$/);
  await page.click('#runs-older');
  await showsExactly(page, all.slice(50, 100), 'the next 50 (Older)');
  assert.ok(asked.some((u) => u.includes(`before=${all[49]}`)), `the page was asked below ${all[49]}: ${asked.slice(-3)}`);
  assert.match(await page.textContent('#runs-page-info'), /^51–100$/);
  await page.click('#runs-older');
  await showsExactly(page, all.slice(100), 'the oldest 21');
  assert.ok(await page.isDisabled('#runs-older'), 'the oldest page: no Older');
  await screenshot(page, 'runs-oldest-page-1280');
  await page.click('#runs-newer');
  await showsExactly(page, all.slice(50, 100), 'Newer: back one page');
  await page.click('#runs-newer');
  await showsExactly(page, all.slice(0, 50), 'Newer: the newest page again');

  // a name prefix: the server's answer, paged
  const betas = await apiIds('name=beta-');
  assert.equal(betas.length, 60, 'the API has 60 beta- runs');
  await page.fill('#runs-name-filter', 'beta-');
  await showsExactly(page, betas.slice(0, 50), 'the newest 50 beta- runs');
  assert.ok(asked.some((u) => /[?&]name=beta-/.test(u)), `the name was asked of the server: ${asked.slice(-3)}`);
  await page.click('#runs-older');
  await showsExactly(page, betas.slice(50), 'the other 10 beta- runs');
  await screenshot(page, 'runs-filtered-page-1280');
  // a status on top: the holder is the one running run, and no beta- run runs
  await page.selectOption('#runs-status-filter', 'running');
  await until(async () => (await shown(page)).length === 0 && await page.isVisible('#runs-status'), 'no running beta- run', 30000);
  assert.match(await page.textContent('#runs-status'), /No runs pass these filters/);
  assert.ok(await page.isHidden('#runs-empty'), 'not "No runs yet": there are runs, just none of these');
  await page.fill('#runs-name-filter', '');
  await showsExactly(page, [holder], 'status=running: the holder alone');
  assert.ok(asked.some((u) => /[?&]status=running/.test(u)), `the status was asked of the server: ${asked.slice(-3)}`);
  assert.deepEqual(page.errors, []);
  await page.close();
  await server.api('POST', `/runs/${holder}/cancel`);
});
