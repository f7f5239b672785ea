// A run's timeline (GET /runs/{id}/timeline) as a strip: one coloured segment per
// phase, its width its share of the run's time so far (queued, starting, running,
// stopping for a preemption), a tick per checkpoint, and below it the entries in
// words (each change of its pending reason, the run that preempted it, why it
// restarted). Read again when the run's status changes; drawn at once when read.
import { get } from './api.js';
import { h } from './format.js';

// Which phase each entry begins (entries not named here begin none).
const BEGINS = {
  submitted: 'queued', resumed: 'queued', queued_again: 'queued', restarted: 'queued',
  admitted: 'starting', started: 'running', preempted: 'stopping', ended: null,
};

function words(e) {
  const d = e.detail || {};
  switch (e.kind) {
    case 'pending': return `waits: ${d.reason}${d.blocked_by && d.blocked_by.length ? ` (behind or for run${d.blocked_by.length > 1 ? 's' : ''} ${d.blocked_by.join(', ')})` : ''}`;
    case 'admitted': return `admitted on ${(d.devices || []).join(', ') || 'its devices'}`;
    case 'first_step': return `first step (global step ${d.global_step})`;
    case 'checkpoint': return `checkpoint at epoch ${d.epoch ?? '—'}, global step ${d.global_step}`;
    case 'preempted': return `preempted by run ${d.by}`;
    case 'notice': return `notice to checkpoint and stop (a grace of ${d.grace_s} s)`;
    case 'notice_answered': return `checkpoint durable ${((d.after_ms || 0) / 1000).toFixed(1)} s after the notice: stopped`;
    case 'queued_again': return `queued again${d.by ? ` after run ${d.by}'s preemption` : ''}`;
    case 'resizing': return `told to stop, to start again on ${d.to} ranks${d.by ? ` for run ${d.by}` : ''}`;
    case 'resized': return `${d.to < d.from ? 'shrunk' : 'grown'} from ${d.from} to ${d.to} ranks${d.by ? ` for run ${d.by}` : ''}`;
    case 'restarted': return `restarted (attempt ${d.attempt}): ${d.reason}`;
    case 'ended': return `ended ${d.status}${d.reason ? `: ${d.reason}` : ''}`;
    default: return e.kind.replace('_', ' ');
  }
}

// The phases of a timeline: [{phase, from, to}] in ms, the last open until `now`.
export function phasesOf(entries, now) {
  const out = [];
  for (const e of entries) {
    if (!(e.kind in BEGINS)) continue;
    const t = Date.parse(e.t);
    if (out.length) out[out.length - 1].to = t;
    const phase = BEGINS[e.kind];
    if (phase) out.push({ phase, from: t, to: now });
  }
  return out.filter((p) => p.to >= p.from);
}

export function timelineStrip(id) {
  const strip = h('div', { class: 'timeline-strip', id: 'timeline-strip' });
  const legend = h('div', { class: 'timeline-legend muted small' },
    ['queued', 'starting', 'running', 'stopping'].map((p) => h('span', {}, h('i', { class: `phase-${p}` }), ` ${p} `)));
  const list = h('ol', { class: 'timeline-entries small', id: 'timeline-entries' });
  const card = h('section', { class: 'card', id: 'timeline-card' }, h('h2', {}, 'Timeline'), strip, legend, list);
  let entries = [];

  function render(finishedAt) {
    const now = finishedAt ? Date.parse(finishedAt) : Date.now();
    const phases = phasesOf(entries, now);
    const first = phases.length ? phases[0].from : now, span = Math.max(1, now - first);
    strip.replaceChildren(
      ...phases.map((p) => h('span', {
        class: `phase phase-${p.phase}`, 'data-phase': p.phase,
        style: `left:${(100 * (p.from - first)) / span}%;width:${Math.max(0.5, (100 * (p.to - p.from)) / span)}%`,
        title: `${p.phase}: ${((p.to - p.from) / 1000).toFixed(1)} s`,
      })),
      ...entries.filter((e) => e.kind === 'checkpoint').map((e) => h('span', {
        class: 'tick', 'data-kind': 'checkpoint', title: words(e),
        style: `left:${(100 * (Date.parse(e.t) - first)) / span}%`,
      })));
    list.replaceChildren(...entries.map((e) => h('li', { 'data-kind': e.kind },
      h('time', { datetime: e.t }, new Date(e.t).toLocaleTimeString()), ' ', words(e))));
  }

  async function refresh(run) {
    try {
      entries = (await get(`/runs/${id}/timeline`)).entries;
      render(run && run.finished_at);
    } catch (e) {
      list.replaceChildren(h('li', { class: 'muted' }, `Cannot read the timeline: ${e.message}`));
    }
  }
  return { card, refresh, tick: (run) => { if (entries.length) render(run && run.finished_at); } };
}
