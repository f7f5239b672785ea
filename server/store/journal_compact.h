/* Compacting a finished run's journal (events.jsonl), once what it holds is in the
 * database: the journal of a long run is mostly its `step` lines (and heartbeats),
 * and every one of them the store holds is in the database twice over.
 *
 * What is kept: every line but the steps and heartbeats the store holds, by the
 * replay's own rule (journal_replay.c: an event of a rank journaled before the newest
 * the store has of that rank). So the hellos, statuses, epochs, checkpoints, the
 * launcher's attempts, rank states and `end` stay, and so does any step the database
 * never took (a finished run takes none): a rebuild from the run directories
 * (history_rebuild.h) still finds each run's status, reason, exit code, epochs and
 * checkpoints, and a resumed run's replay still finds where each rank was. A line
 * that does not parse, and one that is not this run's, is kept as it is.
 *
 * When: the writer that commits a run's final status (run_ops.c, finish) writes the
 * run into the table journal_compact in the same transaction; this module's thread
 * takes those rows, at start too (no walk of the run directories: a start costs the
 * same whatever the history), compacts and deletes each row through the writer.
 * A journal is rewritten as run_files.h writes any file: a fresh file of the
 * directory's account (0600), flushed, renamed over the name. So a crash leaves the
 * whole journal or the compacted one, never a part, and the row is done again at the
 * next start (compacting a compacted journal changes nothing).
 *
 * Never under a writer: the rewrite is made only while the run's status in the
 * database is final and no start of it by this server has come since its end
 * (journal_writers.h, which each executor tells before its processes exist, under
 * the lock the rewrite holds), and only when the journal has not grown since it
 * was read.
 * Never another run's file: the journal is reached as run_files.h reaches any file
 * of a run (no link followed, the account's own regular file), and only its name is
 * replaced, never the file written through. A live run's journal is never touched. */
#ifndef DDPD_SERVER_STORE_JOURNAL_COMPACT_H
#define DDPD_SERVER_STORE_JOURNAL_COMPACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A compacted journal larger than this is left as it is (logged). */
#define JOURNAL_COMPACT_MAX_KEPT (64 << 20)

typedef enum {
    COMPACT_DONE,    /* compacted (or nothing to compact: no journal, no such run) */
    COMPACT_REFUSED, /* left as it is for good: a link, not the account's file, too much kept (logged) */
    COMPACT_LATER,   /* not now: the run is live again, or its journal grew while read */
    COMPACT_ERROR,   /* a read or write failed (logged): tried again later */
} compact_outcome;

typedef struct {
    int64_t bytes_before, bytes_after; /* the journal's size before and after */
    int64_t lines_dropped;             /* lines dropped (each a step or heartbeat the store holds) */
} compact_counts;

/* Compacts run `id`'s journal now, on the calling thread (it reads the store). */
compact_outcome journal_compact_run(int64_t id, compact_counts *out);

/* The thread that works through the table: started once the store is open, stopped
 * before it closes. */
int journal_compact_start(void);
void journal_compact_stop(void);

#endif
