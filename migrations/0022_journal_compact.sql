-- 0022: the finished runs whose journal (events.jsonl) is still to be compacted
-- (server/store/journal_compact.c): the writer adds a run as it commits its final
-- status, the compactor's thread deletes the row once the journal keeps only what the
-- database does not hold. Runs already finished are added here, once, so that their
-- journals are compacted in the background after this start, not walked at each start.
CREATE TABLE IF NOT EXISTS journal_compact (run_id INTEGER PRIMARY KEY);
INSERT OR IGNORE INTO journal_compact (run_id)
    SELECT id FROM runs WHERE status IN ('succeeded', 'failed', 'canceled', 'stopped', 'timeout');
