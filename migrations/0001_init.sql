-- 0001: the first schema. Runs and what their trainers report: every step's
-- metrics, epochs, rank status and heartbeats, checkpoints.
-- Times are unix milliseconds. Applied by ddpd at start-up (server/migrate.c),
-- in one transaction, recorded in PRAGMA user_version.

CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: run directories are named by id
    name TEXT,
    status TEXT NOT NULL CHECK (status IN ('queued', 'starting', 'running', 'canceling',
                                           'succeeded', 'failed', 'canceled')),
    reason TEXT,                  -- why it failed or was canceled, for a person
    config TEXT NOT NULL,         -- JSON: as submitted, defaults filled
    world_size INTEGER NOT NULL,
    device_kind TEXT NOT NULL CHECK (device_kind IN ('cpu', 'gpu')),
    devices TEXT,                 -- JSON array of device names, once started
    pid INTEGER,                  -- the launcher's pid, which is its process group id
    exit_code INTEGER,
    exit_signal INTEGER,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    -- progress: from rank 0's hello, then from its latest step event
    epochs INTEGER,
    total_steps INTEGER,
    steps_per_epoch INTEGER,
    epoch INTEGER,
    step INTEGER,
    global_step INTEGER,
    loss REAL,
    lr REAL,
    samples_per_s REAL,
    first_step_at INTEGER,
    first_global_step INTEGER,
    last_step_at INTEGER
);
CREATE INDEX runs_by_status ON runs (status, id);

-- One row per training step (rank 0's step events): the loss, lr and samples_per_s
-- series. Clustered by (run, step), so a series is one range scan.
CREATE TABLE steps (
    run_id INTEGER NOT NULL,
    global_step INTEGER NOT NULL,
    epoch INTEGER,
    step INTEGER,
    loss REAL,
    lr REAL,
    samples_per_s REAL,
    t INTEGER NOT NULL,
    PRIMARY KEY (run_id, global_step)
) WITHOUT ROWID;

CREATE TABLE epochs (
    run_id INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    lr REAL,
    train_loss REAL,
    test_loss REAL,
    test_acc REAL,
    seconds REAL,
    samples_per_s REAL,
    t INTEGER NOT NULL,
    PRIMARY KEY (run_id, epoch)
) WITHOUT ROWID;

CREATE TABLE ranks (
    run_id INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    pid INTEGER,
    host TEXT,
    device TEXT,
    state TEXT,
    detail TEXT,
    global_step INTEGER,
    step_ms REAL,
    connected_at INTEGER,
    last_seen INTEGER,
    PRIMARY KEY (run_id, rank)
) WITHOUT ROWID;

CREATE TABLE checkpoints (
    run_id INTEGER NOT NULL,
    global_step INTEGER NOT NULL,
    epoch INTEGER,
    path TEXT,
    bytes INTEGER,
    t INTEGER NOT NULL,
    PRIMARY KEY (run_id, global_step)
) WITHOUT ROWID;
