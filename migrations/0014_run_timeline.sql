-- 0014: each run's timeline (GET /runs/{id}/timeline): what the scheduler did with it
-- and when, one row per entry in the order written: submitted, each change of its
-- pending reason, admitted (its devices), started, its first step, preempted (by
-- which run), queued again, restarted (why), ended. Written through the store's one
-- writer (OP_TIMELINE); its checkpoints are read from `checkpoints` beside it.
CREATE TABLE run_timeline (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL,
    t INTEGER NOT NULL,   -- unix ms
    kind TEXT NOT NULL,
    detail TEXT           -- a JSON object: what the entry says (NULL: nothing more)
);
CREATE INDEX run_timeline_by_run ON run_timeline (run_id, id);
