// The usage page (#/usage?from=YYYY-MM-DD&to=YYYY-MM-DD): where the team's device time
// went (GET /usage), over a range of UTC days (the last 7 by default). The box's time
// held and goodput at the top; per user, the time held, goodput and one stacked bar of
// its phases; per day, a stacked bar per user. Each bar is split into the phases the
// API counts (startup, productive, checkpoint, lost, idle, unknown: docs/using.md,
// "Where the device time went"), each segment's width its share of the longest bar.
// Read again, at most every 2 s, as runs change on the live stream.
import { get } from './api.js';
import { duration, h, pct } from './format.js';
import { subscribe } from './live.js';

export const PHASES = ['startup', 'productive', 'checkpoint', 'lost', 'idle', 'unknown'];
const WORDS = {
  startup: 'devices given → first step',
  productive: 'steps whose results were kept',
  checkpoint: 'writing checkpoints',
  lost: 'steps thrown away by a rollback to a checkpoint',
  idle: 'devices held with no step',
  unknown: 'a command run that reported no step',
};
const DAY = /^\d{4}-\d{2}-\d{2}$/;

// The UTC day `days` days before today: YYYY-MM-DD.
function utcDay(daysBack = 0) {
  return new Date(Date.now() - daysBack * 86400000).toISOString().slice(0, 10);
}

function userName(u) { return u === null || u === undefined ? '(no owner)' : u; }

// Device seconds as a duration of device time ("1h 05m", "42s", "0.84 s": short runs
// hold devices for less than a second).
function deviceTime(s) {
  if (typeof s !== 'number' || !Number.isFinite(s)) return '—';
  if (s > 0 && s < 10) return `${s.toFixed(2)} s`;
  if (s >= 10 && s < 60) return `${s.toFixed(1)} s`;
  return duration(s);
}

// One stacked bar: a segment per phase (every phase, a zero one 0 wide), its width
// its seconds over `scale`; data-seconds the API's number as it came.
function stackedBar(g, scale, attrs) {
  const held = g.held_device_s;
  const title = `${userName(g.user)}${g.day ? `, ${g.day}` : ''}: ${deviceTime(held)} held, goodput ${pct(g.goodput)}\n` +
    PHASES.map((p) => `${p}: ${deviceTime(g.phases[p])}`).join('\n');
  return h('div', { class: 'usage-bar', title, 'data-held': String(held), ...attrs },
    PHASES.map((p) => h('span', {
      class: `seg phase-${p}`, 'data-phase': p, 'data-seconds': String(g.phases[p]),
      style: `width:${scale > 0 ? (100 * g.phases[p]) / scale : 0}%`,
    })));
}

export function mountUsage(root, query) {
  const params = new URLSearchParams(query || '');
  const from = params.get('from') || utcDay(6), to = params.get('to') || utcDay(0);
  let disposed = false, timer = null;

  const fromInput = h('input', { type: 'date', id: 'usage-from', value: from, required: true });
  const toInput = h('input', { type: 'date', id: 'usage-to', value: to, required: true });
  const rangeError = h('p', { class: 'action-msg error', id: 'usage-range-error', role: 'alert', hidden: true });
  const form = h('form', { class: 'usage-range', id: 'usage-range' },
    h('label', {}, 'From ', fromInput), h('label', {}, 'To ', toInput),
    h('button', { class: 'button small primary', type: 'submit' }, 'Show'),
    h('span', { class: 'muted small' }, 'UTC days, both included'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const f = fromInput.value, t = toInput.value;
    if (!DAY.test(f) || !DAY.test(t)) { rangeError.textContent = 'Give both days (From and To) as dates.'; rangeError.hidden = false; return; }
    if (f > t) { rangeError.textContent = `From (${f}) is after To (${t}): pick a From on or before the To.`; rangeError.hidden = false; return; }
    rangeError.hidden = true;
    location.hash = `#/usage?from=${f}&to=${t}`;
  });

  const status = h('p', { class: 'muted', id: 'usage-status' }, 'Loading…');
  const summary = h('dl', { class: 'summary', id: 'usage-box' });
  const legend = h('div', { class: 'usage-legend muted small', id: 'usage-legend' },
    PHASES.map((p) => h('span', { title: WORDS[p] }, h('i', { class: `phase-${p}` }), ` ${p} `)));
  const usersBody = h('tbody');
  const usersTable = h('table', { class: 'runs usage-users', id: 'usage-users' },
    h('thead', {}, h('tr', {}, ['User', 'Held', 'Goodput', 'Phases'].map((t) => h('th', {}, t)))), usersBody);
  const days = h('div', { class: 'usage-days', id: 'usage-days' });
  const empty = h('div', { class: 'empty', id: 'usage-empty', hidden: true });
  const content = h('div', { id: 'usage-content', hidden: true },
    h('section', { class: 'card', id: 'usage-box-card' }, summary, legend),
    h('section', { class: 'card', id: 'usage-users-card' }, h('h2', {}, 'By user'), usersTable),
    h('section', { class: 'card', id: 'usage-days-card' }, h('h2', {}, 'By day'), days));
  root.append(h('div', { class: 'page-head' }, h('h1', {}, 'Usage'), form), rangeError, status, empty, content);

  function cell(label, ...c) { return h('td', { 'data-label': label }, ...c); }

  function render(byUser, byDay) {
    const box = byUser.box;
    summary.replaceChildren(
      h('div', {}, h('dt', {}, 'Device time held'), h('dd', { id: 'usage-box-held' }, deviceTime(box.held_device_s))),
      h('div', {}, h('dt', {}, 'Goodput'), h('dd', { id: 'usage-box-goodput', 'data-goodput': String(box.goodput) }, pct(box.goodput),
        h('span', { class: 'muted' }, ' productive / held'))),
      h('div', {}, h('dt', {}, 'Lost'), h('dd', {}, deviceTime(box.phases.lost))),
      h('div', {}, h('dt', {}, 'Queue wait'), h('dd', { title: 'wall time runs waited in the queue (not device time)' }, deviceTime(box.phases.queue))));

    const users = byUser.groups.slice().sort((a, b) => b.held_device_s - a.held_device_s);
    const userScale = Math.max(0, ...users.map((g) => g.held_device_s));
    usersBody.replaceChildren(...users.map((g) => h('tr', { class: 'usage-user', 'data-user': userName(g.user) },
      cell('User', h('strong', {}, userName(g.user))),
      cell('Held', h('span', { class: 'num' }, deviceTime(g.held_device_s))),
      cell('Goodput', h('span', { class: 'goodput num', 'data-goodput': String(g.goodput) }, pct(g.goodput))),
      cell('Phases', stackedBar(g, userScale, { 'data-user': userName(g.user) })))));

    // days oldest first, each day's users by name; one scale for every day's bars
    const dayScale = Math.max(0, ...byDay.groups.map((g) => g.held_device_s));
    const dayNames = [...new Set(byDay.groups.map((g) => g.day))].sort();
    days.replaceChildren(...dayNames.map((d) => h('div', { class: 'usage-day', 'data-day': d },
      h('h3', {}, d),
      byDay.groups.filter((g) => g.day === d).sort((a, b) => userName(a.user).localeCompare(userName(b.user)))
        .map((g) => h('div', { class: 'usage-row' },
          h('span', { class: 'usage-who' }, userName(g.user)),
          stackedBar(g, dayScale, { 'data-day': d, 'data-user': userName(g.user) }),
          h('span', { class: 'usage-held small' }, `${deviceTime(g.held_device_s)} · ${pct(g.goodput)}`))))));
  }

  async function load() {
    const range = `from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
    let byUser, byDay;
    try {
      [byUser, byDay] = await Promise.all([get(`/usage?by=user&${range}`), get(`/usage?by=day&${range}`)]);
    } catch (e) {
      if (disposed) return;
      status.textContent = `Cannot read the usage: ${e.message}`;
      status.hidden = false;
      return;
    }
    if (disposed) return;
    status.hidden = true;
    const none = byUser.groups.length === 0 && byDay.groups.length === 0;
    empty.hidden = !none;
    content.hidden = none;
    if (none) {
      empty.replaceChildren(h('h2', {}, 'No device time in this range'),
        h('p', {}, `No run held devices from ${from} to ${to} (UTC). A run's time is counted as its events come.`));
    } else {
      render(byUser, byDay);
    }
  }

  // a run's change, an epoch or a checkpoint counts more time: read again, at most every 2 s
  function soon() { if (!timer) timer = setTimeout(() => { timer = null; if (!disposed) load(); }, 2000); }
  const close = subscribe('/events', { run: soon, epoch: soon, checkpoint: soon, attempt: soon });
  load();
  return () => { disposed = true; clearTimeout(timer); close(); };
}
