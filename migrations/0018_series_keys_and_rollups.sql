-- 0018: a run's series stored as charts read them. Each series' name is kept once per
-- run (series_keys: an id per name) and its points name it by that id (series_points),
-- instead of repeating the name's text in every point. `series` stays, as a view with
-- the columns it had, for the readers that ask for a series by its name.
-- rollups: each series' coarser levels, kept as its points are written
-- (server/store/rollups.c): for level k (6..40), bucket b holds the steps
-- [b << k, (b + 1) << k): how many points, their sum, the lowest, the highest (a null
-- value, NULL in max_value, counts as the highest) and the last point, each with its
-- step (stored from the bucket's first step, b << k) and time (the lowest's and the
-- highest's stored back from the last point's), small numbers that take a byte or two. A bucket has its row once a later point exists (it is complete);
-- the newest bucket of each level is read from the finer ones. A chart of N points
-- reads about N of them whatever the series' length. key_id: series_keys.id, or -1,
-- -2, -3 for the steps table's loss, lr and samples_per_s.
CREATE TABLE series_keys (
    run_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    id INTEGER NOT NULL, -- 1, 2, ... within the run
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
CREATE UNIQUE INDEX series_keys_by_id ON series_keys (run_id, id);

CREATE TABLE series_points (
    run_id INTEGER NOT NULL,
    key_id INTEGER NOT NULL,
    global_step INTEGER NOT NULL,
    value REAL,
    t INTEGER NOT NULL,
    PRIMARY KEY (run_id, key_id, global_step)
) WITHOUT ROWID;

INSERT INTO series_keys (run_id, key, id)
    SELECT run_id, key, row_number() OVER (PARTITION BY run_id ORDER BY key)
    FROM (SELECT DISTINCT run_id, key FROM series);
INSERT INTO series_points (run_id, key_id, global_step, value, t)
    SELECT s.run_id, k.id, s.global_step, s.value, s.t FROM series s
    JOIN series_keys k ON k.run_id = s.run_id AND k.key = s.key;
DROP TABLE series;

CREATE VIEW series (run_id, key, global_step, value, t) AS
    SELECT p.run_id, k.key, p.global_step, p.value, p.t FROM series_points p
    JOIN series_keys k ON k.run_id = p.run_id AND k.id = p.key_id;

CREATE TABLE rollups (
    run_id INTEGER NOT NULL,
    key_id INTEGER NOT NULL,
    level INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    n INTEGER NOT NULL,
    n_num INTEGER NOT NULL,
    sum_value REAL,
    min_step INTEGER, min_value REAL, min_t INTEGER,
    max_step INTEGER NOT NULL, max_value REAL, max_t INTEGER NOT NULL,
    last_step INTEGER NOT NULL, last_value REAL, last_t INTEGER NOT NULL,
    PRIMARY KEY (run_id, key_id, level, bucket)
) WITHOUT ROWID;

-- The series whose rollups ddpd builds at its next start (those of the points stored
-- before this migration): -1 for a run's steps table, else the series' key id.
CREATE TABLE rollup_backfill (
    run_id INTEGER NOT NULL,
    key_id INTEGER NOT NULL,
    PRIMARY KEY (run_id, key_id)
) WITHOUT ROWID;
INSERT INTO rollup_backfill (run_id, key_id) SELECT DISTINCT run_id, -1 FROM steps;
INSERT INTO rollup_backfill (run_id, key_id) SELECT run_id, id FROM series_keys;

CREATE TRIGGER series_of_deleted_run AFTER DELETE ON runs
BEGIN
    DELETE FROM series_points WHERE run_id = old.id;
    DELETE FROM series_keys WHERE run_id = old.id;
    DELETE FROM rollups WHERE run_id = old.id;
    DELETE FROM rollup_backfill WHERE run_id = old.id;
END;
