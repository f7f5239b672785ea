// A run's attempts (distributed.max_restarts, resumes, the server's own restarts after
// a lost node or processes): the "Attempts" card of the run page (each one's start,
// duration, how it ended, the rank it failed on and its last line, and a link to each
// rank's log of that attempt for a command run), and the markers the charts draw where
// a restart began (a dashed line at its first step, "attempt K").
import { ago, badge, duration, h } from './format.js';

// Whether a run's attempts are worth a card: more than one, or restarts allowed.
export function hasAttempts(run) {
  const d = run && run.config && run.config.distributed;
  return Boolean(run && ((run.attempts || []).length > 1 || (d && d.max_restarts > 0)));
}

// The steps where the run's restarts began, for the charts: [{ step, attempt }].
export function attemptMarks(run) {
  return ((run && run.attempts) || []).filter((a) => a.attempt > 0 && a.first_step !== null && a.first_step !== undefined)
    .map((a) => ({ step: a.first_step, attempt: a.attempt }));
}

// A uPlot plugin: a dashed vertical line at each marker's x (marks() is read at each
// draw, so new attempts show without rebuilding the chart), labelled with the
// attempt's number, from 0 as everywhere (the API's `attempt`, TORCHELASTIC_RESTART_COUNT,
// ddpctl logs --attempt): attempt 1 is the first restart.
export function attemptMarkersPlugin(marks, toX = (step) => step) {
  return {
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx, { top, height } = u.bbox;
        ctx.save();
        ctx.strokeStyle = '#9333ea';
        ctx.fillStyle = '#9333ea';
        ctx.setLineDash([5, 4]);
        ctx.lineWidth = Math.max(1, devicePixelRatio);
        ctx.font = `${Math.round(11 * devicePixelRatio)}px sans-serif`;
        for (const m of marks()) {
          const x = Math.round(u.valToPos(toX(m.step), 'x', true));
          if (!Number.isFinite(x) || x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
          ctx.beginPath();
          ctx.moveTo(x, top);
          ctx.lineTo(x, top + height);
          ctx.stroke();
          ctx.fillText(`attempt ${m.attempt}`, x + 4 * devicePixelRatio, top + 12 * devicePixelRatio);
        }
        ctx.restore();
      }],
    },
  };
}

// The "Attempts" card: render(run) fills it from GET /runs/{id}; hidden while the run
// has one attempt and no restarts allowed.
export function attemptsCard(id) {
  const body = h('tbody');
  const note = h('p', { class: 'muted', id: 'attempts-note' });
  const table = h('table', { class: 'attempts', id: 'attempts-table' },
    h('thead', {}, h('tr', {}, ['Attempt (restart count)', 'Started', 'Took', 'Ended', 'Failing rank', 'Why'].map((t) => h('th', {}, t)))), body);
  const card = h('section', { class: 'card', id: 'attempts-card', hidden: true }, h('h2', {}, 'Attempts'), note,
    h('div', { class: 'scroll-x' }, table));

  function took(a) {
    if (!a.started_at) return null;
    return ((a.ended_at ? Date.parse(a.ended_at) : Date.now()) - Date.parse(a.started_at)) / 1000;
  }

  function logLinks(run, a) {
    const n = run.world_size || 0;
    if (!Array.isArray(run.config && run.config.command) || !Object.keys(a.log_offsets || {}).length) return null;
    return h('div', { class: 'attempt-logs muted' }, 'logs: ', ...Array.from({ length: n }, (_, r) => [r ? ' ' : '',
      h('a', { href: `/runs/${run.id}/logs?rank=${r}&attempt=${a.attempt}`, target: '_blank', rel: 'noopener' }, `rank ${r}`)]).flat());
  }

  function render(run) {
    card.hidden = !hasAttempts(run);
    if (card.hidden) return;
    const d = (run.config && run.config.distributed) || {};
    const allowed = d.max_restarts || 0;
    note.textContent = `Restart count ${run.restart_count}; distributed.max_restarts is ${allowed}` +
      (run.attempts_omitted ? `; the ${run.attempts_omitted} oldest attempts are not listed.` : '.');
    body.dataset.attempts = String(run.attempts.length);
    body.replaceChildren(...run.attempts.map((a) => h('tr', { 'data-attempt': a.attempt, 'data-status': a.status || 'running' },
      h('td', {}, String(a.attempt)),
      h('td', {}, h('span', { title: a.started_at || '' }, ago(a.started_at))),
      h('td', {}, duration(took(a))),
      h('td', {}, a.status ? badge(a.status) : badge('running')),
      h('td', { class: 'failing-rank' }, a.failing_rank ?? '—'),
      h('td', { class: 'attempt-why' }, a.reason || '',
        a.last_line && !(a.reason || '').includes(a.last_line) ? h('div', { class: 'muted attempt-last-line' }, h('code', {}, a.last_line)) : null,
        logLinks(run, a)))));
  }

  return { card, render };
}
