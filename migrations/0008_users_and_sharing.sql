-- 0008: sharing a box. Users (ddpd user add/list/token/remove): each with a token of
-- which only the SHA-256 is kept, whether it is an admin, its quota and the highest
-- priority it may give a run. A removed user's row stays (its token gone), so that
-- its runs keep their owner and its name is not taken by someone else unawares.
CREATE TABLE users (
    name TEXT PRIMARY KEY,
    token_sha256 TEXT UNIQUE,          -- hex; NULL once removed
    admin INTEGER NOT NULL DEFAULT 0,
    max_devices INTEGER,               -- devices its runs may hold at once; NULL: no quota
    max_priority INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    removed_at INTEGER
);

-- Each run's owner (NULL: submitted before users existed, or with the server's own
-- token), its priority and whether it may be preempted (from its config, kept here
-- for the scheduler after a restart), when it last entered the queue (the oldest
-- first among equals), and its preemptions: by which run and when it last lost its
-- devices, how often, and whether one is under way (a server that dies then queues
-- it again at start-up instead of failing it).
ALTER TABLE runs ADD COLUMN owner TEXT;
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN preemptible INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN queued_at INTEGER;
ALTER TABLE runs ADD COLUMN preempted_by INTEGER;
ALTER TABLE runs ADD COLUMN preempted_at INTEGER;
ALTER TABLE runs ADD COLUMN preemptions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN preempting INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET queued_at = created_at;

-- Fair share: each owner's decayed usage in device-seconds, as of a time; the spans
-- of runs that ended are folded in (server/core/fair_share.h). owner '' stands for
-- runs of nobody in particular.
CREATE TABLE usage (
    owner TEXT PRIMARY KEY,
    device_seconds REAL NOT NULL,
    as_of INTEGER NOT NULL
) WITHOUT ROWID;
