-- 0019: the indexes GET /runs pages through (server/store/run_list.c), each filter a
-- seek into one of them and every page a keyset (id < the cursor), so that a page
-- costs the same at the newest run and at the oldest of 50,000: by owner (alone, and
-- with a status), by sweep in id order, by name (a prefix is a range of it), and by
-- creation time (a window is found as the ids it starts and ends at).
CREATE INDEX runs_by_owner ON runs (owner, id);
CREATE INDEX runs_by_owner_status ON runs (owner, status, id);
CREATE INDEX runs_by_sweep_id ON runs (sweep_id, id) WHERE sweep_id IS NOT NULL;
CREATE INDEX runs_by_name ON runs (name, id);
CREATE INDEX runs_by_created ON runs (created_at);
-- What a start reads of every run (server/sched/disk_use.c: each one's owner, bytes and
-- whether it ended), read from this index alone: a few bytes a run, not its row with
-- its config (a 50,000-run history's table is tens of megabytes, this index one or two).
CREATE INDEX runs_disk ON runs (id, owner, disk_bytes, status);

-- A time window is a range of ids only while creation times never go back as ids go
-- up (a clock stepped back could make one): the store keeps them so from now on
-- (run_ops.c), and a history from before is made so once, here, each run's time
-- raised to the latest of those before it (a run of a stepped-back clock is then
-- dated by its predecessor, a few moments off at most).
UPDATE runs SET created_at = w.t
FROM (SELECT id, max(created_at) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) AS t FROM runs) AS w
WHERE w.id = runs.id AND w.t > runs.created_at;
