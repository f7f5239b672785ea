// Which ranks to mark on a run's rank grid:
//  - "straggler": over its last WINDOW step times (one per heartbeat, about a
//    second apart), its median is well above the other ranks' medians (1.5 times
//    the median of theirs and 2 ms more), each rank judged only once it has
//    MIN_SAMPLES of them. One slow step (a heartbeat that fell on the epoch's first
//    batch, a page fault) moves no median: a healthy 2-rank CPU run, whose ranks
//    wait for each other at every step, is never marked;
//  - "silent": the run is live, the rank has not finished, and nothing has been heard
//    from it for SILENT_MS (ranks send a heartbeat every second while training).

export const SILENT_MS = 15000;
export const WINDOW = 10;
export const MIN_SAMPLES = 5;
export const STRAGGLER_RATIO = 1.5;
export const STRAGGLER_MS = 2;

export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// Adds one step time to a rank's window (r.samples, the newest WINDOW kept).
export function addSample(r, stepMs) {
  if (!(stepMs > 0)) return;
  r.samples = [...(r.samples || []), stepMs].slice(-WINDOW);
}

// ranks: [{rank, state, samples: [step_ms...], last_seen (ISO)}]; returns Map rank -> [marks].
export function rankMarks(ranks, live, now) {
  const marks = new Map();
  const add = (r, m) => marks.set(r, [...(marks.get(r) || []), m]);
  const judged = ranks.filter((r) => r.rank >= 0 && (r.samples || []).length >= MIN_SAMPLES && !['done', 'failed'].includes(r.state))
    .map((r) => ({ rank: r.rank, typical: median(r.samples) }));
  if (live && judged.length >= 2) {
    for (const r of judged) {
      const others = median(judged.filter((o) => o !== r).map((o) => o.typical));
      if (r.typical > STRAGGLER_RATIO * others && r.typical > others + STRAGGLER_MS) add(r.rank, 'straggler');
    }
  }
  if (live) {
    for (const r of ranks) {
      if (['done', 'failed'].includes(r.state) || !r.last_seen) continue;
      if (now - Date.parse(r.last_seen) > SILENT_MS) add(r.rank, 'silent');
    }
  }
  return marks;
}
