-- 0023: the live trials of sweeps, found without a walk of every live run. The sweeps'
-- searcher looks, on each pass (many a second while runs report), for a finished sweep
-- one of whose trials was resumed by hand (server/sweep/sweep_store.c, revived): read
-- through runs_by_status, that walked every queued and running run (10,000 queued: a
-- seek each, 80 ms a pass under load); this index holds only the live runs of sweeps.
CREATE INDEX runs_live_sweep ON runs (sweep_id, trial, id)
    WHERE status IN ('queued', 'starting', 'running') AND sweep_id IS NOT NULL;
