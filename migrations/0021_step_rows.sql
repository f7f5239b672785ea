-- 0021: the steps table in fewer bytes (issue 49's at most 16 bytes per point). A step
-- is stored in step_rows under one integer key, k = run_id << 32 | global_step (a
-- global_step is 0 .. 2^32 - 1: ingest refuses others), so that a run's steps are
-- one range of the rowid, written in key order into full pages (a table WITHOUT
-- ROWID left 12% of its pages unused), and two values are kept as the small numbers
-- they mostly are: step_back = global_step - step (0 or 1 byte where the trainer
-- counts steps as global_step does) and dt = t - the run's created_at (3 or 4 bytes
-- instead of 6; created_at is set once, with the run's row). `steps` stays, as a
-- view with the columns it had, for whoever reads it by run_id and global_step
-- (tests, an operator's sqlite3); the server reads step_rows by k ranges
-- (server/store/step_rows.h). Every point is kept: a step of a global_step outside
-- 0 .. 2^32 - 1, never accepted here in practice, fails the migration rather than
-- lose a point (the CHECK below).
CREATE TEMP TABLE step_rows_check (bad INTEGER CHECK (bad = 0));
INSERT INTO step_rows_check SELECT count(*) FROM steps WHERE global_step < 0 OR global_step > 4294967295;
DROP TABLE step_rows_check;

CREATE TABLE step_rows (
    k INTEGER PRIMARY KEY, -- run_id << 32 | global_step
    epoch INTEGER,
    step_back INTEGER,     -- global_step - step
    loss REAL,
    lr REAL,
    samples_per_s REAL,
    dt INTEGER NOT NULL    -- t - runs.created_at (t itself when the run has no row)
);
INSERT INTO step_rows (k, epoch, step_back, loss, lr, samples_per_s, dt)
    SELECT (s.run_id << 32) + s.global_step, s.epoch, s.global_step - s.step, s.loss, s.lr, s.samples_per_s,
           s.t - coalesce(r.created_at, 0)
    FROM steps s LEFT JOIN runs r ON r.id = s.run_id ORDER BY s.run_id, s.global_step;
DROP TABLE steps;

CREATE VIEW steps (run_id, global_step, epoch, step, loss, lr, samples_per_s, t) AS
    SELECT k >> 32, k & 4294967295, epoch, (k & 4294967295) - step_back, loss, lr, samples_per_s,
           dt + coalesce((SELECT created_at FROM runs WHERE id = k >> 32), 0)
    FROM step_rows;

CREATE TRIGGER steps_insert INSTEAD OF INSERT ON steps
BEGIN
    INSERT INTO step_rows (k, epoch, step_back, loss, lr, samples_per_s, dt)
    VALUES ((new.run_id << 32) + new.global_step, new.epoch, new.global_step - new.step, new.loss, new.lr,
            new.samples_per_s, new.t - coalesce((SELECT created_at FROM runs WHERE id = new.run_id), 0));
END;

CREATE TRIGGER steps_delete INSTEAD OF DELETE ON steps
BEGIN
    DELETE FROM step_rows WHERE k = (old.run_id << 32) + old.global_step;
END;
