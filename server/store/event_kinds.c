/* The table of op kinds (see event_kinds.h), and the kinds trainers and launchers
 * send: each kind's fields and functions sit together, in the table's order: how it
 * is read from the socket, its statements and how they are bound, and what the feed
 * publishes; what its fields drive is kind_fields.c. The server's own ops are
 * run_ops.c's. */
#include "event_kinds.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "attempt_steps.h"
#include "base.h"
#include "step_rows.h"
#include "kind_fields.h"
#include "rollups.h"
#include "run_ops.h"
#include "run_status.h"
#include "views.h"
#include "write_fault.h"

/* ---- describing fields ---- */

/* The place of kind k's member m in store_op, which must be of C type `ctype` (a
 * member of another type does not compile). */
#define FIELD_AT(k, m, ctype) \
    (offsetof(store_op, u.k.m) + 0 * sizeof(char[_Generic(((store_op *)0)->u.k.m, ctype: 1, default: -1)]))
#define INT(k, m) FIELD_INT, FIELD_AT(k, m, int64_t)
#define REAL(k, m) FIELD_REAL, FIELD_AT(k, m, double)
#define TEXT(k, m) FIELD_TEXT, FIELD_AT(k, m, char *)
#define FIELDS(list) .fields = list, .n_fields = (int)(sizeof list / sizeof *list)

/* ---- applying ---- */

/* The event's fields, as its kind describes them. */
static const char *parse_fields(const json_t *ev, store_op *op) { return fields_parse(&OP_KINDS[op->kind], ev, op); }

/* The op's fields into its kind's row (st[0]): the rows it changed. */
static int64_t apply_row(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    fields_bind_row(st[0], &OP_KINDS[op->kind], op);
    return write_fault_step(db, st[0]);
}

/* A rank's row: the launcher's (rank -1) has none, nothing is kept. */
static int64_t apply_rank_row(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    return op->rank < 0 ? 0 : apply_row(db, st, op);
}

/* {run, (rank,) its fields, t} when it changed something (0: refused, the run is
 * finished or gone; or the same again). */
static json_t *sse_fields(const store_op *op, int64_t result) {
    return result > 0 ? fields_event(&OP_KINDS[op->kind], op) : NULL;
}

/* ---- hello: a process of the run connected (its rank's row; the run's sizes) ---- */

static const op_field HELLO_FIELDS[] = {
    {"device", TEXT(hello, device), FIELD_FEED, NULL},
    {"host", TEXT(hello, host), FIELD_FEED, NULL},
    {"pid", INT(hello, pid), FIELD_FEED, NULL},
    {"total_steps", INT(hello, total_steps), FIELD_OF_RUN, NULL},
    {"epochs", INT(hello, epochs), FIELD_OF_RUN, NULL},
    {"steps_per_epoch", INT(hello, steps_per_epoch), FIELD_OF_RUN, NULL},
};
/* a rank connecting again keeps its state */
static const op_row HELLO_ROW = {.table = "ranks", .per_rank = true, .t_columns = {"connected_at", "last_seen"},
                                 .insert_column = "state", .insert_value = "'init'", .write = ROW_UPSERT};
/* world_size: not kept (the run's config has it); secret: ingest's check of the connection */
static const char *const HELLO_OTHERS[] = {"world_size", "secret", NULL};

/* The rows it changed (0: refused, the run is finished or gone). */
static int64_t apply_hello(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    const op_kind_desc *k = &OP_KINDS[OP_HELLO];
    int64_t changed = 0;
    if (op->rank >= 0) {
        changed = apply_row(db, st, op);
        if (changed <= 0) return changed;
    }
    if (fields_any_known(k, op, FIELD_OF_RUN)) {
        fields_bind_run(st[1], k, op);
        int64_t n = write_fault_step(db, st[1]);
        if (n < 0 || op->rank < 0) changed = n;
    }
    return changed;
}

static json_t *sse_hello(const store_op *op, int64_t result) {
    if (op->rank < 0 || result <= 0) return NULL;
    json_t *d = json_pack("{s:I,s:i,s:s,s:o}", "run", (json_int_t)op->run_id, "rank", op->rank, "state", "init", "t",
                          json_int_or_null(op->t));
    fields_add_feed(d, &OP_KINDS[OP_HELLO], op);
    return d;
}

static void learn_hello(const store_op *op, run_facts *f) {
    if (op->u.hello.total_steps != NO_INT) f->total_steps = op->u.hello.total_steps;
    if (op->u.hello.epochs != NO_INT) f->epochs = op->u.hello.epochs;
    if (op->u.hello.steps_per_epoch != NO_INT) f->steps_per_epoch = op->u.hello.steps_per_epoch;
}

/* ---- status: a rank's state ---- */

static const op_field STATUS_FIELDS[] = {
    {"state", TEXT(status, state), FIELD_REQUIRED | FIELD_FEED, "a status event without a state"},
    {"detail", TEXT(status, detail), FIELD_FEED, NULL},
};
static const op_row STATUS_ROW = {.table = "ranks", .per_rank = true, .t_columns = {"last_seen"},
                                  .write = ROW_UPSERT_CHANGED};

/* ---- rank_state: a launcher's word on one of its ranks' processes ---- */

/* The launcher (rank -1) says it of rank `of`: the op is that rank's, on its row, so
 * a script that reports nothing still has its ranks, their pids and how they ended. */
static const op_field RANK_STATE_FIELDS[] = {
    {"pid", INT(rank_state, pid), FIELD_KEEP | FIELD_FEED, NULL},
    {"host", TEXT(rank_state, host), FIELD_KEEP | FIELD_FEED, NULL},
    {"state", TEXT(rank_state, state), FIELD_REQUIRED | FIELD_FEED, "a rank_state event without a state"},
    {"detail", TEXT(rank_state, detail), FIELD_FEED, NULL},
};
static const op_row RANK_STATE_ROW = {.table = "ranks", .per_rank = true, .t_columns = {"last_seen"},
                                      .write = ROW_UPSERT_CHANGED};
/* of: the rank (its parse's own); exit_code, signal: in `detail` for a person, not kept apart */
static const char *const RANK_STATE_OTHERS[] = {"of", "exit_code", "signal", NULL};

static const char *parse_rank_state(const json_t *ev, store_op *op) {
    const char *why = fields_parse(&OP_KINDS[OP_RANK_STATE], ev, op);
    if (why) return why;
    const json_t *of = json_object_get(ev, "of");
    if (!json_is_integer(of) || json_integer_value(of) < 0 || json_integer_value(of) > 1 << 20)
        return "a rank_state event without the rank it is about (of)";
    op->rank = (int)json_integer_value(of);
    return NULL;
}

/* ---- step: rank 0's step (the loss, lr and samples/s series; the run's progress) ---- */

static const op_field STEP_FIELDS[] = {
    {"global_step", INT(step, global_step), FIELD_REQUIRED | FIELD_KEY, "a step event without an integer global_step"},
    {"epoch", INT(step, epoch), 0, NULL},
    {"step", INT(step, step), 0, NULL},
    {"loss", REAL(step, loss), 0, NULL},
    {"lr", REAL(step, lr), 0, NULL},
    {"samples_per_s", REAL(step, samples_per_s), 0, NULL},
};
/* ?1 the run, ?2 global_step, ?3 epoch, ?4 step, ?5 loss, ?6 lr, ?7 samples_per_s, ?8 t (fields_row_sql's order) */
/* A step is stored under its run and global_step in one integer (step_rows.h). */
static const char *parse_step(const json_t *ev, store_op *op) {
    const char *why = fields_parse(&OP_KINDS[OP_STEP], ev, op);
    if (why) return why;
    if (op->u.step.global_step < 0 || op->u.step.global_step > STEP_ROWS_MAX_STEP)
        return "a step event's global_step outside 0 .. 4294967295 (2^32 - 1), the steps a run can store";
    return NULL;
}

static const op_row STEP_ROW = {
    .table = "steps", .t_columns = {"t"}, .write = ROW_REPLACE,
    .sql = "INSERT OR REPLACE INTO step_rows (k, epoch, step_back, loss, lr, samples_per_s, dt)"
           " VALUES ((?1 << 32) + ?2, ?3, ?2 - ?4, ?5, ?6, ?7, ?8 - " STEP_T0("?1") ")"};

/* After its row's (st[0]): a reporter's series (st[1]), its rank's step (st[2]), what a
 * restart cuts (st[3..7]). */
static const char *const STEP_SQL[] = {
    "INSERT OR REPLACE INTO series_points (run_id, key_id, global_step, value, t) VALUES (?1, ?2, ?3, ?4, ?5)",
    "UPDATE ranks SET global_step = ?3, last_seen = ?4 WHERE run_id = ?1 AND rank = ?2"
    " AND global_step IS NOT ?3",
    /* cut_superseded: the newest restart's start; then the steps and the series past ?2
     * that an earlier attempt reported (before ?3), kept with the attempt of each */
    "SELECT started_at FROM run_attempts WHERE run_id = ?1 AND attempt > 0 ORDER BY attempt DESC LIMIT 1",
    "INSERT OR REPLACE INTO superseded_steps (run_id, attempt, global_step, epoch, step, loss, lr,"
    " samples_per_s, t) SELECT run_id, (SELECT max(attempt) FROM run_attempts a WHERE a.run_id = ?1"
    " AND a.started_at <= s.t), global_step, epoch, step, loss, lr, samples_per_s, t FROM (SELECT ?1 AS run_id, "
    STEP_GS " AS global_step, epoch, " STEP_STEP " AS step, loss, lr, samples_per_s, " STEP_T("?1") " AS t"
    " FROM step_rows WHERE " STEP_AFTER("?1", "?2") " AND dt < ?3 - " STEP_T0("?1") ") s",
    "DELETE FROM step_rows WHERE " STEP_AFTER("?1", "?2") " AND dt < ?3 - " STEP_T0("?1"),
    "INSERT OR REPLACE INTO superseded_series (run_id, attempt, key, global_step, value, t)"
    " SELECT run_id, (SELECT max(attempt) FROM run_attempts a WHERE a.run_id = ?1 AND a.started_at <= s.t),"
    " key, global_step, value, t FROM series s WHERE run_id = ?1 AND global_step > ?2 AND t < ?3",
    "DELETE FROM series_points WHERE run_id = ?1 AND global_step > ?2 AND t < ?3",
    NULL,
};

/* A reporter's step after a restart (its time past the newest attempt's start, st[3]):
 * the points an earlier attempt reported past it leave the series for the superseded
 * tables (st[4..7]), at once, rather than stay until the restart does those steps again
 * (a script restarted from its own snapshot may never). The steps' tail past it is one
 * seek, and empty but for the first step of a restart; only then is the series' read. */
static void cut_superseded(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[3], 1, op->run_id);
    int64_t since = NO_INT;
    if (sqlite3_step(st[3]) == SQLITE_ROW && sqlite3_column_type(st[3], 0) != SQLITE_NULL)
        since = sqlite3_column_int64(st[3], 0);
    sqlite3_reset(st[3]);
    if (since == NO_INT || op->t < since) return;
    for (int i = 4; i <= 7; i++) {
        sqlite3_bind_int64(st[i], 1, op->run_id);
        sqlite3_bind_int64(st[i], 2, op->u.step.global_step);
        sqlite3_bind_int64(st[i], 3, since);
        if (write_fault_step(db, st[i]) <= 0 && i == 5) return; /* no step of an earlier attempt past it: nothing to cut */
    }
    rollup_cut(db, op->run_id, op->u.step.global_step);
}

/* A reporter's other values (series: st[1]), its rank's step (st[2]: a reporter sends
 * no heartbeat, so a command run's rank 0 showed none in GET /runs/{id}/ranks), what a
 * restart left past it (cut_superseded), then the step's row. */
static int64_t apply_step(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    if (op->u.step.of_reporter) cut_superseded(db, st, op);
    if (op->u.step.of_reporter && op->rank >= 0) {
        sqlite3_bind_int64(st[2], 1, op->run_id);
        sqlite3_bind_int(st[2], 2, op->rank);
        sqlite3_bind_int64(st[2], 3, op->u.step.global_step);
        sqlite3_bind_int64(st[2], 4, op->t);
        write_fault_step(db, st[2]);
    }
    const char *key;
    json_t *value;
    int64_t gs = op->u.step.global_step;
    json_object_foreach(op->u.step.series, key, value) {
        int64_t key_id = rollup_key_id(db, op->run_id, key);
        if (key_id < 0) continue; /* a database error: write_fault has it, the batch is retried */
        int64_t prev = rollup_prev_step(db, op->run_id, key_id);
        sqlite3_bind_int64(st[1], 1, op->run_id);
        sqlite3_bind_int64(st[1], 2, key_id);
        sqlite3_bind_int64(st[1], 3, gs);
        bind_real_or_null(st[1], 4, json_is_number(value) ? json_number_value(value) : NAN);
        sqlite3_bind_int64(st[1], 5, op->t);
        if (write_fault_step(db, st[1]) > 0) rollup_written(db, op->run_id, key_id, gs, prev);
    }
    /* the row, then the rollups of the buckets it completes (rollups.h) */
    int64_t prev = rollup_prev_step(db, op->run_id, ROLLUP_STEPS);
    int64_t changed = apply_row(db, st, op);
    if (changed > 0) rollup_written(db, op->run_id, ROLLUP_STEPS, gs, prev);
    if (changed > 0) attempt_step_written(db, op->run_id, gs, op->t); /* a restart's first step */
    return changed;
}

static void free_step(store_op *op) { json_decref(op->u.step.series); }

/* ---- metric: what a command run's script reports (reporter/README.md) ---- */

static const char *const METRIC_OTHERS[] = {"global_step", "epoch", "values", "rank_zero_only", NULL};

/* Whether `key` names one of the step's real fields (loss, lr, samples_per_s). */
static bool step_real(const char *key) {
    for (int i = 0; i < OP_KINDS[OP_STEP].n_fields; i++) {
        const op_field *f = &OP_KINDS[OP_STEP].fields[i];
        if (f->type == FIELD_REAL && strcmp(f->name, key) == 0) return true;
    }
    return false;
}

/* Its values are the fields of the kind it becomes (the epoch's, or the step's
 * reals: loss, lr, samples_per_s); a step's other values are its series. */
static const char *parse_metric(const json_t *ev, store_op *op) {
    const json_t *values = json_object_get(ev, "values");
    if (!json_is_object(values)) return "a metric event without a values object";
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)values, key, value) {
        if (!json_is_number(value) && !json_is_null(value)) return "a metric value that is not a number or null";
        if (!*key || strlen(key) > 128) return "a metric name that is empty or longer than 128 bytes";
    }
    int64_t global_step = event_int(ev, "global_step"), epoch = event_int(ev, "epoch");
    if ((global_step == NO_INT) == (epoch == NO_INT))
        return "a metric event needs exactly one of an integer global_step and an integer epoch";
    const json_t *zero_only = json_object_get(ev, "rank_zero_only");
    if (zero_only && !json_is_boolean(zero_only)) return "a metric event's rank_zero_only that is not true or false";
    if (epoch != NO_INT) {
        /* The epoch table is rank 0's, as the series are: every rank of a script that
         * reports on each rank would otherwise fill it in whatever order their events
         * came. A rank's figures count for the run only where it says so
         * (rank_zero_only false: a script that evaluates on another rank). */
        if (op->rank != 0 && !json_is_false(zero_only)) {
            op->kind = OP_SYNC; /* nothing kept: ingest and the journal's replay queue no op */
            return NULL;
        }
        op->kind = OP_EPOCH;
        fields_from_values(&OP_KINDS[OP_EPOCH], values, op);
        op->u.epoch.epoch = epoch;
        if (epoch < 0) return "a metric event's epoch counts from 0";
        /* names beyond the epoch table's columns: per-epoch series (EPOCH_SERIES_PREFIX) */
        json_t *series = NULL;
        json_object_foreach((json_t *)values, key, value) {
            if (op_kind_field(OP_EPOCH, key)) continue;
            if (!series) series = json_object();
            json_object_set(series, key, value);
        }
        op->u.epoch.series = series;
        return NULL;
    }
    if (global_step < 1) return "a metric event's global_step counts steps done: from 1";
    if (global_step > STEP_ROWS_MAX_STEP) return "a metric event's global_step above 4294967295 (2^32 - 1), the steps a run can store";
    if (op->rank != 0) { /* the series keep rank 0's points; another rank's step is its progress */
        op->kind = OP_HEARTBEAT;
        fields_unknown(&OP_KINDS[OP_HEARTBEAT], op);
        op->u.heartbeat.global_step = global_step;
        return NULL;
    }
    json_object_foreach((json_t *)values, key, value)
        if (strncmp(key, EPOCH_SERIES_PREFIX, strlen(EPOCH_SERIES_PREFIX)) == 0)
            return "a step's metric name that starts with \"" EPOCH_SERIES_PREFIX "\" (the per-epoch series' prefix): "
                   "report it with an epoch (ddpd.log_epoch) or rename it";
    op->kind = OP_STEP;
    fields_from_values(&OP_KINDS[OP_STEP], values, op);
    op->u.step.global_step = global_step;
    op->u.step.of_reporter = true; /* it sends no heartbeat: its rank's row takes the step (apply_step) */
    json_t *series = NULL;
    json_object_foreach((json_t *)values, key, value) {
        if (step_real(key)) continue;
        if (!series) series = json_object();
        json_object_set(series, key, value);
    }
    op->u.step.series = series;
    return NULL;
}

static void learn_step(const store_op *op, run_facts *f) {
    if (f->first_gs != NO_INT) return;
    f->first_gs = op->u.step.global_step;
    f->first_t = op->t;
}

static json_t *progress_step(const store_op *op, const run_facts *f) {
    progress_facts p = {
        .epoch = op->u.step.epoch, .epochs = f->epochs, .step = op->u.step.step,
        .global_step = op->u.step.global_step, .total_steps = f->total_steps,
        .first_global_step = f->first_gs, .first_step_at = f->first_t, .last_step_at = op->t,
        .loss = op->u.step.loss, .lr = op->u.step.lr, .samples_per_s = op->u.step.samples_per_s,
        .live = true,
    };
    json_t *d = view_progress(&p);
    json_object_set_new(d, "run", json_integer(op->run_id));
    json_object_set_new(d, "steps_per_epoch", json_int_or_null(f->steps_per_epoch));
    json_object_set_new(d, "t", json_int_or_null(op->t));
    return d;
}

static int run_wide(const store_op *op) {
    (void)op;
    return -1;
}

/* ---- heartbeat: a rank's pace (and its GPU's memory) ---- */

static const op_field HEARTBEAT_FIELDS[] = {
    {"global_step", INT(heartbeat, global_step), FIELD_FEED, NULL},
    {"step_ms", REAL(heartbeat, step_ms), FIELD_FEED, NULL},
    /* nccl ranks only: a CPU rank's heartbeat keeps what a GPU's said */
    {"gpu_mem_used_bytes", INT(heartbeat, gpu_mem_used), FIELD_KEEP | FIELD_FEED, NULL},
    {"gpu_mem_total_bytes", INT(heartbeat, gpu_mem_total), FIELD_KEEP | FIELD_FEED, NULL},
};
static const op_row HEARTBEAT_ROW = {.table = "ranks", .per_rank = true, .t_columns = {"last_seen"},
                                     .write = ROW_UPSERT};

static json_t *progress_heartbeat(const store_op *op, const run_facts *f) {
    (void)f;
    return fields_event(&OP_KINDS[OP_HEARTBEAT], op);
}

static int heartbeat_rank(const store_op *op) { return op->rank >= 0 ? op->rank : -2; /* the launcher's: none */ }

/* ---- epoch: an epoch's results (rank 0) ---- */

static const op_field EPOCH_FIELDS[] = {
    {"epoch", INT(epoch, epoch), FIELD_REQUIRED | FIELD_KEY | FIELD_FEED, "an epoch event without an integer epoch"},
    {"lr", REAL(epoch, lr), FIELD_FEED, NULL},
    {"train_loss", REAL(epoch, train_loss), FIELD_FEED, NULL},
    {"test_loss", REAL(epoch, test_loss), FIELD_FEED, NULL},
    {"test_acc", REAL(epoch, test_acc), FIELD_FEED, NULL},
    {"seconds", REAL(epoch, seconds), FIELD_FEED, NULL},
    {"samples_per_s", REAL(epoch, samples_per_s), FIELD_FEED, NULL},
};
static const op_row EPOCH_ROW = {.table = "epochs", .t_columns = {"t"}, .t_member = "finished_at",
                                 .write = ROW_UPSERT_CHANGED};
/* in mode eval, the path of the checkpoint evaluated: not kept */
static const char *const EPOCH_OTHERS[] = {"checkpoint", NULL};

/* After its row's (st[0]): a reporter's other values of the epoch, each a point of the
 * series EPOCH_SERIES_PREFIX NAME at step `epoch` (st[1], the series' own statement,
 * as a step's series are written). */
static const char *const EPOCH_SQL[] = {
    "INSERT OR REPLACE INTO series_points (run_id, key_id, global_step, value, t) VALUES (?1, ?2, ?3, ?4, ?5)",
    NULL,
};

static int64_t apply_epoch(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    int64_t changed = apply_row(db, st, op);
    const char *key;
    json_t *value;
    json_object_foreach(op->u.epoch.series, key, value) {
        char *name = xasprintf(EPOCH_SERIES_PREFIX "%s", key);
        int64_t key_id = rollup_key_id(db, op->run_id, name); /* its rollups too, as a step's series */
        free(name);
        if (key_id < 0) continue; /* a database error: write_fault has it, the batch is retried */
        int64_t prev = rollup_prev_step(db, op->run_id, key_id);
        sqlite3_bind_int64(st[1], 1, op->run_id);
        sqlite3_bind_int64(st[1], 2, key_id);
        sqlite3_bind_int64(st[1], 3, op->u.epoch.epoch);
        bind_real_or_null(st[1], 4, json_is_number(value) ? json_number_value(value) : NAN);
        sqlite3_bind_int64(st[1], 5, op->t);
        if (write_fault_step(db, st[1]) <= 0) continue;
        rollup_written(db, op->run_id, key_id, op->u.epoch.epoch, prev);
        if (changed == 0) changed = 1;
    }
    return changed;
}

static void free_epoch(store_op *op) { json_decref(op->u.epoch.series); }

/* ---- checkpoint: rank 0 wrote one ---- */

static const op_field CHECKPOINT_FIELDS[] = {
    {"epoch", INT(checkpoint, epoch), FIELD_FEED, NULL},
    {"global_step", INT(checkpoint, global_step), FIELD_REQUIRED | FIELD_KEY | FIELD_FEED,
     "a checkpoint event without an integer global_step"},
    {"path", TEXT(checkpoint, path), FIELD_FEED, NULL},
    {"bytes", INT(checkpoint, bytes), FIELD_FEED, NULL},
};
static const op_row CHECKPOINT_ROW = {.table = "checkpoints", .t_columns = {"t"}, .t_member = "created_at",
                                      .write = ROW_UPSERT_CHANGED};
static const char *const CHECKPOINT_OTHERS[] = {"removed", NULL}; /* its parse's own */

static const char *parse_checkpoint(const json_t *ev, store_op *op) {
    const char *why = fields_parse(&OP_KINDS[OP_CHECKPOINT], ev, op);
    if (why) return why;
    json_t *removed = json_object_get(ev, "removed");
    if (removed && !json_is_array(removed)) return "a checkpoint event whose removed is not an array of paths";
    for (size_t i = 0; i < json_array_size(removed); i++)
        if (!json_is_string(json_array_get(removed, i))) return "a checkpoint event whose removed is not an array of paths";
    op->u.checkpoint.removed = json_incref(removed);
    return NULL;
}

/* After its row's (st[0]): the checkpoints it removed (st[1]). */
static const char *const CHECKPOINT_SQL[] = {
    "DELETE FROM checkpoints WHERE run_id = ?1 AND path IN (SELECT value FROM json_each(?2))",
    NULL,
};

/* Its row, then the older ones its `keep` deleted from disk (st[1]). */
static int64_t apply_checkpoint(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    int64_t changed = apply_row(db, st, op);
    if (json_array_size(op->u.checkpoint.removed)) {
        char *paths = json_dumps(op->u.checkpoint.removed, JSON_COMPACT);
        sqlite3_bind_int64(st[1], 1, op->run_id);
        bind_text_or_null(st[1], 2, paths);
        write_fault_step(db, st[1]);
        free(paths);
    }
    return changed;
}

static json_t *sse_checkpoint(const store_op *op, int64_t result) {
    json_t *d = sse_fields(op, result);
    const json_t *removed = op->u.checkpoint.removed;
    if (d) json_object_set_new(d, "removed", removed ? json_deep_copy(removed) : json_array());
    return d;
}

static void free_checkpoint(store_op *op) { json_decref(op->u.checkpoint.removed); }

/* ---- attempt: a launcher's attempt of its ranks started or ended (distributed.max_restarts) ---- */

/* One row per attempt (run_attempts): its `started` and `ended` events each fill
 * their part of it, as two kinds (the event's phase picks one). Every part of a run
 * across nodes reports the same attempt: their starts add their ranks' log offsets,
 * and the server's own word ends an attempt it ended (sched/run_restart.c). */
static const op_field ATTEMPT_STARTED_FIELDS[] = {
    {"attempt", INT(attempt, attempt), FIELD_REQUIRED | FIELD_KEY | FIELD_FEED, "an attempt event without an integer attempt"},
    {"master_port", INT(attempt, master_port), FIELD_KEEP | FIELD_FEED, NULL},
    {"checkpoint", TEXT(attempt, checkpoint), FIELD_KEEP | FIELD_FEED, NULL},
};
static const op_row ATTEMPT_STARTED_ROW = {.table = "run_attempts", .t_columns = {"started_at"},
                                           .write = ROW_UPSERT_CHANGED};
/* log_offsets: merged into the row by its own statement; the rest is the other phase's, or not kept */
static const char *const ATTEMPT_STARTED_OTHERS[] = {"phase", "max_restarts", "log_offsets", "status", "reason",
                                                     "failing_rank", "exit_code", "signal", "last_line",
                                                     "restarting", "backoff_s", "failure_class",
                                                     "failure_evidence", "failure_node", NULL};

static const op_field ATTEMPT_ENDED_FIELDS[] = {
    {"attempt", INT(attempt, attempt), FIELD_REQUIRED | FIELD_KEY | FIELD_FEED, "an attempt event without an integer attempt"},
    {"status", TEXT(attempt, status), FIELD_FEED, NULL},
    {"reason", TEXT(attempt, reason), FIELD_FEED, NULL},
    {"failing_rank", INT(attempt, failing_rank), FIELD_FEED, NULL},
    {"exit_code", INT(attempt, exit_code), FIELD_FEED, NULL},
    {"signal", INT(attempt, signal), FIELD_FEED, NULL},
    {"last_line", TEXT(attempt, last_line), FIELD_FEED, NULL},
    {"failure_class", TEXT(attempt, failure_class), FIELD_FEED, NULL},
    {"failure_evidence", TEXT(attempt, failure_evidence), FIELD_FEED, NULL},
    {"failure_node", TEXT(attempt, failure_node), FIELD_FEED, NULL},
};
static const op_row ATTEMPT_ENDED_ROW = {.table = "run_attempts", .t_columns = {"ended_at"},
                                         .write = ROW_UPSERT_CHANGED};
/* restarting, backoff_s: in the feed's data, not kept (the next attempt's row says it came) */
static const char *const ATTEMPT_ENDED_OTHERS[] = {"phase", "max_restarts", "master_port", "log_offsets", "checkpoint",
                                                   "restarting", "backoff_s", NULL};

/* Whether v is {"RANK": byte offset or null}. */
static bool log_offsets_ok(const json_t *v) {
    if (!json_is_object(v)) return false;
    const char *key;
    json_t *at;
    json_object_foreach((json_t *)v, key, at) {
        char *end;
        long rank = strtol(key, &end, 10);
        if (!*key || *end || rank < 0 || (!json_is_null(at) && !(json_is_integer(at) && json_integer_value(at) >= 0)))
            return false;
    }
    return true;
}

static const char *parse_attempt(const json_t *ev, store_op *op) {
    const char *phase = json_string_value(json_object_get(ev, "phase"));
    bool started = phase && strcmp(phase, "started") == 0;
    if (!started && !(phase && strcmp(phase, "ended") == 0)) return "an attempt event whose phase is not started or ended";
    fields_unknown(&OP_KINDS[OP_ATTEMPT_STARTED], op);
    fields_unknown(&OP_KINDS[OP_ATTEMPT_ENDED], op);
    op->u.attempt.log_offsets = NULL;
    op->kind = started ? OP_ATTEMPT_STARTED : OP_ATTEMPT_ENDED;
    const char *why = fields_parse(&OP_KINDS[op->kind], ev, op);
    if (why) return why;
    if (op->u.attempt.attempt < 0) return "an attempt event whose attempt is negative";
    if (started) {
        const json_t *offsets = json_object_get(ev, "log_offsets");
        if (offsets && !json_is_null(offsets) && !log_offsets_ok(offsets))
            return "an attempt event whose log_offsets is not an object of byte offsets by rank";
        op->u.attempt.log_offsets = json_is_object(offsets) ? json_incref((json_t *)offsets) : NULL;
        return NULL;
    }
    run_status s;
    const char *status = op->u.attempt.status;
    if (!status || (!(run_status_parse(status, &s) && run_status_is_final(s)) && strcmp(status, "preempted") != 0))
        return "an attempt event that ended without a status (succeeded, failed, canceled, stopped or preempted)";
    op->u.attempt.restarting = json_is_true(json_object_get(ev, "restarting"));
    op->u.attempt.backoff_s = event_real(ev, "backoff_s");
    return NULL;
}

/* After its row's (st[0]): its ranks' log offsets (st[1]); an attempt started again
 * after a resize (reopen): its row running again, its first start and checkpoint kept
 * (st[2]), and its ranks' log offsets where it first began kept (st[3]: the new ranks'
 * added), so that its log reads from its first start on. */
static const char *const ATTEMPT_STARTED_SQL[] = {
    "UPDATE run_attempts SET log_offsets = json_patch(coalesce(log_offsets, '{}'), ?3)"
    " WHERE run_id = ?1 AND attempt = ?2 AND log_offsets IS NOT json_patch(coalesce(log_offsets, '{}'), ?3)",
    "UPDATE run_attempts SET status = NULL, reason = NULL, ended_at = NULL, failing_rank = NULL, exit_code = NULL,"
    " signal = NULL, last_line = NULL, failure_class = NULL, failure_evidence = NULL, failure_node = NULL,"
    " master_port = coalesce(?3, master_port), started_at = coalesce(started_at, ?4)"
    " WHERE run_id = ?1 AND attempt = ?2",
    "UPDATE run_attempts SET log_offsets = json_patch(?3, coalesce(log_offsets, '{}'))"
    " WHERE run_id = ?1 AND attempt = ?2 AND log_offsets IS NOT json_patch(?3, coalesce(log_offsets, '{}'))",
    NULL,
};

/* Its row, then its ranks' log offsets merged into what other parts' starts gave (st[1]). */
static int64_t apply_attempt_started(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    attempt_steps_forget_run(op->run_id);
    int64_t changed = -1;
    if (op->u.attempt.reopen) {
        sqlite3_bind_int64(st[2], 1, op->run_id);
        sqlite3_bind_int64(st[2], 2, op->u.attempt.attempt);
        bind_int_or_null(st[2], 3, op->u.attempt.master_port);
        sqlite3_bind_int64(st[2], 4, op->t);
        changed = write_fault_step(db, st[2]);
    }
    bool reopened = changed > 0;
    if (!reopened) changed = apply_row(db, st, op); /* (no row to reopen: its first) */
    if (changed < 0 || !json_object_size(op->u.attempt.log_offsets)) return changed;
    sqlite3_stmt *merge = reopened ? st[3] : st[1];
    char *offsets = json_dumps(op->u.attempt.log_offsets, JSON_COMPACT);
    sqlite3_bind_int64(merge, 1, op->run_id);
    sqlite3_bind_int64(merge, 2, op->u.attempt.attempt);
    bind_text_or_null(merge, 3, offsets);
    int64_t merged = write_fault_step(db, merge);
    free(offsets);
    return merged < 0 ? merged : changed + merged;
}

/* {run, phase, its fields, (log_offsets | restarting, backoff_s), t} when it changed something. */
static json_t *sse_attempt(const store_op *op, int64_t result) {
    if (result <= 0) return NULL;
    bool started = op->kind == OP_ATTEMPT_STARTED;
    json_t *d = json_object();
    json_object_set_new(d, "run", json_integer(op->run_id));
    json_object_set_new(d, "phase", json_string(started ? "started" : "ended"));
    fields_add_feed(d, &OP_KINDS[op->kind], op);
    if (started) {
        const json_t *offsets = op->u.attempt.log_offsets;
        json_object_set_new(d, "log_offsets", offsets ? json_deep_copy(offsets) : json_object());
    } else {
        json_object_set_new(d, "restarting", json_boolean(op->u.attempt.restarting));
        json_object_set_new(d, "backoff_s", op->u.attempt.restarting ? json_real_or_null(op->u.attempt.backoff_s)
                                                                     : json_null());
    }
    json_object_set_new(d, "t", json_int_or_null(op->t));
    return d;
}

static void free_attempt(store_op *op) {
    json_decref(op->u.attempt.log_offsets);
    op->u.attempt.log_offsets = NULL;
}

/* ---- the table ---- */

/* A trainer's event (an entry with an `event`) is applied to a live run only: the
 * store's writer asks that once per run and batch (store.c, run_is_live). The
 * server's own ops (no `event`) are run_ops.c's: their statements and functions are
 * named after their kind there (run_ops.h). */

static const char *const NO_SQL[] = {NULL}; /* a kind that runs no statement of its own */

const op_kind_desc OP_KINDS[OP_KIND_COUNT] = {
    /* what trainers and launchers send */
    [OP_HELLO] = {
        .kind = OP_HELLO, .event = "hello", .parse = parse_fields, FIELDS(HELLO_FIELDS), .row = &HELLO_ROW,
        .other_fields = HELLO_OTHERS, .sql = NO_SQL, .apply = apply_hello, .sse_event = "rank", .sse_data = sse_hello,
        .learn = learn_hello,
    },
    [OP_STATUS] = {
        .kind = OP_STATUS, .event = "status", .parse = parse_fields, FIELDS(STATUS_FIELDS), .row = &STATUS_ROW,
        .sql = NO_SQL, .apply = apply_rank_row, .sse_event = "rank", .sse_data = sse_fields,
    },
    [OP_STEP] = {
        .kind = OP_STEP, .event = "step", .parse = parse_step, FIELDS(STEP_FIELDS), .row = &STEP_ROW,
        .sql = STEP_SQL, .apply = apply_step, .summary = SUMMARY_PROGRESS | SUMMARY_SEEN, .progress_event = "step",
        .progress_data = progress_step, .progress_rank = run_wide, .learn = learn_step, .free_fields = free_step,
    },
    [OP_METRIC] = {
        /* never queued as itself: parse turns it into a step, epoch or heartbeat op */
        .kind = OP_METRIC, .event = "metric", .parse = parse_metric, .other_fields = METRIC_OTHERS, .sql = NO_SQL,
        .progress_rank = run_wide,
    },
    [OP_HEARTBEAT] = {
        .kind = OP_HEARTBEAT, .event = "heartbeat", .parse = parse_fields, FIELDS(HEARTBEAT_FIELDS),
        .row = &HEARTBEAT_ROW, .sql = NO_SQL, .apply = apply_rank_row, .progress_event = "heartbeat",
        .progress_data = progress_heartbeat, .progress_rank = heartbeat_rank,
    },
    [OP_EPOCH] = {
        .kind = OP_EPOCH, .event = "epoch", .parse = parse_fields, FIELDS(EPOCH_FIELDS), .row = &EPOCH_ROW,
        .other_fields = EPOCH_OTHERS, .sql = EPOCH_SQL, .apply = apply_epoch, .summary = SUMMARY_SEEN,
        .sse_event = "epoch", .sse_data = sse_fields, .free_fields = free_epoch,
    },
    [OP_CHECKPOINT] = {
        .kind = OP_CHECKPOINT, .event = "checkpoint", .parse = parse_checkpoint, FIELDS(CHECKPOINT_FIELDS),
        .row = &CHECKPOINT_ROW, .other_fields = CHECKPOINT_OTHERS, .sql = CHECKPOINT_SQL, .apply = apply_checkpoint,
        .summary = SUMMARY_SEEN, .sse_event = "checkpoint", .sse_data = sse_checkpoint, .free_fields = free_checkpoint,
    },
    [OP_ATTEMPT_STARTED] = {
        .kind = OP_ATTEMPT_STARTED, .event = "attempt", .of_launcher = true, .parse = parse_attempt,
        FIELDS(ATTEMPT_STARTED_FIELDS), .row = &ATTEMPT_STARTED_ROW, .other_fields = ATTEMPT_STARTED_OTHERS,
        .sql = ATTEMPT_STARTED_SQL, .apply = apply_attempt_started, .sse_event = "attempt", .sse_data = sse_attempt,
        .free_fields = free_attempt,
    },
    [OP_ATTEMPT_ENDED] = {
        .kind = OP_ATTEMPT_ENDED, .event = "attempt", .of_launcher = true, .parse = parse_attempt,
        FIELDS(ATTEMPT_ENDED_FIELDS), .row = &ATTEMPT_ENDED_ROW, .other_fields = ATTEMPT_ENDED_OTHERS, .sql = NO_SQL,
        .apply = apply_row, .sse_event = "attempt", .sse_data = sse_attempt, .free_fields = free_attempt,
    },
    [OP_RANK_STATE] = {
        .kind = OP_RANK_STATE, .event = "rank_state", .of_launcher = true, .parse = parse_rank_state,
        FIELDS(RANK_STATE_FIELDS), .row = &RANK_STATE_ROW, .other_fields = RANK_STATE_OTHERS, .sql = NO_SQL,
        .apply = apply_rank_row, .sse_event = "rank", .sse_data = sse_fields,
    },
    /* what the server itself records (run_ops.c) */
    [OP_RUN_INSERT] = {
        .kind = OP_RUN_INSERT, .sql = OP_RUN_INSERT_SQL, .apply = op_run_insert_apply, .sse_event = "run",
        .sse_data = op_run_insert_sse, .free_fields = op_run_insert_free,
    },
    [OP_RUN_STARTING] = {
        .kind = OP_RUN_STARTING, .sql = OP_RUN_STARTING_SQL, .apply = op_run_starting_apply, .sse_event = "run",
        .sse_data = op_run_starting_sse, .free_fields = op_run_starting_free,
    },
    [OP_RUN_RUNNING] = {
        .kind = OP_RUN_RUNNING, .sql = OP_RUN_RUNNING_SQL, .apply = op_apply_by_id, .sse_event = "run",
        .sse_data = op_run_running_sse,
    },
    [OP_RUN_CANCELING] = {
        .kind = OP_RUN_CANCELING, .sql = OP_RUN_CANCELING_SQL, .apply = op_apply_by_id, .sse_event = "run",
        .sse_data = op_run_canceling_sse,
    },
    [OP_RUN_FINISH] = {
        .kind = OP_RUN_FINISH, .sql = OP_RUN_FINISH_SQL, .apply = op_run_finish_apply, .sse_event = "run",
        .sse_data = op_run_finish_sse, .ends_run = op_run_finish_ends_run, .free_fields = op_run_finish_free,
    },
    [OP_RUN_DELETE] = {
        .kind = OP_RUN_DELETE, .sql = OP_RUN_DELETE_SQL, .apply = op_run_delete_apply, .sse_event = "deleted",
        .sse_data = op_run_delete_sse, .ends_run = op_run_delete_ends_run,
    },
    [OP_RUN_RESUME] = {
        .kind = OP_RUN_RESUME, .sql = OP_RUN_RESUME_SQL, .apply = op_run_resume_apply, .sse_event = "run",
        .sse_data = op_run_resume_sse, .free_fields = op_run_resume_free,
    },
    [OP_RUN_PREEMPTING] = {.kind = OP_RUN_PREEMPTING, .sql = OP_RUN_PREEMPTING_SQL, .apply = op_run_preempting_apply},
    [OP_RUN_REQUEUE] = {
        .kind = OP_RUN_REQUEUE, .sql = OP_RUN_REQUEUE_SQL, .apply = op_run_requeue_apply, .sse_event = "run",
        .sse_data = op_run_requeue_sse, .free_fields = op_run_requeue_free,
    },
    [OP_RUN_RESTART] = {
        .kind = OP_RUN_RESTART, .sql = OP_RUN_RESTART_SQL, .apply = op_apply_by_id, .sse_event = "run",
        .sse_data = op_run_restart_sse, .free_fields = op_run_restart_free,
    },
    [OP_USAGE] = {.kind = OP_USAGE, .sql = OP_USAGE_SQL, .apply = op_usage_apply, .free_fields = op_usage_free},
    [OP_RUN_SUBMITTED] = {
        .kind = OP_RUN_SUBMITTED, .sql = OP_RUN_SUBMITTED_SQL, .apply = op_run_submitted_apply, .sse_event = "run",
        .sse_data = op_run_submitted_sse, .free_fields = op_run_submitted_free,
    },
    [OP_SYNC] = {.kind = OP_SYNC, .sql = NO_SQL, .apply = op_sync_apply},
    [OP_RUN_REASON] = {
        .kind = OP_RUN_REASON, .sql = OP_RUN_REASON_SQL, .apply = op_run_reason_apply, .sse_event = "run",
        .sse_data = op_run_reason_sse, .free_fields = op_run_finish_free,
    },
    [OP_SWEEP_EVENT] = {
        .kind = OP_SWEEP_EVENT, .sql = NO_SQL, .apply = op_sweep_event_apply, .sse_event = "sweep",
        .sse_data = op_sweep_event_sse, .free_fields = op_sweep_event_free,
    },
    [OP_SWEEP_WRITE] = {
        .kind = OP_SWEEP_WRITE, .sql = NO_SQL, .apply = op_sweep_write_apply, .free_fields = op_sweep_write_free,
    },
    [OP_RUN_DISK] = {.kind = OP_RUN_DISK, .sql = OP_RUN_DISK_SQL, .apply = op_run_disk_apply},
    [OP_TIMELINE] = {.kind = OP_TIMELINE, .sql = OP_TIMELINE_SQL, .apply = op_timeline_apply,
                     .free_fields = op_timeline_free},
    [OP_AUDIT] = {.kind = OP_AUDIT, .sql = OP_AUDIT_SQL, .apply = op_audit_apply, .free_fields = op_audit_free},
    [OP_JOURNAL_COMPACTED] = {.kind = OP_JOURNAL_COMPACTED, .sql = OP_JOURNAL_COMPACTED_SQL, .apply = op_apply_by_id},
};

const op_kind_desc *op_kind_for_event(const char *type) {
    for (int i = 0; type && i < OP_KIND_COUNT; i++)
        if (OP_KINDS[i].event && strcmp(OP_KINDS[i].event, type) == 0) return &OP_KINDS[i];
    return NULL;
}

const op_field *op_kind_field(store_op_kind k, const char *name) {
    for (int i = 0; i < OP_KINDS[k].n_fields; i++)
        if (strcmp(OP_KINDS[k].fields[i].name, name) == 0) return &OP_KINDS[k].fields[i];
    return NULL;
}

/* Each kind's statements, its row's first (built from its fields) then its own. */
static const char *statements[OP_KIND_COUNT][OP_MAX_SQL];
static pthread_once_t statements_once = PTHREAD_ONCE_INIT;

static void build_statements(void) {
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        int n = 0;
        if (OP_KINDS[k].row) {
            statements[k][n++] = fields_row_sql(&OP_KINDS[k]);
            char *of_run = fields_run_sql(&OP_KINDS[k]);
            if (of_run) statements[k][n++] = of_run;
        }
        for (const char *const *sql = OP_KINDS[k].sql; sql && *sql; sql++) {
            if (n == OP_MAX_SQL) {
                log_error("event kind %d has more than %d statements", k, OP_MAX_SQL);
                abort();
            }
            statements[k][n++] = *sql;
        }
    }
}

const char *op_kind_sql(store_op_kind k, int i) {
    pthread_once(&statements_once, build_statements);
    return k >= 0 && k < OP_KIND_COUNT && i >= 0 && i < OP_MAX_SQL ? statements[k][i] : NULL;
}

void store_op_free(store_op *op) {
    if (op->kind < 0 || op->kind >= OP_KIND_COUNT) return;
    fields_free(&OP_KINDS[op->kind], op);
    if (OP_KINDS[op->kind].free_fields) OP_KINDS[op->kind].free_fields(op);
}
