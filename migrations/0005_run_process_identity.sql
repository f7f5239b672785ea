-- 0005: what a restarted server needs to take a started run back. The launcher's
-- start time (field 22 of /proc/PID/stat, clock ticks after boot) tells its process
-- from a later one that was given the same pid; the run's secret opens the event
-- socket again for the processes that reconnect (the server kept it in memory only).
ALTER TABLE runs ADD COLUMN pid_start_time INTEGER;
ALTER TABLE runs ADD COLUMN secret TEXT;
