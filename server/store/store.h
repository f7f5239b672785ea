/* The run store: SQLite in WAL mode, schema from migrations/.
 *
 * Writes: one writer thread owns the only connection that writes. Everything that
 * changes the database (ingested events, run state changes, inserts, deletes) is a
 * store_op queued to it; it applies whatever has queued up in one transaction, in
 * queue order, so ingest keeps up with thousands of steps per second and a run's
 * final status is always written after the events that preceded it.
 *
 * Reads (store_read.c): every reading thread has its own connection; with WAL a
 * reader sees the last committed transaction and never waits on the writer.
 *
 * Versions (run_versions.h): after each commit, the writer bumps the version of
 * every run the batch touched, so that what is cached of a run is known current
 * without a query.
 *
 * Faults (write_fault.h): a batch that cannot be committed because the database
 * cannot be written (a full disk, an I/O error, its lock held by another process) is
 * rolled back and kept, in order, and tried again after 50 ms, doubling to 2 s; what
 * is queued meanwhile joins it behind. Run state changes are never dropped. What a
 * caller waits for and can ask again (a new run, a deletion, a sync) is answered
 * -1 at once instead, and not kept. Ingested events wait in store_submit while
 * QUEUE_MAX ops are not yet written, so that memory stays bounded (the trainers keep
 * their journals). store_health_take says all this to /healthz and /metrics. */
#ifndef DDPD_SERVER_STORE_STORE_H
#define DDPD_SERVER_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "event_kinds.h"

/* What the store tells its observer (the live feed, wired by main.c): attach once,
 * on the writer's connection after the migrations (the observer prepares what it
 * writes inside the writer's transactions); record for each op applied, inside the
 * transaction, with apply's result; commit after COMMIT (true) or ROLLBACK. */
typedef struct {
    int (*attach)(sqlite3 *db, char *err, size_t errlen);
    void (*detach)(void);
    void (*record)(const store_op *op, int64_t result);
    void (*commit)(bool committed);
} store_observer;

/* What the store tells the answers cached above it (api/run_cache.c, wired by
 * main.c), after each commit and after the runs' versions (run_versions.h) are
 * bumped: a run is gone, its cached answer can go too. */
typedef struct {
    void (*run_deleted)(int64_t run_id);
} store_cache_hooks;

/* Opens (creating) the database, applies the migrations, starts the writer.
 * `observer` and `cache` may be NULL. */
int store_open(const char *path, const store_observer *observer, const store_cache_hooks *cache, char *err,
               size_t errlen);
/* Applies what is queued, stops the writer, closes the database. */
void store_close(void);

/* Queues ingested events (taking their strings). Blocks while the writer is far
 * behind, so that a flood of events slows its senders instead of eating memory. */
void store_submit(const store_op *ops, size_t n);
/* Queues one op and never blocks: run state changes, from any thread. */
void store_submit_now(const store_op *op);
/* Queues one op and waits until it is committed. Returns its result (see above),
 * or -1 when the transaction failed (see Faults above). */
int64_t store_submit_wait(const store_op *op);
/* Waits until everything queued before the call is committed (or, while the
 * database cannot be written, returns at once). */
void store_sync(void);

/* Whether the writer can write, for /healthz and /metrics. */
typedef struct {
    bool writable;           /* false from a failed attempt until a commit goes through */
    char reason[256];        /* why not, SQLite's words: "database or disk is full" */
    int64_t since_ms;        /* unix ms of this outage's first failed attempt */
    uint64_t attempts;       /* failed attempts in this outage */
    uint64_t pending;        /* writes not yet written: the batch kept and the queue */
    bool events_held;        /* the queue is full: ingested events wait */
    uint64_t failed_total;   /* failed attempts since start */
    uint64_t refused_total;  /* waited-for ops answered "failed" (not kept) since start */
} store_health;

void store_health_take(store_health *out);
/* While the database cannot be written: one sentence for a person into why ("the
 * database cannot be written: database or disk is full (PATH); 1234 writes waiting,
 * retried for 12 s: free space on its disk, and they are written in order"), and
 * true. False (why untouched) when it can be written. */
bool store_unwritable(char *why, size_t len);

#endif
