-- 0005: resumes. POST /runs/{id}/resume continues a failed or canceled run from its
-- newest checkpoint under the same id; each resume is a row here, with what the run
-- was before it (its status and reason), so GET /runs/{id} keeps the whole history.
-- The steps, epochs and checkpoints recorded after the checkpoint resumed from are
-- dropped at the resume (the trainer does them again), so a series keeps one point
-- per step.
CREATE TABLE run_resumes (
    run_id INTEGER NOT NULL,
    n INTEGER NOT NULL,            -- 1 for the run's first resume, 2 for its second...
    at INTEGER NOT NULL,           -- unix ms
    from_checkpoint TEXT NOT NULL, -- the file the trainer continues from
    from_epoch INTEGER,            -- the last epoch that checkpoint holds
    from_global_step INTEGER,      -- and its global step
    prior_status TEXT NOT NULL,    -- failed or canceled
    prior_reason TEXT,
    prior_exit_code INTEGER,
    prior_exit_signal INTEGER,
    PRIMARY KEY (run_id, n)
) WITHOUT ROWID;

-- A deleted run's resumes go with it.
CREATE TRIGGER run_resumes_of_deleted_run AFTER DELETE ON runs
BEGIN
    DELETE FROM run_resumes WHERE run_id = old.id;
END;
