-- 0010: the points a command run's restart left behind. A script restarted from its own
-- snapshot reports its steps again from there; the points its earlier attempt had
-- reported past that step are stale the moment the restart reports its first one (it
-- may never reach them again). They leave the series then (steps, series) and are kept
-- here, each with the attempt that reported it (NULL: none on record then).
CREATE TABLE superseded_steps (
    run_id INTEGER NOT NULL,
    attempt INTEGER,
    global_step INTEGER NOT NULL,
    epoch INTEGER,
    step INTEGER,
    loss REAL,
    lr REAL,
    samples_per_s REAL,
    t INTEGER NOT NULL,
    PRIMARY KEY (run_id, global_step, t)
) WITHOUT ROWID;

CREATE TABLE superseded_series (
    run_id INTEGER NOT NULL,
    attempt INTEGER,
    key TEXT NOT NULL,
    global_step INTEGER NOT NULL,
    value REAL,
    t INTEGER NOT NULL,
    PRIMARY KEY (run_id, key, global_step, t)
) WITHOUT ROWID;

CREATE TRIGGER superseded_points_of_deleted_run AFTER DELETE ON runs
BEGIN
    DELETE FROM superseded_steps WHERE run_id = old.id;
    DELETE FROM superseded_series WHERE run_id = old.id;
END;
