-- 0017: each failed attempt's class (docs/failures.md): what ended it (oom, hang,
-- collective, crash, script_error, exit, infra, data, config), the line or counter
-- that decided it, and the node it failed on. The launcher's `attempt` event of the
-- end carries them (failure_class, failure_evidence, failure_node), and so does the
-- server's own word on an attempt it ended (a hang, a lost node). GET /runs/{id}
-- shows them as each attempt's `failure`, with its failing_rank, exit_code and signal.
ALTER TABLE run_attempts ADD COLUMN failure_class TEXT;
ALTER TABLE run_attempts ADD COLUMN failure_evidence TEXT;
ALTER TABLE run_attempts ADD COLUMN failure_node TEXT;
