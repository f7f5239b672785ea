-- 0004: command runs (the user's own program, started by ddp-run instead of
-- ddp-trainer). The kind of run, so that a restarted server starts a queued one with
-- the right program; and the series a command run reports beyond loss, lr and
-- samples_per_s (ddpd.log_step(step, any_name=value)), rank 0's points.
ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'builtin' CHECK (kind IN ('builtin', 'command'));

CREATE TABLE series (
    run_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    global_step INTEGER NOT NULL,
    value REAL,
    t INTEGER NOT NULL,
    PRIMARY KEY (run_id, key, global_step)
) WITHOUT ROWID;
