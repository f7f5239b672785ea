/* Every kind of change ddpd makes to its store, in one table: the events trainers
 * report (hello, status, step, heartbeat, epoch, checkpoint) and the run-life ops of
 * the server's own (insert, starting, running, canceling, finish, delete, resume).
 *
 * One entry per kind says everything about it: the event type it is on the socket
 * and how its fields are read from one (ingest), the SQL that applies it and how it
 * is bound (the store's writer), and what the live feed publishes for it (a durable
 * SSE event, or coalesced progress). Ingest's dispatch, the writer's apply and the
 * feed's record are loops over this table. A kind's parse may hand the op to another
 * kind (a reporter's `metric` becomes a step, an epoch or, from a rank other than 0,
 * a heartbeat): it sets op->kind.
 *
 * A trainer event's fields are described once, each by an op_field (its name, type,
 * place in store_op, flags), and the descriptors drive everything done with them
 * (kind_fields.h): reading them from the event, the SQL of the row they are stored
 * in and its binding, the feed's data, and the API's rows (store_read.c's epochs and
 * checkpoints). A field has one name: in the event, as the column, in the feed's
 * data and in the API.
 *
 * A new field of an event kind is: its member in the kind's struct below, one
 * op_field line in its kind's list (event_kinds.c), its column's migration
 * (migrations/NNNN_*.sql), and its place in schema/events.schema.json and
 * schema/openapi.json. With that it is read, stored, published (FIELD_FEED) and, an
 * epoch's or a checkpoint's, in the API's rows. Two views list their columns
 * themselves (store_read.c): GET /runs/{id}/ranks, which joins what hello, status
 * and heartbeat store in a rank's row in its own order (the GPU's memory nested),
 * and a step's series (metric_names). A new event kind is all that for each field,
 * its member of the union and of store_op_kind below, its entry in OP_KINDS (fields,
 * the row they go to, how it applies: most kinds use the generic functions), its
 * table's migration, and its `type` in the two schemas.
 * tests/server/test_kind_fields.c holds the descriptors against the migrated schema
 * and both schemas; tests/server/test_kind_bytes.c holds what every kind becomes,
 * byte for byte. */
#ifndef DDPD_CORE_EVENT_KINDS_H
#define DDPD_CORE_EVENT_KINDS_H

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
    /* run life */
    OP_RUN_INSERT,    /* result: the new run's id (the op's run_id when set: a rebuilt run) */
    OP_RUN_STARTING,
    OP_RUN_RUNNING,
    OP_RUN_CANCELING,
    OP_RUN_FINISH,
    OP_RUN_DELETE,    /* result: 1 if deleted (finished runs only), else 0 */
    OP_RUN_RESUME,    /* result: 1 if a failed or canceled built-in run is queued again, else 0 */
    OP_SYNC,          /* nothing: waiting on it waits for everything queued before */
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
        struct {
            int64_t epoch, step, global_step;
            double loss, lr, samples_per_s;
            json_t *series; /* a reporter's other values {name: number or null}; NULL: none */
        } step;
        struct { int64_t global_step; double step_ms; int64_t gpu_mem_used, gpu_mem_total; } heartbeat;
        struct { int64_t epoch; double lr, train_loss, test_loss, test_acc, seconds, samples_per_s; } epoch;
        struct { int64_t epoch, global_step, bytes; char *path; json_t *removed; } checkpoint;
        struct { char *name, *config; int world_size; const char *device_kind; bool command; } insert;
        struct { char *devices, *secret; int64_t pid, pid_start_time; } starting;
        struct { const char *status; char *reason; int64_t exit_code, exit_signal; } finish;
        struct { char *from_checkpoint; int64_t from_epoch, from_global_step; } resume;
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

#define OP_MAX_SQL 7

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
} op_row;

typedef struct {
    store_op_kind kind;
    /* The event's type on the socket; NULL for the server's own ops. */
    const char *event;
    /* Socket -> op: reads the event's own fields into *op (its kind, run, rank and t
     * are set). Returns NULL, or why the event is skipped ("a step event without ..."). */
    const char *(*parse)(const json_t *ev, store_op *op);
    /* A trainer event's fields, and the row they go to (kind_fields.h). */
    const op_field *fields;
    int n_fields;
    const op_row *row;
    /* Its event's other fields, which its parse reads itself, ingest reads, or
     * nothing keeps (tests/server/test_kind_fields.c holds them against the schema). */
    const char *const *other_fields;
    /* The statements it runs besides its row's (op_kind_sql), prepared once by the
     * writer; apply binds and runs them inside the writer's transaction and returns
     * the op's result. */
    const char *sql[OP_MAX_SQL];
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

extern const op_kind_desc OP_KINDS[OP_KIND_COUNT];

/* The kind whose socket event type is `type`; NULL when none is. */
const op_kind_desc *op_kind_for_event(const char *type);

/* The SQL of kind k's statement i (st[i] of its apply): its row's statements, built
 * from its fields (the row; with FIELD_OF_RUN fields, the run's UPDATE), then its
 * `sql`. NULL past the last. Built once; kept for the life of the process. */
const char *op_kind_sql(store_op_kind k, int i);

/* Kind k's field `name`; NULL when it has none. */
const op_field *op_kind_field(store_op_kind k, const char *name);

/* Frees an op's strings (ops that were never queued, or once applied). */
void store_op_free(store_op *op);

/* Reading an event's fields: NO_INT / NaN / NULL when absent or of another type (kind_fields.c,
 * beside the parse of fields that calls them for every field). */
int64_t event_int(const json_t *ev, const char *key);
double event_real(const json_t *ev, const char *key);
char *event_str(const json_t *ev, const char *key); /* malloc'd */

#endif
