/* The store's ops and how a kind of them is described: the types that the table of
 * kinds (event_kinds.h) and what a kind's fields drive (kind_fields.h) share. */
#ifndef DDPD_SERVER_STORE_OP_TYPES_H
#define DDPD_SERVER_STORE_OP_TYPES_H

#include <jansson.h>
#include <sqlite3.h>
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
    OP_METRIC,        /* a reporter's metric: parsed into a step, epoch or heartbeat op */
    OP_ATTEMPT_STARTED, /* a launcher's attempt of its ranks began (its `attempt` event; the phase picks the kind) */
    OP_ATTEMPT_ENDED,   /* ... and ended; also the server's own word on an attempt it ended (sched/run_restart.c) */
    OP_RANK_STATE,      /* a launcher's word on one of its ranks' processes: started, exited, killed */
    /* run life */
    OP_RUN_INSERT,    /* result: the new run's id (the op's run_id when set: a rebuilt run) */
    OP_RUN_STARTING,
    OP_RUN_RUNNING,
    OP_RUN_CANCELING,
    OP_RUN_FINISH,
    OP_RUN_DELETE,    /* result: 1 if deleted (finished runs only), else 0 */
    OP_RUN_RESUME,    /* result: 1 if a failed or canceled run is queued again, else 0 */
    OP_RUN_PREEMPTING, /* result: 1 if a started run is marked as being preempted, else 0 */
    OP_RUN_REQUEUE,   /* result: 1 if a preempted run is queued again, else 0 */
    OP_RUN_RESTART,   /* a started run queued again to restart (sched/run_restart.c): result 1, else 0 */
    OP_USAGE,         /* an owner's decayed usage as of op.t (fair share) */
    OP_RUN_SUBMITTED, /* a queued run handed to a batch system (Slurm): its job id and secret, while it waits there */
    OP_SYNC,          /* nothing: waiting on it waits for everything queued before */
    OP_RUN_REASON,    /* a stopped run's reason, as its sweep's searcher decided on it (u.finish.reason): 1, else 0 */
    OP_SWEEP_EVENT,   /* a sweep's searcher decided (server/sweep/): nothing stored but the feed's `sweep` event */
    OP_SWEEP_WRITE,   /* the sweeps' tables written (server/sweep/sweep_store.c: u.exec.sql): result the last rowid, or 1 */
    OP_RUN_DISK,      /* what a run's directory holds on disk, as last measured (u.disk): 1, else 0 */
    OP_TIMELINE,      /* an entry of a run's timeline (u.timeline): 1, else 0 */
    OP_AUDIT,         /* an entry of the audit log (u.audit, audit.h): its id, else -1 */
    OP_JOURNAL_COMPACTED, /* a finished run's journal compacted (journal_compact.h): its row goes; 1, else 0 */
    OP_KIND_COUNT
} store_op_kind;

typedef struct store_wait store_wait;

/* One change. Strings are malloc'd and owned by the op once queued. */
typedef struct {
    store_op_kind kind;
    int64_t run_id;
    int rank;
    int64_t t; /* unix ms: when it happened */
    union {
        struct { int64_t pid, total_steps, epochs, steps_per_epoch; char *host, *device; } hello;
        struct { char *state, *detail; } status;
        struct { int64_t pid; char *host, *state, *detail; } rank_state; /* op.rank: the rank it is about */
        struct {
            int64_t epoch, step, global_step;
            double loss, lr, samples_per_s;
            json_t *series; /* a reporter's other values {name: number or null}; NULL: none */
            bool of_reporter; /* a reporter's metric (a command run's rank 0): its rank's row has its step too,
                               * and a restart's first cuts what an earlier attempt left past it */
        } step;
        struct { int64_t global_step; double step_ms; int64_t gpu_mem_used, gpu_mem_total; } heartbeat;
        struct {
            int64_t epoch;
            double lr, train_loss, test_loss, test_acc, seconds, samples_per_s;
            json_t *series; /* a reporter's other values {name: number or null}: per-epoch series; NULL: none */
        } epoch;
        struct { int64_t epoch, global_step, bytes; char *path; json_t *removed; } checkpoint;
        struct {
            int64_t attempt, master_port;   /* started */
            char *checkpoint;
            json_t *log_offsets;            /* {"RANK": byte or null}; NULL: none */
            char *status, *reason, *last_line; /* ended */
            int64_t failing_rank, exit_code, signal;
            char *failure_class, *failure_evidence, *failure_node; /* a failed attempt's class (failure_class.h) */
            bool restarting;
            double backoff_s;
            bool reopen; /* started again after a resize (the scheduler says): the attempt's row reads running again,
                          * its first start, checkpoint and log offsets kept */
        } attempt;
        struct {
            char *name, *config, *owner; /* owner NULL: nobody in particular */
            int world_size, priority;
            const char *device_kind;
            bool command, preemptible;
            int64_t sweep_id; /* a sweep's trial (server/sweep/): its sweep and number; 0: not a trial */
            int trial;
            int64_t memory_bytes; /* resources.memory_gb as asked, in bytes; 0: the server's default */
            char *actor; /* who submitted it: its audit entry, in the same transaction (NULL: none, a rebuilt run) */
            char *submitted; /* its timeline's "submitted" entry's detail (JSON text), in it too (NULL: none) */
        } insert;
        struct {
            int64_t sweep_id;
            int trial; /* -1: the sweep's own (submitted, finished, canceled) */
            char *action, *detail, *status; /* detail may be NULL; status: the trial's, or the sweep's */
        } sweep;
        struct {
            char *sql; /* statements with their values in them (sqlite3_mprintf's %Q) */
        } exec;
        struct { char *devices, *secret, *job; int64_t pid, pid_start_time; } starting;
        struct { char *job, *secret; } submitted;
        struct { const char *status; char *reason; int64_t exit_code, exit_signal; } finish;
        struct { char *from_checkpoint; int64_t from_epoch, from_global_step, attempt; } resume;
        struct { int64_t by; } preempting;
        /* from_global_step: what it continues from (its checkpoint's; 0: the start);
         * NO_INT: what it recorded stays (a command run's restart reports again) */
        struct { int64_t by, from_epoch, from_global_step; int resized_to; char *reason; } requeue; /* resized_to: an elastic run's resize (0: a preemption); reason NULL: "preempted by run N" */
        struct { int64_t attempt; char *reason; } restart; /* the attempt it starts at next, and why */
        struct { char *owner; double device_seconds; } usage; /* owner NULL: nobody in particular */
        struct { int64_t bytes; } disk; /* op.t: when it was measured */
        struct { const char *kind; char *detail; } timeline; /* kind: a constant; detail: JSON text or NULL */
        /* subject NULL: the run's owner (op.run_id); detail: a JSON object's text, or NULL */
        struct { char *actor, *action, *target, *subject, *detail; } audit;
    } u;
    store_wait *wait; /* set by store_submit_wait */
} store_op;

/* What the live feed knows of a live run, from its hello and its first step: enough
 * to say how far it is and how long it has left. */
typedef struct {
    int64_t run_id, total_steps, epochs, steps_per_epoch, first_gs, first_t;
} run_facts;

/* The batch summaries the writer folds an op into (one UPDATE per run or rank per
 * transaction, not per op). */
#define SUMMARY_PROGRESS 1u /* a step: the run's progress columns */
#define SUMMARY_SEEN 2u     /* the rank's last_seen */

#define OP_MAX_SQL 9

/* ---- a trainer event's fields ---- */

typedef enum { FIELD_INT, FIELD_REAL, FIELD_TEXT } field_type; /* int64_t, double, char * (malloc'd) */

#define FIELD_REQUIRED 1u /* the event is skipped without it (op_field.missing says why) */
#define FIELD_KEY 2u      /* with run_id, the key of the kind's row: never updated */
#define FIELD_KEEP 4u     /* an update without it keeps what is stored */
#define FIELD_OF_RUN 8u   /* stored on the run's row (an UPDATE of runs), not the kind's */
#define FIELD_FEED 16u    /* in the kind's SSE data */

typedef struct {
    const char *name; /* in the event, the column, the feed's data and the API */
    field_type type;  /* absent or of another JSON type: NO_INT, NaN, NULL (stored as NULL) */
    size_t offset;    /* of its value in store_op */
    unsigned flags;
    const char *missing; /* FIELD_REQUIRED: why an event without it is skipped */
} op_field;

typedef enum {
    ROW_REPLACE,        /* INSERT OR REPLACE: the newest is the row */
    ROW_UPSERT,         /* a row there is updated (FIELD_KEEP: only with what the op knows) */
    ROW_UPSERT_CHANGED, /* ... and only when a field changed: the same again (a journal
                           replayed over what the socket brought) changes nothing, no event */
} row_write;

/* The row a kind's fields are stored in: one of `table` per run and rank
 * (per_rank), or per run and the kind's key fields. */
typedef struct {
    const char *table;
    bool per_rank;
    const char *t_columns[2]; /* the op's time goes to these */
    const char *t_member;     /* the time's name in the API's rows (store_read.c) */
    const char *insert_column, *insert_value; /* what a new row gets beside the fields */
    row_write write;
    /* the row's write, when the table stores its fields otherwise than by name (the
     * steps' step_rows, step_rows.h): parameters as fields_row_sql's */
    const char *sql;
} op_row;

typedef struct {
    store_op_kind kind;
    /* The event's type on the socket; NULL for the server's own ops. */
    const char *event;
    /* Sent by a launcher (rank -1): a journal's replay takes its events of this kind
     * (the launcher's events of other kinds change nothing the store keeps). */
    bool of_launcher;
    /* Socket -> op: reads the event's own fields into *op (its kind, run, rank and t
     * are set). Returns NULL, or why the event is skipped ("a step event without ..."). */
    const char *(*parse)(const json_t *ev, store_op *op);
    /* A trainer event's fields, and the row they go to (kind_fields.h). */
    const op_field *fields;
    int n_fields;
    const op_row *row;
    /* Its event's other fields, which its parse reads itself, ingest reads, or
     * nothing keeps (tests/unit/server/test_kind_fields.c holds them against the schema). */
    const char *const *other_fields;
    /* The statements it runs besides its row's (op_kind_sql), prepared once by the
     * writer: a NULL-terminated list that sits beside its apply (NO_SQL: none); apply
     * binds and runs them inside the writer's transaction and returns the op's result. */
    const char *const *sql;
    int64_t (*apply)(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
    unsigned summary;
    /* The feed: a durable SSE event (sse_event, with sse_data's JSON, or none when it
     * returns NULL), recorded in the same transaction; ends_run: the run's progress
     * and facts go. */
    const char *sse_event;
    json_t *(*sse_data)(const store_op *op, int64_t result);
    bool (*ends_run)(const store_op *op, int64_t result);
    /* Coalesced progress (the newest per run and rank, sent ~10 times a second):
     * its SSE event name and data. progress_rank: whose newest it is (-1: the run's;
     * below -1: this op publishes none). */
    const char *progress_event;
    json_t *(*progress_data)(const store_op *op, const run_facts *facts);
    int (*progress_rank)(const store_op *op);
    /* What the feed learns of the run (hello: its sizes; step: the first one). */
    void (*learn)(const store_op *op, run_facts *facts);
    /* Frees what its op holds beside its text fields (those go by their descriptors). */
    void (*free_fields)(store_op *op);
} op_kind_desc;

#endif
