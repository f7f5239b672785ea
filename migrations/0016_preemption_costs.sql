-- 0016: who pays for a preemption, and time limits.
--
-- A new final run status: 'timeout', a run that reached its max_duration_s (its own or
-- its owner's) and was stopped, resumable as a canceled run is. Adding a value to a
-- CHECK's list only loosens it (as 0012 did for 'stopped').
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql, '''canceled'', ''stopped'')', '''canceled'', ''stopped'', ''timeout'')')
 WHERE type = 'table' AND name = 'runs';
PRAGMA writable_schema = RESET;

-- The longest a user's run may run (seconds, each run's max_duration_s at most this);
-- NULL: no limit (`ddpd user set NAME --max-duration`).
ALTER TABLE users ADD COLUMN max_duration_s INTEGER;

-- A preempted run's next rollback (the work since its checkpoint, thrown away) and its
-- next start-up are charged to the run that preempted it (server/store/usage_ledger.c):
-- charged_to is that run until the victim's first step after it.
ALTER TABLE run_usage ADD COLUMN charged_to INTEGER;

-- What was charged, by UTC day: run_id and owner are the victim's, by_run and
-- by_owner who caused it and pays (its usage_days rows carry it as phase 'lost');
-- phase is what it was for the victim ('lost' or 'startup'), in device ms.
CREATE TABLE usage_charged (
    day       TEXT NOT NULL,
    run_id    INTEGER NOT NULL,
    owner     TEXT,
    phase     TEXT NOT NULL,
    by_run    INTEGER NOT NULL,
    by_owner  TEXT,
    device_ms INTEGER NOT NULL,
    PRIMARY KEY (day, run_id, phase, by_run)
);
