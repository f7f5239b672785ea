/* The table of op kinds: see event_kinds.h. Each kind's fields and functions sit
 * together, in the table's order: how it is read from the socket, applied, and
 * published; what its fields drive is kind_fields.c. */
#include "event_kinds.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "kind_fields.h"
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

/* Runs a bound statement to completion; returns the rows it changed, or -1. */
static int64_t run(sqlite3 *db, sqlite3_stmt *st) {
    if (write_fault_noted()) { /* the batch is rolled back and retried: nothing more runs (write_fault.h) */
        sqlite3_clear_bindings(st);
        return -1;
    }
    int rc = sqlite3_step(st);
    int64_t changes = rc == SQLITE_DONE ? sqlite3_changes(db) : -1;
    if (rc != SQLITE_DONE) {
        if (!write_fault_is(rc)) log_error("database write failed (%s): %s", sqlite3_sql(st), sqlite3_errmsg(db));
        write_fault_note(db, rc);
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return changes;
}

/* The event's fields, as its kind describes them. */
static const char *parse_fields(const json_t *ev, store_op *op) { return fields_parse(&OP_KINDS[op->kind], ev, op); }

/* The op's fields into its kind's row (st[0]): the rows it changed. */
static int64_t apply_row(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    fields_bind_row(st[0], &OP_KINDS[op->kind], op);
    return run(db, st[0]);
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

static json_t *run_event(int64_t run_id, const char *status, int64_t t) {
    return json_pack("{s:I,s:s,s:o}", "run", (json_int_t)run_id, "status", status, "t", json_int_or_null(t));
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
        int64_t n = run(db, st[1]);
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
static const op_row STEP_ROW = {.table = "steps", .t_columns = {"t"}, .write = ROW_REPLACE};

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
        if (run(db, st[i]) <= 0 && i == 5) return; /* no step of an earlier attempt past it: nothing to cut */
    }
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
        run(db, st[2]);
    }
    const char *key;
    json_t *value;
    json_object_foreach(op->u.step.series, key, value) {
        sqlite3_bind_int64(st[1], 1, op->run_id);
        bind_text_or_null(st[1], 2, key);
        sqlite3_bind_int64(st[1], 3, op->u.step.global_step);
        bind_real_or_null(st[1], 4, json_is_number(value) ? json_number_value(value) : NAN);
        sqlite3_bind_int64(st[1], 5, op->t);
        run(db, st[1]);
    }
    return apply_row(db, st, op);
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
        return NULL;
    }
    if (global_step < 1) return "a metric event's global_step counts steps done: from 1";
    if (op->rank != 0) { /* the series keep rank 0's points; another rank's step is its progress */
        op->kind = OP_HEARTBEAT;
        fields_unknown(&OP_KINDS[OP_HEARTBEAT], op);
        op->u.heartbeat.global_step = global_step;
        return NULL;
    }
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

/* Its row, then the older ones its `keep` deleted from disk (st[1]). */
static int64_t apply_checkpoint(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    int64_t changed = apply_row(db, st, op);
    if (json_array_size(op->u.checkpoint.removed)) {
        char *paths = json_dumps(op->u.checkpoint.removed, JSON_COMPACT);
        sqlite3_bind_int64(st[1], 1, op->run_id);
        bind_text_or_null(st[1], 2, paths);
        run(db, st[1]);
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
 * and the server's own word ends an attempt it ended (run_restart.h). */
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
                                                     "restarting", "backoff_s", NULL};

static const op_field ATTEMPT_ENDED_FIELDS[] = {
    {"attempt", INT(attempt, attempt), FIELD_REQUIRED | FIELD_KEY | FIELD_FEED, "an attempt event without an integer attempt"},
    {"status", TEXT(attempt, status), FIELD_FEED, NULL},
    {"reason", TEXT(attempt, reason), FIELD_FEED, NULL},
    {"failing_rank", INT(attempt, failing_rank), FIELD_FEED, NULL},
    {"exit_code", INT(attempt, exit_code), FIELD_FEED, NULL},
    {"signal", INT(attempt, signal), FIELD_FEED, NULL},
    {"last_line", TEXT(attempt, last_line), FIELD_FEED, NULL},
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

/* Its row, then its ranks' log offsets merged into what other parts' starts gave (st[1]). */
static int64_t apply_attempt_started(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    int64_t changed = apply_row(db, st, op);
    if (changed < 0 || !json_object_size(op->u.attempt.log_offsets)) return changed;
    char *offsets = json_dumps(op->u.attempt.log_offsets, JSON_COMPACT);
    sqlite3_bind_int64(st[1], 1, op->run_id);
    sqlite3_bind_int64(st[1], 2, op->u.attempt.attempt);
    bind_text_or_null(st[1], 3, offsets);
    int64_t merged = run(db, st[1]);
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

/* ---- run life: insert (queued), starting, running, canceling, finish, delete; submitted (to Slurm) ---- */

static int64_t apply_insert(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    bind_text_or_null(st[0], 1, op->u.insert.name);
    bind_text_or_null(st[0], 2, op->u.insert.config);
    sqlite3_bind_int(st[0], 3, op->u.insert.world_size);
    bind_text_or_null(st[0], 4, op->u.insert.device_kind);
    sqlite3_bind_int64(st[0], 5, op->t);
    bind_text_or_null(st[0], 6, op->u.insert.command ? "command" : "builtin");
    if (op->run_id > 0) sqlite3_bind_int64(st[0], 7, op->run_id); /* a rebuilt run keeps its id; else the next */
    else sqlite3_bind_null(st[0], 7);
    bind_text_or_null(st[0], 8, op->u.insert.owner);
    sqlite3_bind_int(st[0], 9, op->u.insert.priority);
    sqlite3_bind_int(st[0], 10, op->u.insert.preemptible);
    if (op->u.insert.sweep_id > 0) { /* a sweep's trial */
        sqlite3_bind_int64(st[0], 11, op->u.insert.sweep_id);
        sqlite3_bind_int(st[0], 12, op->u.insert.trial);
    } else {
        sqlite3_bind_null(st[0], 11);
        sqlite3_bind_null(st[0], 12);
    }
    if (op->u.insert.memory_bytes > 0) sqlite3_bind_int64(st[0], 13, op->u.insert.memory_bytes);
    else sqlite3_bind_null(st[0], 13);
    return run(db, st[0]) == 1 ? sqlite3_last_insert_rowid(db) : -1;
}

static json_t *sse_insert(const store_op *op, int64_t result) {
    if (result <= 0) return NULL;
    json_t *d = run_event(result, run_status_name(RUN_QUEUED), op->t);
    json_object_set_new(d, "name", json_string_or_null(op->u.insert.name));
    json_object_set_new(d, "world_size", json_integer(op->u.insert.world_size));
    json_object_set_new(d, "device_kind", json_string(op->u.insert.device_kind ? op->u.insert.device_kind : ""));
    json_object_set_new(d, "owner", json_string_or_null(op->u.insert.owner));
    json_object_set_new(d, "priority", json_integer(op->u.insert.priority));
    if (op->u.insert.sweep_id > 0) {
        json_object_set_new(d, "sweep_id", json_integer(op->u.insert.sweep_id));
        json_object_set_new(d, "trial", json_integer(op->u.insert.trial));
    }
    return d;
}

static void free_insert(store_op *op) {
    free(op->u.insert.name);
    free(op->u.insert.config);
    free(op->u.insert.owner);
}

static int64_t apply_starting(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    bind_text_or_null(st[0], 2, op->u.starting.devices);
    bind_int_or_null(st[0], 3, op->u.starting.pid); /* none for a run whose launchers all run on agents */
    sqlite3_bind_int64(st[0], 4, op->t);
    bind_int_or_null(st[0], 5, op->u.starting.pid_start_time);
    bind_text_or_null(st[0], 6, op->u.starting.secret);
    bind_text_or_null(st[0], 7, op->u.starting.job); /* a batch system's job; none on this host or an agent */
    return run(db, st[0]);
}

static json_t *sse_starting(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_STARTING), op->t);
    json_t *devices = op->u.starting.devices ? json_loads(op->u.starting.devices, 0, NULL) : NULL;
    json_object_set_new(d, "devices", devices ? devices : json_array());
    json_object_set_new(d, "pid", json_int_or_null(op->u.starting.pid));
    if (op->u.starting.job) json_object_set_new(d, "slurm_job_id", json_string(op->u.starting.job));
    return d;
}

static void free_starting(store_op *op) {
    free(op->u.starting.devices);
    free(op->u.starting.secret);
    free(op->u.starting.job);
}

/* A queued run handed to Slurm: it stays queued (it waits in Slurm's queue), with
 * the job's id and the run's secret kept, so that a restarted server follows that
 * job instead of submitting the run again. */
static int64_t apply_submitted(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    bind_text_or_null(st[0], 2, op->u.submitted.job);
    bind_text_or_null(st[0], 3, op->u.submitted.secret);
    return run(db, st[0]);
}

static json_t *sse_submitted(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_QUEUED), op->t);
    json_object_set_new(d, "slurm_job_id", json_string_or_null(op->u.submitted.job));
    return d;
}

static void free_submitted(store_op *op) {
    free(op->u.submitted.job);
    free(op->u.submitted.secret);
}

static int64_t apply_by_id(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    return run(db, st[0]);
}

static json_t *sse_running(const store_op *op, int64_t result) {
    return result == 1 ? run_event(op->run_id, run_status_name(RUN_RUNNING), op->t) : NULL;
}

static json_t *sse_canceling(const store_op *op, int64_t result) {
    return result == 1 ? run_event(op->run_id, run_status_name(RUN_CANCELING), op->t) : NULL;
}

static int64_t apply_finish(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    bind_text_or_null(st[0], 2, op->u.finish.status);
    bind_text_or_null(st[0], 3, op->u.finish.reason);
    bind_int_or_null(st[0], 4, op->u.finish.exit_code);
    bind_int_or_null(st[0], 5, op->u.finish.exit_signal);
    sqlite3_bind_int64(st[0], 6, op->t);
    return run(db, st[0]);
}

static json_t *sse_finish(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, op->u.finish.status, op->t);
    json_object_set_new(d, "reason", json_string_or_null(op->u.finish.reason));
    json_object_set_new(d, "exit_code", json_int_or_null(op->u.finish.exit_code));
    json_object_set_new(d, "exit_signal", json_int_or_null(op->u.finish.exit_signal));
    return d;
}

static bool finish_ends_run(const store_op *op, int64_t result) {
    run_status s;
    return result == 1 && run_status_parse(op->u.finish.status, &s) && run_status_is_final(s);
}

static void free_finish(store_op *op) { free(op->u.finish.reason); }

/* A sweep's decision: published as it is (`run` is its trial's run, 0 for the sweep's own). */
static int64_t apply_one(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    (void)db;
    (void)st;
    (void)op;
    return 1;
}

static json_t *sse_sweep(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = json_pack("{s:I,s:I,s:s,s:s}", "run", (json_int_t)(op->run_id > 0 ? op->run_id : 0), "sweep",
                          (json_int_t)op->u.sweep.sweep_id, "action", op->u.sweep.action ? op->u.sweep.action : "",
                          "status", op->u.sweep.status ? op->u.sweep.status : "");
    json_object_set_new(d, "trial", op->u.sweep.trial >= 0 ? json_integer(op->u.sweep.trial) : json_null());
    json_object_set_new(d, "detail", json_string_or_null(op->u.sweep.detail));
    json_object_set_new(d, "t", json_time(op->t));
    return d;
}

/* The sweeps' own writes, in the writer's transaction like every other change, so that
 * the database keeps one writer. One op is one of the searcher's decisions (the
 * statements between sweep_store_begin and sweep_store_commit), applied whole or not
 * at all: inside a savepoint, rolled back to it when a statement is refused, so that
 * none of its earlier statements stays. A refused op is logged and answered -1; the
 * rest of the batch goes on. */
static int64_t apply_exec(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    (void)st;
    if (write_fault_noted() || !op->u.exec.sql) return -1;
    char *msg = NULL;
    int rc = sqlite3_exec(db, "SAVEPOINT sweep_write", NULL, NULL, &msg);
    if (rc == SQLITE_OK) rc = sqlite3_exec(db, op->u.exec.sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        if (!write_fault_is(rc)) log_error("database write failed (%s): %s", op->u.exec.sql, msg ? msg : "?");
        write_fault_note(db, rc);
        sqlite3_free(msg);
        /* undone, unless SQLite has rolled the whole transaction back itself (a fault) */
        if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK TO sweep_write; RELEASE sweep_write", NULL, NULL, NULL);
        return -1;
    }
    int64_t id = sqlite3_last_insert_rowid(db);
    if (sqlite3_exec(db, "RELEASE sweep_write", NULL, NULL, &msg) != SQLITE_OK) {
        log_error("database write failed (RELEASE sweep_write): %s", msg ? msg : "?");
        write_fault_note(db, SQLITE_IOERR);
        sqlite3_free(msg);
        return -1;
    }
    return id > 0 ? id : 1;
}

static void free_exec(store_op *op) { free(op->u.exec.sql); }

static void free_sweep(store_op *op) {
    free(op->u.sweep.action);
    free(op->u.sweep.detail);
    free(op->u.sweep.status);
}

static int64_t apply_reason(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    bind_text_or_null(st[0], 2, op->u.finish.reason);
    return run(db, st[0]);
}

static json_t *sse_reason(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_STOPPED), op->t);
    json_object_set_new(d, "reason", json_string_or_null(op->u.finish.reason));
    return d;
}

/* What a run's directory holds on disk, as the server measured it (sched's disk use). */
static int64_t apply_disk(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->u.disk.bytes);
    sqlite3_bind_int64(st[0], 3, op->t);
    return run(db, st[0]);
}

/* A finished run and everything recorded of it, its feed events too. */
static int64_t apply_delete(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    int64_t n = run(db, st[0]);
    for (int i = 1; n == 1 && i < OP_MAX_SQL && st[i]; i++) {
        sqlite3_bind_int64(st[i], 1, op->run_id);
        run(db, st[i]);
    }
    return n;
}

static json_t *sse_delete(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    return json_pack("{s:I,s:I}", "run", (json_int_t)op->run_id, "t", (json_int_t)op->t);
}

static bool delete_ends_run(const store_op *op, int64_t result) {
    (void)op;
    return result == 1;
}

/* A failed or canceled run queued again (POST /runs/{id}/resume): the resume is
 * recorded with what the run was and the attempt it starts at, and the run is
 * queued. A built-in run continues from a checkpoint: what it recorded past that
 * checkpoint goes (the trainer does those steps again: one point per step) and its
 * progress is the checkpoint's. A command run (no checkpoint: its script loads its
 * own snapshot) keeps what it recorded; the steps it reports again replace theirs. */
static int64_t apply_resume(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    bool from_checkpoint = op->u.resume.from_checkpoint != NULL;
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->t);
    bind_text_or_null(st[0], 3, op->u.resume.from_checkpoint);
    bind_int_or_null(st[0], 4, op->u.resume.from_epoch);
    bind_int_or_null(st[0], 5, op->u.resume.from_global_step);
    bind_int_or_null(st[0], 6, op->u.resume.attempt);
    int64_t n = run(db, st[0]);
    int64_t gs = op->u.resume.from_global_step == NO_INT ? 0 : op->u.resume.from_global_step;
    int64_t epoch = op->u.resume.from_epoch == NO_INT ? -1 : op->u.resume.from_epoch;
    for (int i = 1; n == 1 && i < OP_MAX_SQL && st[i] && (i == 1 || from_checkpoint); i++) {
        sqlite3_bind_int64(st[i], 1, op->run_id);
        if (i == 1 && !from_checkpoint) sqlite3_bind_null(st[i], 2); /* its progress stays */
        else sqlite3_bind_int64(st[i], 2, i == 3 ? epoch : gs);
        run(db, st[i]);
    }
    return n;
}

static json_t *sse_resume(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_QUEUED), op->t);
    json_object_set_new(d, "resumed", json_pack("{s:o,s:o,s:o,s:o}", "from_checkpoint",
                                                json_string_or_null(op->u.resume.from_checkpoint), "from_epoch",
                                                json_int_or_null(op->u.resume.from_epoch), "from_global_step",
                                                json_int_or_null(op->u.resume.from_global_step), "attempt",
                                                json_int_or_null(op->u.resume.attempt)));
    return d;
}

static void free_resume(store_op *op) { free(op->u.resume.from_checkpoint); }

/* A started run is being preempted for another: kept, so that a server that dies
 * before the run is queued again queues it at start-up instead of failing it. The
 * feed says nothing yet (the run's status has not changed): the requeue says it. */
static int64_t apply_preempting(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->u.preempting.by);
    sqlite3_bind_int64(st[0], 3, op->t);
    return run(db, st[0]);
}

/* A preempted run queued again: what it recorded past what it continues from goes
 * (a built-in run; a command run's restart reports its steps again over them). */
/* The run queued again (st[0]); its attempt closed as preempted, whatever its
 * launcher called the stop (st[1]); a built-in run's records past the checkpoint it
 * goes on from dropped (the rest). */
static int64_t apply_requeue(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->t);
    bind_int_or_null(st[0], 3, op->u.requeue.from_global_step);
    int64_t n = run(db, st[0]);
    if (n != 1) return n;
    char reason[64] = "preempted";
    if (op->u.requeue.by > 0) snprintf(reason, sizeof reason, "preempted by run %lld", (long long)op->u.requeue.by);
    sqlite3_bind_int64(st[1], 1, op->run_id);
    sqlite3_bind_int64(st[1], 2, op->t);
    bind_text_or_null(st[1], 3, reason);
    run(db, st[1]);
    int64_t gs = op->u.requeue.from_global_step, epoch = op->u.requeue.from_epoch == NO_INT ? -1 : op->u.requeue.from_epoch;
    for (int i = 2; gs != NO_INT && i < OP_MAX_SQL && st[i]; i++) {
        sqlite3_bind_int64(st[i], 1, op->run_id);
        sqlite3_bind_int64(st[i], 2, i == 3 ? epoch : gs);
        run(db, st[i]);
    }
    return n;
}

static json_t *sse_requeue(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_QUEUED), op->t);
    json_object_set_new(d, "preempted_by", op->u.requeue.by > 0 ? json_integer(op->u.requeue.by) : json_null());
    return d;
}

/* A started run queued again, to start its next attempt (run_restart.h). */
static int64_t apply_restart(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    return run(db, st[0]);
}

static json_t *sse_restart(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_QUEUED), op->t);
    json_object_set_new(d, "restarting", json_pack("{s:o,s:o}", "attempt", json_int_or_null(op->u.restart.attempt),
                                                   "reason", json_string_or_null(op->u.restart.reason)));
    return d;
}

static void free_restart(store_op *op) { free(op->u.restart.reason); }

static int64_t apply_usage(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    bind_text_or_null(st[0], 1, op->u.usage.owner ? op->u.usage.owner : "");
    sqlite3_bind_double(st[0], 2, op->u.usage.device_seconds);
    sqlite3_bind_int64(st[0], 3, op->t);
    return run(db, st[0]);
}

static void free_usage(store_op *op) { free(op->u.usage.owner); }

static int64_t apply_nothing(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    (void)db;
    (void)st;
    (void)op;
    return 0;
}

/* ---- the table ---- */

/* A trainer's event (an entry with an `event`) is applied to a live run only: the
 * store's writer asks that once per run and batch (store.c, run_is_live). */

const op_kind_desc OP_KINDS[OP_KIND_COUNT] = {
    [OP_HELLO] = {
        .kind = OP_HELLO, .event = "hello", .parse = parse_fields, FIELDS(HELLO_FIELDS), .row = &HELLO_ROW,
        .other_fields = HELLO_OTHERS, .apply = apply_hello, .sse_event = "rank", .sse_data = sse_hello,
        .learn = learn_hello,
    },
    [OP_STATUS] = {
        .kind = OP_STATUS, .event = "status", .parse = parse_fields, FIELDS(STATUS_FIELDS), .row = &STATUS_ROW,
        .apply = apply_rank_row, .sse_event = "rank", .sse_data = sse_fields,
    },
    [OP_STEP] = {
        .kind = OP_STEP, .event = "step", .parse = parse_fields, FIELDS(STEP_FIELDS), .row = &STEP_ROW,
        .sql = {"INSERT OR REPLACE INTO series (run_id, key, global_step, value, t) VALUES (?1, ?2, ?3, ?4, ?5)",
                "UPDATE ranks SET global_step = ?3, last_seen = ?4 WHERE run_id = ?1 AND rank = ?2"
                " AND global_step IS NOT ?3",
                /* cut_superseded: the newest restart's start; then the steps and the series past ?2
                 * that an earlier attempt reported (before ?3), kept with the attempt of each */
                "SELECT started_at FROM run_attempts WHERE run_id = ?1 AND attempt > 0 ORDER BY attempt DESC LIMIT 1",
                "INSERT OR REPLACE INTO superseded_steps (run_id, attempt, global_step, epoch, step, loss, lr,"
                " samples_per_s, t) SELECT run_id, (SELECT max(attempt) FROM run_attempts a WHERE a.run_id = ?1"
                " AND a.started_at <= s.t), global_step, epoch, step, loss, lr, samples_per_s, t FROM steps s"
                " WHERE run_id = ?1 AND global_step > ?2 AND t < ?3",
                "DELETE FROM steps WHERE run_id = ?1 AND global_step > ?2 AND t < ?3",
                "INSERT OR REPLACE INTO superseded_series (run_id, attempt, key, global_step, value, t)"
                " SELECT run_id, (SELECT max(attempt) FROM run_attempts a WHERE a.run_id = ?1 AND a.started_at <= s.t),"
                " key, global_step, value, t FROM series s WHERE run_id = ?1 AND global_step > ?2 AND t < ?3",
                "DELETE FROM series WHERE run_id = ?1 AND global_step > ?2 AND t < ?3"},
        .apply = apply_step, .summary = SUMMARY_PROGRESS | SUMMARY_SEEN, .progress_event = "step",
        .progress_data = progress_step, .progress_rank = run_wide, .learn = learn_step, .free_fields = free_step,
    },
    [OP_METRIC] = {
        /* never queued as itself: parse turns it into a step, epoch or heartbeat op */
        .kind = OP_METRIC, .event = "metric", .parse = parse_metric, .other_fields = METRIC_OTHERS,
        .progress_rank = run_wide,
    },
    [OP_HEARTBEAT] = {
        .kind = OP_HEARTBEAT, .event = "heartbeat", .parse = parse_fields, FIELDS(HEARTBEAT_FIELDS),
        .row = &HEARTBEAT_ROW, .apply = apply_rank_row, .progress_event = "heartbeat",
        .progress_data = progress_heartbeat, .progress_rank = heartbeat_rank,
    },
    [OP_EPOCH] = {
        .kind = OP_EPOCH, .event = "epoch", .parse = parse_fields, FIELDS(EPOCH_FIELDS), .row = &EPOCH_ROW,
        .other_fields = EPOCH_OTHERS, .apply = apply_row, .summary = SUMMARY_SEEN, .sse_event = "epoch",
        .sse_data = sse_fields,
    },
    [OP_CHECKPOINT] = {
        .kind = OP_CHECKPOINT, .event = "checkpoint", .parse = parse_checkpoint, FIELDS(CHECKPOINT_FIELDS),
        .row = &CHECKPOINT_ROW, .other_fields = CHECKPOINT_OTHERS,
        .sql = {"DELETE FROM checkpoints WHERE run_id = ?1 AND path IN (SELECT value FROM json_each(?2))"},
        .apply = apply_checkpoint, .summary = SUMMARY_SEEN, .sse_event = "checkpoint", .sse_data = sse_checkpoint,
        .free_fields = free_checkpoint,
    },
    [OP_ATTEMPT_STARTED] = {
        .kind = OP_ATTEMPT_STARTED, .event = "attempt", .of_launcher = true, .parse = parse_attempt,
        FIELDS(ATTEMPT_STARTED_FIELDS), .row = &ATTEMPT_STARTED_ROW, .other_fields = ATTEMPT_STARTED_OTHERS,
        .sql = {"UPDATE run_attempts SET log_offsets = json_patch(coalesce(log_offsets, '{}'), ?3)"
                " WHERE run_id = ?1 AND attempt = ?2 AND log_offsets IS NOT json_patch(coalesce(log_offsets, '{}'), ?3)"},
        .apply = apply_attempt_started, .sse_event = "attempt", .sse_data = sse_attempt, .free_fields = free_attempt,
    },
    [OP_ATTEMPT_ENDED] = {
        .kind = OP_ATTEMPT_ENDED, .event = "attempt", .of_launcher = true, .parse = parse_attempt,
        FIELDS(ATTEMPT_ENDED_FIELDS), .row = &ATTEMPT_ENDED_ROW, .other_fields = ATTEMPT_ENDED_OTHERS,
        .apply = apply_row, .sse_event = "attempt", .sse_data = sse_attempt, .free_fields = free_attempt,
    },
    [OP_RANK_STATE] = {
        .kind = OP_RANK_STATE, .event = "rank_state", .of_launcher = true, .parse = parse_rank_state,
        FIELDS(RANK_STATE_FIELDS), .row = &RANK_STATE_ROW, .other_fields = RANK_STATE_OTHERS, .apply = apply_rank_row,
        .sse_event = "rank", .sse_data = sse_fields,
    },
    [OP_RUN_INSERT] = {
        .kind = OP_RUN_INSERT,
        .sql = {"INSERT INTO runs (id, name, status, config, world_size, device_kind, created_at, kind, owner, priority,"
                " preemptible, queued_at, sweep_id, trial, memory_bytes) VALUES (?7, ?1, 'queued', ?2, ?3, ?4, ?5, ?6, ?8,"
                " ?9, ?10, ?5, ?11, ?12, ?13)"},
        .apply = apply_insert, .sse_event = "run", .sse_data = sse_insert, .free_fields = free_insert,
    },
    [OP_RUN_STARTING] = {
        .kind = OP_RUN_STARTING,
        .sql = {"UPDATE runs SET status = 'starting', devices = ?2, pid = ?3, started_at = ?4, pid_start_time = ?5,"
                " secret = ?6, slurm_job_id = coalesce(?7, slurm_job_id) WHERE id = ?1 AND status = 'queued'"},
        .apply = apply_starting, .sse_event = "run", .sse_data = sse_starting, .free_fields = free_starting,
    },
    [OP_RUN_RUNNING] = {
        .kind = OP_RUN_RUNNING,
        .sql = {"UPDATE runs SET status = 'running' WHERE id = ?1 AND status = 'starting'"},
        .apply = apply_by_id, .sse_event = "run", .sse_data = sse_running,
    },
    [OP_RUN_CANCELING] = {
        .kind = OP_RUN_CANCELING,
        .sql = {"UPDATE runs SET status = 'canceling' WHERE id = ?1 AND status IN ('starting', 'running')"},
        .apply = apply_by_id, .sse_event = "run", .sse_data = sse_canceling,
    },
    [OP_RUN_FINISH] = {
        .kind = OP_RUN_FINISH,
        .sql = {"UPDATE runs SET status = ?2, reason = ?3, exit_code = ?4, exit_signal = ?5, finished_at = ?6,"
                " preempting = 0 WHERE id = ?1 AND status NOT IN ('succeeded', 'failed', 'canceled', 'stopped')"},
        .apply = apply_finish, .sse_event = "run", .sse_data = sse_finish, .ends_run = finish_ends_run,
        .free_fields = free_finish,
    },
    [OP_RUN_DELETE] = {
        .kind = OP_RUN_DELETE,
        .sql = {"DELETE FROM runs WHERE id = ?1 AND status IN ('succeeded', 'failed', 'canceled', 'stopped')",
                "DELETE FROM steps WHERE run_id = ?1", "DELETE FROM series WHERE run_id = ?1",
                "DELETE FROM epochs WHERE run_id = ?1",
                "DELETE FROM ranks WHERE run_id = ?1", "DELETE FROM checkpoints WHERE run_id = ?1",
                "DELETE FROM events WHERE run_id = ?1"},
        .apply = apply_delete, .sse_event = "deleted", .sse_data = sse_delete, .ends_run = delete_ends_run,
    },
    [OP_RUN_RESUME] = {
        .kind = OP_RUN_RESUME,
        .sql = {"INSERT INTO run_resumes (run_id, n, at, from_checkpoint, from_epoch, from_global_step, prior_status,"
                " prior_reason, prior_exit_code, prior_exit_signal, attempt)"
                " SELECT id, (SELECT count(*) + 1 FROM run_resumes WHERE run_id = ?1), ?2, ?3, ?4, ?5, status, reason,"
                " exit_code, exit_signal, ?6 FROM runs WHERE id = ?1 AND status IN ('failed', 'canceled', 'stopped')"
                " AND (?3 IS NOT NULL OR kind = 'command')",
                /* ?2: the checkpoint's global step; NULL (a command run): its progress stays */
                "UPDATE runs SET status = 'queued', reason = NULL, exit_code = NULL, exit_signal = NULL,"
                " finished_at = NULL, devices = NULL, pid = NULL, slurm_job_id = NULL, first_step_at = NULL,"
                " first_global_step = NULL,"
                " last_step_at = NULL, samples_per_s = CASE WHEN ?2 IS NULL THEN samples_per_s END,"
                " global_step = coalesce(?2, global_step),"
                " queued_at = (SELECT at FROM run_resumes WHERE run_id = ?1 ORDER BY n DESC LIMIT 1),"
                " epoch = CASE WHEN ?2 IS NULL THEN epoch ELSE (SELECT epoch FROM steps WHERE run_id = ?1 AND global_step = ?2) END,"
                " step = CASE WHEN ?2 IS NULL THEN step ELSE (SELECT step FROM steps WHERE run_id = ?1 AND global_step = ?2) END,"
                " loss = CASE WHEN ?2 IS NULL THEN loss ELSE (SELECT loss FROM steps WHERE run_id = ?1 AND global_step = ?2) END,"
                " lr = CASE WHEN ?2 IS NULL THEN lr ELSE (SELECT lr FROM steps WHERE run_id = ?1 AND global_step = ?2) END"
                " WHERE id = ?1",
                "DELETE FROM steps WHERE run_id = ?1 AND global_step > ?2",
                "DELETE FROM epochs WHERE run_id = ?1 AND epoch > ?2", /* ?2: the checkpoint's epoch */
                "DELETE FROM checkpoints WHERE run_id = ?1 AND global_step > ?2",
                "DELETE FROM series WHERE run_id = ?1 AND global_step > ?2"},
        .apply = apply_resume, .sse_event = "run", .sse_data = sse_resume, .free_fields = free_resume,
    },
    [OP_RUN_PREEMPTING] = {
        .kind = OP_RUN_PREEMPTING,
        .sql = {"UPDATE runs SET preempting = 1, preempted_by = ?2, preempted_at = ?3"
                " WHERE id = ?1 AND status IN ('starting', 'running')"},
        .apply = apply_preempting,
    },
    [OP_RUN_REQUEUE] = {
        .kind = OP_RUN_REQUEUE,
        .sql = {/* ?3: the global step it continues from (NULL: a command run's: its progress stays) */
                "UPDATE runs SET status = 'queued', preempting = 0, preemptions = preemptions + 1, queued_at = ?2,"
                " devices = NULL, pid = NULL, pid_start_time = NULL, secret = NULL, slurm_job_id = NULL, first_step_at = NULL,"
                " first_global_step = NULL, last_step_at = NULL, samples_per_s = NULL,"
                " global_step = coalesce(?3, global_step),"
                " epoch = CASE WHEN ?3 IS NULL THEN epoch ELSE (SELECT epoch FROM steps WHERE run_id = ?1 AND global_step = ?3) END,"
                " step = CASE WHEN ?3 IS NULL THEN step ELSE (SELECT step FROM steps WHERE run_id = ?1 AND global_step = ?3) END,"
                " loss = CASE WHEN ?3 IS NULL THEN loss ELSE (SELECT loss FROM steps WHERE run_id = ?1 AND global_step = ?3) END,"
                " lr = CASE WHEN ?3 IS NULL THEN lr ELSE (SELECT lr FROM steps WHERE run_id = ?1 AND global_step = ?3) END"
                " WHERE id = ?1 AND status IN ('starting', 'running', 'canceling')",
                /* a preempted attempt reads so, not as the cancel (SIGTERM) that stopped a command run's */
                "UPDATE run_attempts SET status = 'preempted', reason = ?3, ended_at = coalesce(ended_at, ?2),"
                " failing_rank = NULL, exit_code = NULL, signal = NULL, last_line = NULL"
                " WHERE run_id = ?1 AND attempt = (SELECT max(attempt) FROM run_attempts WHERE run_id = ?1)",
                "DELETE FROM steps WHERE run_id = ?1 AND global_step > ?2",
                "DELETE FROM epochs WHERE run_id = ?1 AND epoch > ?2", /* ?2: the last epoch it holds */
                "DELETE FROM checkpoints WHERE run_id = ?1 AND global_step > ?2",
                "DELETE FROM series WHERE run_id = ?1 AND global_step > ?2"},
        .apply = apply_requeue, .sse_event = "run", .sse_data = sse_requeue,
    },
    [OP_USAGE] = {
        .kind = OP_USAGE,
        .sql = {"INSERT OR REPLACE INTO usage (owner, device_seconds, as_of) VALUES (?1, ?2, ?3)"},
        .apply = apply_usage, .free_fields = free_usage,
    },
    [OP_RUN_RESTART] = {
        .kind = OP_RUN_RESTART,
        .sql = {"UPDATE runs SET status = 'queued', devices = NULL, pid = NULL, pid_start_time = NULL, secret = NULL,"
                " slurm_job_id = NULL"
                " WHERE id = ?1 AND status IN ('starting', 'running')"},
        .apply = apply_restart, .sse_event = "run", .sse_data = sse_restart, .free_fields = free_restart,
    },
    [OP_RUN_SUBMITTED] = {
        .kind = OP_RUN_SUBMITTED,
        .sql = {"UPDATE runs SET slurm_job_id = ?2, secret = ?3 WHERE id = ?1 AND status = 'queued'"},
        .apply = apply_submitted, .sse_event = "run", .sse_data = sse_submitted, .free_fields = free_submitted,
    },
    [OP_SYNC] = {.kind = OP_SYNC, .apply = apply_nothing},
    [OP_RUN_REASON] = {
        .kind = OP_RUN_REASON,
        .sql = {"UPDATE runs SET reason = ?2 WHERE id = ?1 AND status = 'stopped'"},
        .apply = apply_reason, .sse_event = "run", .sse_data = sse_reason, .free_fields = free_finish,
    },
    [OP_SWEEP_EVENT] = {
        .kind = OP_SWEEP_EVENT, .apply = apply_one, .sse_event = "sweep", .sse_data = sse_sweep, .free_fields = free_sweep,
    },
    [OP_SWEEP_WRITE] = {.kind = OP_SWEEP_WRITE, .apply = apply_exec, .free_fields = free_exec},
    [OP_RUN_DISK] = {
        .kind = OP_RUN_DISK,
        .sql = {"UPDATE runs SET disk_bytes = ?2, disk_measured_at = ?3 WHERE id = ?1"},
        .apply = apply_disk,
    },
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
        for (int i = 0; i < OP_MAX_SQL && OP_KINDS[k].sql[i]; i++) {
            if (n == OP_MAX_SQL) {
                log_error("event kind %d has more than %d statements", k, OP_MAX_SQL);
                abort();
            }
            statements[k][n++] = OP_KINDS[k].sql[i];
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
