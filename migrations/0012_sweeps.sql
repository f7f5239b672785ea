-- 0012: sweeps (POST /sweeps). A sweep is a base run config, its parameters, a search
-- method and a searcher (ASHA, median stopping); its trials are runs. Every decision
-- of the searcher is a row here, written before the scheduler is asked to act on it,
-- so a restarted server carries each sweep on from what it decided.

-- A new final run status: 'stopped', a trial its sweep's searcher stopped (at a rung,
-- or worse than the median), neither failed nor canceled. Adding a value to a CHECK's
-- list only loosens it (every row already satisfies the new one), which SQLite allows
-- by rewriting the table's definition in place.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql, '''succeeded'', ''failed'', ''canceled'')',
                                            '''succeeded'', ''failed'', ''canceled'', ''stopped'')')
 WHERE type = 'table' AND name = 'runs';
PRAGMA writable_schema = RESET;

-- A trial's run carries its sweep and its number (NULL: not a trial).
ALTER TABLE runs ADD COLUMN sweep_id INTEGER;
ALTER TABLE runs ADD COLUMN trial INTEGER;
CREATE INDEX runs_by_sweep ON runs (sweep_id, trial) WHERE sweep_id IS NOT NULL;

CREATE TABLE sweeps (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    owner TEXT,                       -- the submitter (a user), NULL: nobody in particular
    spec TEXT NOT NULL,               -- JSON: the sweep as submitted, defaults filled
    status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'canceled')),
    reason TEXT,
    n_trials INTEGER NOT NULL,        -- how many trials it will make in all
    best_trial INTEGER,               -- the best finished trial so far, by the metric
    created_at INTEGER NOT NULL,
    finished_at INTEGER
);

-- One row per trial, from the moment the searcher decides to make it.
CREATE TABLE sweep_trials (
    sweep_id INTEGER NOT NULL,
    trial INTEGER NOT NULL,           -- 0, 1, 2, ... in the order they are made
    params TEXT NOT NULL,             -- JSON: {"train.optimizer.lr": 0.01, ...}
    run_id INTEGER,                   -- NULL until its run is stored
    state TEXT NOT NULL CHECK (state IN ('pending', 'running', 'paused', 'succeeded', 'failed', 'canceled',
                                         'stopped')),
    rung INTEGER NOT NULL DEFAULT -1, -- the highest rung it reached (ASHA), -1: none
    promoted INTEGER NOT NULL DEFAULT -1, -- the highest rung it was promoted from, -1: none
    metric REAL,                      -- its latest value of the sweep's metric
    metric_epoch INTEGER,             -- the epoch that value is of
    reason TEXT,                      -- why the searcher stopped it
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (sweep_id, trial)
) WITHOUT ROWID;

-- What the searcher saw at each rung (ASHA) or epoch (median): the metric a trial had
-- there, once, so its decisions are made again the same way after a restart.
CREATE TABLE sweep_rungs (
    sweep_id INTEGER NOT NULL,
    rung INTEGER NOT NULL,            -- ASHA: the rung; median: the epoch
    trial INTEGER NOT NULL,
    metric REAL NOT NULL,
    t INTEGER NOT NULL,
    PRIMARY KEY (sweep_id, rung, trial)
) WITHOUT ROWID;

-- The searcher's decisions, in order: made, paused, promoted, stopped, ended.
CREATE TABLE sweep_decisions (
    sweep_id INTEGER NOT NULL,
    n INTEGER NOT NULL,
    trial INTEGER,
    action TEXT NOT NULL,
    detail TEXT,
    t INTEGER NOT NULL,
    PRIMARY KEY (sweep_id, n)
) WITHOUT ROWID;
