-- 0020: a restart's first step (GET /runs/{id}'s attempts[].first_step), kept with its
-- attempt as the steps are written (server/store/attempt_steps.c), instead of found
-- on every read by a scan of the run's steps from its first (230 ms at 1.9M steps).
-- NULL for the first attempt and for a restart that has written no step yet. The
-- attempts already on record get theirs here, by that scan, once.
ALTER TABLE run_attempts ADD COLUMN first_global_step INTEGER;
UPDATE run_attempts SET first_global_step = coalesce(
    (SELECT global_step FROM steps WHERE run_id = run_attempts.run_id AND t >= run_attempts.started_at
     ORDER BY global_step LIMIT 1),
    (SELECT min(global_step) FROM series_points WHERE run_id = run_attempts.run_id AND t >= run_attempts.started_at))
WHERE attempt > 0 AND started_at IS NOT NULL;
