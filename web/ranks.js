// Which ranks to mark on a run's rank grid:
//  - "straggler": its own step time is well above the other ranks' (1.5 times their
//    median and 2 ms more): in data-parallel training every rank waits for it;
//  - "silent": the run is live, the rank has not finished, and nothing has been heard
//    from it for SILENT_MS (ranks send a heartbeat every second while training).

export const SILENT_MS = 15000;

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

// ranks: [{rank, state, step_ms, last_seen (ISO)}]; returns Map rank -> [marks].
export function rankMarks(ranks, live, now) {
  const marks = new Map();
  const add = (r, m) => marks.set(r, [...(marks.get(r) || []), m]);
  const timed = ranks.filter((r) => r.step_ms > 0 && !['done', 'failed'].includes(r.state));
  if (live && timed.length >= 2) {
    for (const r of timed) {
      const others = median(timed.filter((o) => o !== r).map((o) => o.step_ms));
      if (r.step_ms > 1.5 * others && r.step_ms > others + 2) add(r.rank, 'straggler');
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
