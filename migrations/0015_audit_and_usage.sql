-- 0015: who did what, and where the device time went.
--
-- audit: every state-changing action and decision, written through the store's one
-- writer before the action acts (server/store/audit.c), and by `ddpd user` in the
-- transaction of the change it makes. actor: a user's name, or in parentheses one of
-- no name ("(admin token)", "(anonymous)", "(server)", "(ddpd user: ACCOUNT)").
-- action: "run.submit", "run.cancel", ... (docs/operating.md lists them). subject:
-- the user the entry is about (the run's owner, the user changed): with actor, what
-- decides whether a user may read the entry. detail: a JSON object of what changed.
CREATE TABLE audit (
    id      INTEGER PRIMARY KEY,
    t       INTEGER NOT NULL,
    actor   TEXT NOT NULL,
    action  TEXT NOT NULL,
    target  TEXT NOT NULL,
    run_id  INTEGER,
    subject TEXT,
    detail  TEXT
);
CREATE INDEX audit_t ON audit (t);
CREATE INDEX audit_subject ON audit (subject, t);
CREATE INDEX audit_actor ON audit (actor, t);

-- usage: where each run's device time went (server/store/usage_ledger.c, applied by
-- the writer in the transaction of the ops it follows). Phases, in wall ms of the
-- run's devices (times `devices` for device time): startup (devices given -> first
-- step, and a restart's gap), productive (steps whose results were kept), checkpoint,
-- lost (steps a rollback to an earlier checkpoint threw away), idle (beyond the idle
-- threshold between steps), unknown (held by a run that reported no step); queue_ms is
-- wall time waiting. The rest is the ledger's place: hold_t (devices held since; NULL:
-- none), at_t (accounted up to), phase, last_gs, queued_t, steps_in_hold, marks (its
-- checkpoints' [global_step, productive_ms then], JSON).
CREATE TABLE run_usage (
    run_id        INTEGER PRIMARY KEY,
    owner         TEXT,
    command       INTEGER NOT NULL DEFAULT 0,
    devices       INTEGER NOT NULL DEFAULT 1,
    startup_ms    INTEGER NOT NULL DEFAULT 0,
    productive_ms INTEGER NOT NULL DEFAULT 0,
    checkpoint_ms INTEGER NOT NULL DEFAULT 0,
    lost_ms       INTEGER NOT NULL DEFAULT 0,
    idle_ms       INTEGER NOT NULL DEFAULT 0,
    unknown_ms    INTEGER NOT NULL DEFAULT 0,
    queue_ms      INTEGER NOT NULL DEFAULT 0,
    lost_steps    INTEGER NOT NULL DEFAULT 0,
    hold_t        INTEGER,
    at_t          INTEGER,
    phase         INTEGER NOT NULL DEFAULT 0,
    last_gs       INTEGER NOT NULL DEFAULT 0,
    queued_t      INTEGER,
    steps_in_hold INTEGER NOT NULL DEFAULT 0,
    marks         TEXT
);
-- The same by UTC day (of when each piece was accounted), in device ms (queue: wall
-- ms), for GET /usage?by=day and its from/to.
CREATE TABLE usage_days (
    day       TEXT NOT NULL,
    run_id    INTEGER NOT NULL,
    owner     TEXT,
    phase     TEXT NOT NULL,
    device_ms INTEGER NOT NULL,
    PRIMARY KEY (day, run_id, phase)
);
