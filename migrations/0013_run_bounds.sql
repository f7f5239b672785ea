-- 0013: each run bounded. A user's largest memory limit for a run and its quota of
-- disk (ddpd user add|set NAME --max-memory-gb N --max-disk-gb N; GiB, NULL: none).
-- A run's memory limit as its config asked (resources.memory_gb, in bytes; NULL: the
-- server's default, decided when it starts), kept here rather than read back from its
-- config.json, which its account may change. What its directory held on disk when the
-- server last measured it (bytes, walked without following links; NULL: never), and
-- when: a user's usage is the sum over its runs.
ALTER TABLE users ADD COLUMN max_memory_gb REAL;
ALTER TABLE users ADD COLUMN max_disk_gb REAL;
ALTER TABLE runs ADD COLUMN memory_bytes INTEGER;
ALTER TABLE runs ADD COLUMN disk_bytes INTEGER;
ALTER TABLE runs ADD COLUMN disk_measured_at INTEGER;
