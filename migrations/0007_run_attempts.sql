-- 0007: attempts (distributed.max_restarts, torchrun's --max-restarts). A run's
-- launcher starts its ranks once, or again after a failure while restarts remain;
-- the server starts them again too, with the next restart count, after it lost what
-- they ran on (a node, its own process) and when a command run is resumed. Each
-- attempt is a row, from the launcher's `attempt` events (docs/events.md) and the
-- server's own word on an attempt it ended (a lost node, a hang, processes gone after
-- a restart), so that GET /runs/{id} keeps the whole story.
CREATE TABLE run_attempts (
    run_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,      -- its ranks' TORCHELASTIC_RESTART_COUNT, from 0
    master_port INTEGER,           -- a command run's MASTER_PORT
    checkpoint TEXT,               -- a built-in run's: the file its ranks carried on from (NULL: the start)
    log_offsets TEXT,              -- JSON {"RANK": byte}: where its output begins in ranks/rank-RANK.log
    started_at INTEGER,            -- unix ms (NULL: the server knew of it only by its end)
    status TEXT,                   -- succeeded, failed, canceled; NULL while it runs
    reason TEXT,
    failing_rank INTEGER,          -- the rank the reason names
    exit_code INTEGER,             -- that rank's exit status, or
    signal INTEGER,                -- the signal that killed it
    last_line TEXT,                -- its last words
    ended_at INTEGER,
    PRIMARY KEY (run_id, attempt)
) WITHOUT ROWID;

CREATE TRIGGER run_attempts_of_deleted_run AFTER DELETE ON runs
BEGIN
    DELETE FROM run_attempts WHERE run_id = old.id;
END;

-- A command run is resumed too (its script's own snapshot does the rest): a resume
-- without a checkpoint. And every resume says the attempt it starts at (the restart
-- count goes on), which is where the restarts distributed.max_restarts allows count
-- from. SQLite cannot drop a NOT NULL: the table is made again, its rows kept.
DROP TRIGGER run_resumes_of_deleted_run;
CREATE TABLE run_resumes_0007 (
    run_id INTEGER NOT NULL,
    n INTEGER NOT NULL,            -- 1 for the run's first resume, 2 for its second...
    at INTEGER NOT NULL,           -- unix ms
    from_checkpoint TEXT,          -- the file the trainer continues from (NULL: a command run)
    from_epoch INTEGER,            -- the last epoch that checkpoint holds
    from_global_step INTEGER,      -- and its global step
    prior_status TEXT NOT NULL,    -- failed or canceled
    prior_reason TEXT,
    prior_exit_code INTEGER,
    prior_exit_signal INTEGER,
    attempt INTEGER,               -- the attempt it starts (NULL: resumed before attempts were kept)
    PRIMARY KEY (run_id, n)
) WITHOUT ROWID;
INSERT INTO run_resumes_0007 (run_id, n, at, from_checkpoint, from_epoch, from_global_step, prior_status, prior_reason,
                              prior_exit_code, prior_exit_signal)
    SELECT run_id, n, at, from_checkpoint, from_epoch, from_global_step, prior_status, prior_reason, prior_exit_code,
           prior_exit_signal FROM run_resumes;
DROP TABLE run_resumes;
ALTER TABLE run_resumes_0007 RENAME TO run_resumes;
CREATE TRIGGER run_resumes_of_deleted_run AFTER DELETE ON runs
BEGIN
    DELETE FROM run_resumes WHERE run_id = old.id;
END;
