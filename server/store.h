/* The run store: SQLite in WAL mode, schema from migrations/.
 *
 * Writes: one writer thread owns the only connection that writes. Everything that
 * changes the database (ingested events, run state changes, inserts, deletes) is a
 * store_op queued to it; it applies whatever has queued up in one transaction, in
 * queue order, so ingest keeps up with thousands of steps per second and a run's
 * final status is always written after the events that preceded it.
 *
 * Reads (store_read.c): every reading thread has its own connection; with WAL a
 * reader sees the last committed transaction and never waits on the writer. */
#ifndef DDPD_STORE_H
#define DDPD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    /* ingested events (ints may be NO_INT, doubles NaN: stored as NULL) */
    OP_HELLO,
    OP_STATUS,
    OP_STEP,
    OP_HEARTBEAT,
    OP_EPOCH,
    OP_CHECKPOINT,
    /* run life */
    OP_RUN_INSERT,    /* result: the new run's id */
    OP_RUN_STARTING,
    OP_RUN_RUNNING,
    OP_RUN_CANCELING,
    OP_RUN_FINISH,
    OP_RUN_DELETE,    /* result: 1 if deleted (finished runs only), else 0 */
    OP_SYNC,          /* nothing: waiting on it waits for everything queued before */
} store_op_kind;

typedef struct store_wait store_wait;

/* Strings are malloc'd and owned by the op once queued. */
typedef struct {
    store_op_kind kind;
    int64_t run_id;
    int rank;
    int64_t t; /* unix ms: when it happened */
    union {
        struct { int64_t pid, total_steps, epochs, steps_per_epoch; char *host, *device; } hello;
        struct { char *state, *detail; } status;
        struct { int64_t epoch, step, global_step; double loss, lr, samples_per_s; } step;
        struct { int64_t global_step; double step_ms; int64_t gpu_mem_used, gpu_mem_total; } heartbeat;
        struct { int64_t epoch; double lr, train_loss, test_loss, test_acc, seconds, samples_per_s; } epoch;
        struct { int64_t epoch, global_step, bytes; char *path; } checkpoint;
        struct { char *name, *config; int world_size; const char *device_kind; } insert;
        struct { char *devices; int64_t pid; } starting;
        struct { const char *status; char *reason; int64_t exit_code, exit_signal; } finish;
    } u;
    store_wait *wait; /* set by store_submit_wait */
} store_op;

/* Opens (creating) the database, applies the migrations, starts the writer. */
int store_open(const char *path, char *err, size_t errlen);
/* Applies what is queued, stops the writer, closes the database. */
void store_close(void);
const char *store_path(void);

/* Queues ingested events (taking their strings). Blocks while the writer is far
 * behind, so that a flood of events slows its senders instead of eating memory. */
void store_submit(const store_op *ops, size_t n);
/* Queues one op and never blocks: run state changes, from any thread. */
void store_submit_now(const store_op *op);
/* Queues one op and waits until it is committed. Returns its result (see above),
 * or -1 when the transaction failed. */
int64_t store_submit_wait(const store_op *op);
/* Waits until everything queued before the call is committed. */
void store_sync(void);

/* Frees an op's strings (ops that were never queued). */
void store_op_free(store_op *op);

#endif
