// The runs list (#/): every run, newest first, with its owner, its status, a progress
// bar, a loss sparkline and the newest step's loss (one format for the column), devices,
// when it started and how long it took; kept live by /events (new runs appear,
// statuses and progress move, deleted runs go). Ticking two or more runs overlays
// them on one chart (compare.js); the selection is in the address (#/?compare=3,5),
// so that a comparison can be reloaded and shared. The server filters and pages: a
// status, a name prefix and "Mine" (when the stored token is a user's: its runs only,
// the choice kept in localStorage) go to GET /runs, and Older/Newer page through the
// whole history by its cursor (before=), 50 runs a page.
import { get, revalidate } from './api.js';
import { ema, sparkline } from './charts.js';
import { colorOf, mountCompare } from './compare.js';
import { ago, badge, columnFormat, devices, duration, epochText, FINISHED, h, LIVE, runDuration } from './format.js';
import { subscribe } from './live.js';
import { onWho } from './who.js';

const SPARK_POINTS = 60;
const SPARK_RUNS = 40; // sparklines fetched for the newest this many runs
const MINE_KEY = 'ddpd.mine';
const PAGE = 50;
const STATUSES = ['queued', 'starting', 'running', 'canceling', 'succeeded', 'failed', 'canceled'];

function mineWanted() { try { return localStorage.getItem(MINE_KEY) === '1'; } catch { return false; } }

// The runs #/?compare=3,5 names.
function selectionInHash() {
  const m = /[?&]compare=([0-9,]+)/.exec(location.hash);
  return new Set(m ? m[1].split(',').filter(Boolean).map(Number) : []);
}

export function mountRuns(root) {
  const rows = new Map(); // id -> { run, tr, spark: [] }
  const selected = selectionInHash();
  let disposed = false;
  const status = h('p', { class: 'muted', id: 'runs-status' }, 'Loading…');
  const tbody = h('tbody');
  const table = h('table', { class: 'runs', id: 'runs-table', hidden: true },
    h('thead', {}, h('tr', {}, [h('th', { class: 'pick', title: 'Tick two or more to compare them' }, 'Compare'),
      ...['Run', 'Owner', 'Status', 'Progress', 'Step loss', 'Devices', 'Started', 'Duration'].map((t) => h('th', {}, t))])),
    tbody);
  const hint = h('p', { class: 'muted small', id: 'compare-hint', hidden: true });
  const empty = h('div', { class: 'empty', id: 'runs-empty', hidden: true },
    h('h2', {}, 'No runs yet'),
    h('p', {}, 'Submit a training run from the form, or with ', h('code', {}, 'ddpctl submit run.json'), '.'),
    h('a', { class: 'button primary', href: '#/submit' }, 'Submit a run'));
  let me = null; // the user whose token is stored, when it is a user's
  // the page: its filters (sent to the server) and its cursor (null: the newest page);
  // trail: the cursors of the pages before it, for Newer
  const filters = { status: '', name: '', owner: '' };
  let cursor = null, nextCursor = null;
  const trail = [];
  const mineBox = h('input', { type: 'checkbox', id: 'mine-filter', checked: mineWanted(),
    onchange: () => { try { localStorage.setItem(MINE_KEY, mineBox.checked ? '1' : '0'); } catch { /* private mode */ } applyMine(); } });
  const mineLabel = h('label', { class: 'mine-filter', id: 'mine-label', hidden: true }, mineBox, 'Mine');
  const statusPick = h('select', { id: 'runs-status-filter', 'aria-label': 'Only runs in this status',
    onchange: () => { filters.status = statusPick.value; restart(); } },
  h('option', { value: '' }, 'Any status'), ...STATUSES.map((st) => h('option', { value: st }, st)));
  let nameTimer = null;
  const nameBox = h('input', { type: 'search', id: 'runs-name-filter', placeholder: 'Name starts with…', 'aria-label': 'Only runs whose name starts with',
    oninput: () => { clearTimeout(nameTimer); nameTimer = setTimeout(() => { filters.name = nameBox.value; restart(); }, 250); } });
  const filterBar = h('div', { class: 'runs-filters', id: 'runs-filters' }, statusPick, nameBox, mineLabel);
  const newer = h('button', { type: 'button', id: 'runs-newer', disabled: true, onclick: () => { cursor = trail.pop() ?? null; load(); } }, '‹ Newer');
  const older = h('button', { type: 'button', id: 'runs-older', disabled: true,
    onclick: () => { if (nextCursor === null) return; trail.push(cursor); cursor = nextCursor; load(); } }, 'Older ›');
  const pageInfo = h('span', { class: 'muted', id: 'runs-page-info' }, '');
  const pager = h('div', { class: 'pager', id: 'runs-pager', hidden: true }, newer, pageInfo, older);
  root.append(
    h('div', { class: 'page-head' }, h('h1', {}, 'Runs'), filterBar, h('a', { class: 'button primary', href: '#/submit' }, 'New run')),
    status, empty);
  const compare = mountCompare(root);
  compare.panel.addEventListener('clear', () => { selected.clear(); selectionChanged(); for (const e of rows.values()) render(e); });
  root.append(hint, table, pager);

  function cell(label, ...content) { return h('td', { 'data-label': label }, ...content); }

  // "Mine": only the runs of the user whose token is stored, asked of the server.
  function mineOnly() { return Boolean(me && me.kind === 'user' && mineBox.checked); }
  function applyMine() {
    mineLabel.hidden = !(me && me.kind === 'user');
    mineLabel.title = me && me.kind === 'user' ? `Only ${me.name}'s runs` : '';
    const owner = mineOnly() ? me.name : '';
    if (owner !== filters.owner) { filters.owner = owner; restart(); }
  }
  function filtered() { return Boolean(filters.status || filters.name || filters.owner); }
  // new filters: from the newest page
  function restart() { cursor = null; trail.length = 0; load(); }

  function selectedRuns() { return [...rows.values()].filter((e) => selected.has(e.run.id)).sort((a, b) => b.run.id - a.run.id).map((e) => e.run); }

  function selectionChanged() {
    const ids = [...selected].sort((a, b) => a - b);
    const want = ids.length ? `#/?compare=${ids.join(',')}` : '#/';
    // only while the address is still this list's: a list that finishes loading after
    // the user went on (to a run, the form) must not take the address back
    const here = location.hash || '#/';
    if (!disposed && (here === '#/' || here === '#' || here.startsWith('#/?')) && here !== want) history.replaceState(null, '', want);
    const chosen = selectedRuns();
    compare.show(chosen);
    hint.hidden = chosen.length !== 1;
    hint.textContent = 'Tick another run to overlay their curves on one chart.';
    for (const e of rows.values()) if (e.tr) e.tr.style.removeProperty('--pick');
    chosen.forEach((r, i) => { const e = rows.get(r.id); if (e && e.tr) e.tr.style.setProperty('--pick', colorOf(i)); });
  }

  // The step loss column in one format, whatever row changed.
  function formatLossColumn() {
    const fmt = columnFormat([...rows.values()].map((e) => (e.run.progress || {}).loss), 4);
    for (const e of rows.values()) {
      const el = e.tr && e.tr.querySelector('.loss-value');
      if (el) el.textContent = fmt((e.run.progress || {}).loss);
    }
  }

  function render(entry) {
    const { run } = entry;
    const p = run.progress || {};
    const fraction = p.fraction ?? (run.status === 'succeeded' ? 1 : 0);
    const pick = h('input', { type: 'checkbox', class: 'pick-run', 'aria-label': `compare run ${run.id}`, checked: selected.has(run.id),
      onchange: () => { if (pick.checked) selected.add(run.id); else selected.delete(run.id); tr.classList.toggle('picked', pick.checked); selectionChanged(); } });
    const tr = h('tr', { class: `run-row status-${run.status}${selected.has(run.id) ? ' picked' : ''}`, 'data-run': run.id },
      cell('Compare', h('label', { class: 'pick' }, pick)),
      cell('Run', h('a', { href: `#/runs/${run.id}`, class: 'run-link' }, `#${run.id}`), ' ', h('span', { class: 'run-name' }, run.name || '')),
      cell('Owner', h('span', { class: `owner${run.owner ? '' : ' muted'}` }, run.owner || '—')),
      cell('Status', badge(run.status),
        run.reason && run.status !== 'succeeded' ? h('div', { class: 'reason-short', title: run.reason }, run.reason) : null),
      cell('Progress', h('div', { class: 'progress', role: 'progressbar', 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-valuenow': Math.round(fraction * 100) },
        h('div', { class: `bar bar-${run.status}`, style: `width:${(fraction * 100).toFixed(1)}%` })),
        h('div', { class: 'progress-text' },
          p.epochs ? `${epochText(p.epoch ?? 0, p.epochs)} · ` : '', `${Math.round(fraction * 100)}%`)),
      cell('Step loss', h('span', { class: 'spark-wrap' }, sparkline(ema(entry.spark, 0.7))), h('span', { class: 'loss-value' }, '')),
      cell('Devices', devices(run)),
      cell('Started', h('span', { title: run.started_at || '' }, run.started_at ? ago(run.started_at) : run.status === 'queued' ? 'waiting' : '—')),
      cell('Duration', h('span', { class: 'duration' }, duration(runDuration(run)))));
    const pickIndex = selectedRuns().findIndex((r) => r.id === run.id);
    if (pickIndex >= 0) tr.style.setProperty('--pick', colorOf(pickIndex)); // its line's colour on the chart
    if (entry.tr) entry.tr.replaceWith(tr);
    entry.tr = tr;
    formatLossColumn();
    return tr;
  }

  function showEmpty() {
    const none = rows.size === 0;
    // "No runs yet" only where there are none at all; a filter or a page that holds none says so in the table's place
    empty.hidden = !(none && !filtered() && cursor === null);
    table.hidden = none;
    if (none && !empty.hidden) { status.hidden = true; return; }
    if (none) { status.hidden = false; status.className = 'muted'; status.textContent = 'No runs pass these filters.'; }
  }

  function add(run, atTop) {
    const entry = { run, tr: null, spark: [] };
    rows.set(run.id, entry);
    const tr = render(entry);
    if (atTop) tbody.prepend(tr); else tbody.append(tr);
    showEmpty();
    return entry;
  }

  async function loadSpark(entry) {
    entry.sparkAsked = true;
    try {
      const m = await get(`/runs/${entry.run.id}/metrics?key=loss&max_points=${SPARK_POINTS}`);
      if (disposed) return;
      entry.spark = m.points.map((pt) => pt[1]);
      render(entry);
    } catch { /* the row stays without its sparkline */ }
  }

  async function refreshRun(id) {
    try {
      const run = await get(`/runs/${id}`);
      if (disposed) return;
      const entry = rows.get(id);
      if (entry) { entry.run = run; render(entry); }
    } catch { /* deleted meanwhile, or offline: the next event or reload mends it */ }
  }

  // A run this page does not show changed: on the newest page it may belong at the
  // top, and with a status filter a shown one may leave; the page is asked again
  // (at most every 300 ms).
  let reloadTimer = null;
  function reloadSoon() {
    if (reloadTimer) return;
    reloadTimer = setTimeout(() => { reloadTimer = null; if (!disposed) load(); }, 300);
  }

  function pageUrl() {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (filters.status) q.set('status', filters.status);
    if (filters.owner) q.set('owner', filters.owner);
    if (filters.name) q.set('name', filters.name);
    if (cursor !== null) q.set('before', String(cursor));
    return `/runs?${q}`;
  }

  // The page of runs, revalidated with its ETag (a 304: nothing changed since it was
  // read, nothing to do).
  let loading = 0; // the newest load wins
  async function load() {
    const mine = ++loading;
    try {
      const { value: page, changed } = await revalidate(pageUrl());
      if (disposed || mine !== loading) return;
      if (!changed && shownUrl === pageUrl()) return;
      shownUrl = pageUrl();
      status.hidden = true;
      const seen = new Set();
      for (const run of page.runs) {
        seen.add(run.id);
        const entry = rows.get(run.id);
        if (entry) { entry.run = run; render(entry); } else add(run, false);
      }
      for (const [id, entry] of rows) if (!seen.has(id)) { entry.tr.remove(); rows.delete(id); selected.delete(id); }
      // keep newest first
      [...rows.values()].sort((a, b) => b.run.id - a.run.id).forEach((e) => tbody.append(e.tr));
      showEmpty();
      nextCursor = page.next && page.runs.length ? page.runs[page.runs.length - 1].id : null;
      older.disabled = nextCursor === null;
      newer.disabled = cursor === null;
      const first = trail.length * PAGE + 1;
      pageInfo.textContent = page.runs.length ? `${first}–${first + page.runs.length - 1}${filtered() ? ' (filtered)' : ''}` : '';
      pager.hidden = cursor === null && nextCursor === null;
      [...rows.values()].slice(0, SPARK_RUNS).forEach((e) => { if (!e.spark.length && !e.sparkAsked) loadSpark(e); });
      selectionChanged();
    } catch (e) {
      status.hidden = false;
      status.textContent = e.message;
      status.className = 'error-box';
    }
  }

  const refreshing = new Set(); // runs whose overlay is due to be fetched again
  let shownUrl = null; // the page the table shows
  const opened = load();
  const close = subscribe('/events', {
    // (re)connected: asked again (after the first load: its ETag then), so nothing between is missed
    ready: () => { opened.then(() => { if (!disposed) load(); }); },
    run: (d) => {
      const entry = rows.get(d.run);
      if (entry) { entry.run = { ...entry.run, status: d.status, reason: d.reason ?? entry.run.reason }; render(entry); refreshRun(d.run); }
      if ((!entry && cursor === null) || (entry && filters.status)) reloadSoon();
      if (entry && FINISHED.has(d.status)) { loadSpark(entry); compare.refresh(d.run); } // its whole curve, at the end
    },
    deleted: (d) => {
      const entry = rows.get(d.run);
      if (entry) { entry.tr.remove(); rows.delete(d.run); showEmpty(); }
      if (selected.delete(d.run)) selectionChanged();
    },
    epoch: (d) => compare.refresh(d.run),
    step: (d) => {
      const entry = rows.get(d.run);
      if (!entry || FINISHED.has(entry.run.status)) return;
      entry.run.progress = { ...entry.run.progress, ...d };
      if (d.loss !== null) {
        entry.spark.push(d.loss);
        if (entry.spark.length > 2 * SPARK_POINTS) entry.spark = entry.spark.filter((_, i) => i % 2 === 1);
      }
      render(entry);
      if (selected.has(d.run) && !refreshing.has(d.run)) { // the overlay follows, every 2 s at most
        refreshing.add(d.run);
        setTimeout(() => { refreshing.delete(d.run); if (!disposed) compare.refresh(d.run); }, 2000);
      }
    },
  });

  const stopWho = onWho((w) => { me = w; applyMine(); });

  // Durations of live runs tick.
  const timer = setInterval(() => {
    for (const entry of rows.values()) {
      if (!LIVE.has(entry.run.status) || !entry.tr) continue;
      const d = entry.tr.querySelector('.duration');
      if (d) d.textContent = duration(runDuration(entry.run));
    }
  }, 1000);

  return () => { disposed = true; close(); stopWho(); clearInterval(timer); clearTimeout(reloadTimer); clearTimeout(nameTimer); compare.dispose(); };
}
