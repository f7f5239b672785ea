/* The table of op kinds: see event_kinds.h. Each kind's functions sit together, in
 * the table's order: how it is read from the socket, applied, and published. */
#include "event_kinds.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "run_status.h"
#include "views.h"
#include "write_fault.h"

/* ---- reading events ---- */

int64_t event_int(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    if (json_is_integer(v)) return json_integer_value(v);
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9e18) return (int64_t)d;
    }
    return NO_INT;
}

double event_real(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

char *event_str(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? xstrdup(json_string_value(v)) : NULL;
}

/* ---- binding: NO_INT and NaN become NULL ---- */

static void bind_int(sqlite3_stmt *st, int i, int64_t v) {
    if (v == NO_INT) sqlite3_bind_null(st, i);
    else sqlite3_bind_int64(st, i, v);
}

static void bind_real(sqlite3_stmt *st, int i, double v) {
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
    else sqlite3_bind_null(st, i);
}

static void bind_text(sqlite3_stmt *st, int i, const char *s) {
    if (s) sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else sqlite3_bind_null(st, i);
}

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

static json_t *rank_event(const store_op *op, const char *state, const char *detail) {
    return json_pack("{s:I,s:i,s:s,s:o,s:o}", "run", (json_int_t)op->run_id, "rank", op->rank, "state", state,
                     "detail", json_string_or_null(detail), "t", json_int_or_null(op->t));
}

static json_t *run_event(int64_t run_id, const char *status, int64_t t) {
    return json_pack("{s:I,s:s,s:o}", "run", (json_int_t)run_id, "status", status, "t", json_int_or_null(t));
}

/* ---- hello: a process of the run connected (its rank's row; the run's sizes) ---- */

static const char *parse_hello(const json_t *ev, store_op *op) {
    op->u.hello.pid = event_int(ev, "pid");
    op->u.hello.host = event_str(ev, "host");
    op->u.hello.device = event_str(ev, "device");
    op->u.hello.total_steps = event_int(ev, "total_steps");
    op->u.hello.epochs = event_int(ev, "epochs");
    op->u.hello.steps_per_epoch = event_int(ev, "steps_per_epoch");
    return NULL;
}

/* The rows it changed (0: refused, the run is finished or gone). */
static int64_t apply_hello(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    int64_t changed = 0;
    if (op->rank >= 0) {
        sqlite3_bind_int64(st[0], 1, op->run_id);
        sqlite3_bind_int(st[0], 2, op->rank);
        bind_int(st[0], 3, op->u.hello.pid);
        bind_text(st[0], 4, op->u.hello.host);
        bind_text(st[0], 5, op->u.hello.device);
        sqlite3_bind_int64(st[0], 6, op->t);
        changed = run(db, st[0]);
        if (changed <= 0) return changed;
    }
    if (op->u.hello.total_steps != NO_INT || op->u.hello.epochs != NO_INT || op->u.hello.steps_per_epoch != NO_INT) {
        sqlite3_bind_int64(st[1], 1, op->run_id);
        bind_int(st[1], 2, op->u.hello.total_steps);
        bind_int(st[1], 3, op->u.hello.epochs);
        bind_int(st[1], 4, op->u.hello.steps_per_epoch);
        int64_t n = run(db, st[1]);
        if (n < 0 || op->rank < 0) changed = n;
    }
    return changed;
}

static json_t *sse_hello(const store_op *op, int64_t result) {
    if (op->rank < 0 || result <= 0) return NULL;
    json_t *d = rank_event(op, "init", NULL);
    json_object_del(d, "detail");
    json_object_set_new(d, "device", json_string_or_null(op->u.hello.device));
    json_object_set_new(d, "host", json_string_or_null(op->u.hello.host));
    json_object_set_new(d, "pid", json_int_or_null(op->u.hello.pid));
    return d;
}

static void learn_hello(const store_op *op, run_facts *f) {
    if (op->u.hello.total_steps != NO_INT) f->total_steps = op->u.hello.total_steps;
    if (op->u.hello.epochs != NO_INT) f->epochs = op->u.hello.epochs;
    if (op->u.hello.steps_per_epoch != NO_INT) f->steps_per_epoch = op->u.hello.steps_per_epoch;
}

static void free_hello(store_op *op) {
    free(op->u.hello.host);
    free(op->u.hello.device);
}

/* ---- status: a rank's state ---- */

static const char *parse_status(const json_t *ev, store_op *op) {
    op->u.status.state = event_str(ev, "state");
    if (!op->u.status.state) return "a status event without a state";
    op->u.status.detail = event_str(ev, "detail");
    return NULL;
}

static int64_t apply_status(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    if (op->rank < 0) return 0;
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int(st[0], 2, op->rank);
    bind_text(st[0], 3, op->u.status.state);
    bind_text(st[0], 4, op->u.status.detail);
    sqlite3_bind_int64(st[0], 5, op->t);
    return run(db, st[0]);
}

static json_t *sse_status(const store_op *op, int64_t result) {
    if (op->rank < 0 || result <= 0) return NULL;
    return rank_event(op, op->u.status.state, op->u.status.detail);
}

static void free_status(store_op *op) {
    free(op->u.status.state);
    free(op->u.status.detail);
}

/* ---- step: rank 0's step (the loss, lr and samples/s series; the run's progress) ---- */

static const char *parse_step(const json_t *ev, store_op *op) {
    op->u.step.global_step = event_int(ev, "global_step");
    if (op->u.step.global_step == NO_INT) return "a step event without an integer global_step";
    op->u.step.epoch = event_int(ev, "epoch");
    op->u.step.step = event_int(ev, "step");
    op->u.step.loss = event_real(ev, "loss");
    op->u.step.lr = event_real(ev, "lr");
    op->u.step.samples_per_s = event_real(ev, "samples_per_s");
    return NULL;
}

static int64_t apply_step(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    const char *key;
    json_t *value;
    json_object_foreach(op->u.step.series, key, value) {
        sqlite3_bind_int64(st[1], 1, op->run_id);
        bind_text(st[1], 2, key);
        sqlite3_bind_int64(st[1], 3, op->u.step.global_step);
        bind_real(st[1], 4, json_is_number(value) ? json_number_value(value) : NAN);
        sqlite3_bind_int64(st[1], 5, op->t);
        run(db, st[1]);
    }
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->u.step.global_step);
    bind_int(st[0], 3, op->u.step.epoch);
    bind_int(st[0], 4, op->u.step.step);
    bind_real(st[0], 5, op->u.step.loss);
    bind_real(st[0], 6, op->u.step.lr);
    bind_real(st[0], 7, op->u.step.samples_per_s);
    sqlite3_bind_int64(st[0], 8, op->t);
    return run(db, st[0]);
}

static void free_step(store_op *op) { json_decref(op->u.step.series); }

/* ---- metric: what a command run's script reports (reporter/README.md) ---- */

/* values[name] as a double: NaN when null or absent. */
static double value_real(const json_t *values, const char *name) {
    const json_t *v = json_object_get(values, name);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

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
    if (epoch != NO_INT) {
        op->kind = OP_EPOCH;
        op->u.epoch.epoch = epoch;
        op->u.epoch.lr = value_real(values, "lr");
        op->u.epoch.train_loss = value_real(values, "train_loss");
        op->u.epoch.test_loss = value_real(values, "test_loss");
        op->u.epoch.test_acc = value_real(values, "test_acc");
        op->u.epoch.seconds = value_real(values, "seconds");
        op->u.epoch.samples_per_s = value_real(values, "samples_per_s");
        return NULL;
    }
    if (global_step < 1) return "a metric event's global_step counts steps done: from 1";
    if (op->rank != 0) { /* the series keep rank 0's points; another rank's step is its progress */
        op->kind = OP_HEARTBEAT;
        op->u.heartbeat.global_step = global_step;
        op->u.heartbeat.step_ms = NAN;
        op->u.heartbeat.gpu_mem_used = op->u.heartbeat.gpu_mem_total = NO_INT;
        return NULL;
    }
    op->kind = OP_STEP;
    op->u.step.global_step = global_step;
    op->u.step.epoch = op->u.step.step = NO_INT;
    op->u.step.loss = value_real(values, "loss");
    op->u.step.lr = value_real(values, "lr");
    op->u.step.samples_per_s = value_real(values, "samples_per_s");
    json_t *series = NULL;
    json_object_foreach((json_t *)values, key, value) {
        if (!strcmp(key, "loss") || !strcmp(key, "lr") || !strcmp(key, "samples_per_s")) continue;
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

static const char *parse_heartbeat(const json_t *ev, store_op *op) {
    op->u.heartbeat.global_step = event_int(ev, "global_step");
    op->u.heartbeat.step_ms = event_real(ev, "step_ms");
    op->u.heartbeat.gpu_mem_used = event_int(ev, "gpu_mem_used_bytes"); /* nccl ranks only */
    op->u.heartbeat.gpu_mem_total = event_int(ev, "gpu_mem_total_bytes");
    return NULL;
}

static int64_t apply_heartbeat(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    if (op->rank < 0) return 0; /* the launcher's: nothing to keep */
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int(st[0], 2, op->rank);
    bind_int(st[0], 3, op->u.heartbeat.global_step);
    bind_real(st[0], 4, op->u.heartbeat.step_ms);
    sqlite3_bind_int64(st[0], 5, op->t);
    bind_int(st[0], 6, op->u.heartbeat.gpu_mem_used);
    bind_int(st[0], 7, op->u.heartbeat.gpu_mem_total);
    return run(db, st[0]);
}

static json_t *progress_heartbeat(const store_op *op, const run_facts *f) {
    (void)f;
    return json_pack("{s:I,s:i,s:o,s:o,s:o,s:o,s:o}", "run", (json_int_t)op->run_id, "rank", op->rank, "global_step",
                     json_int_or_null(op->u.heartbeat.global_step), "step_ms",
                     json_real_or_null(op->u.heartbeat.step_ms), "gpu_mem_used_bytes",
                     json_int_or_null(op->u.heartbeat.gpu_mem_used), "gpu_mem_total_bytes",
                     json_int_or_null(op->u.heartbeat.gpu_mem_total), "t", json_int_or_null(op->t));
}

static int heartbeat_rank(const store_op *op) { return op->rank >= 0 ? op->rank : -2; /* the launcher's: none */ }

/* ---- epoch: an epoch's results (rank 0) ---- */

static const char *parse_epoch(const json_t *ev, store_op *op) {
    op->u.epoch.epoch = event_int(ev, "epoch");
    if (op->u.epoch.epoch == NO_INT) return "an epoch event without an integer epoch";
    op->u.epoch.lr = event_real(ev, "lr");
    op->u.epoch.train_loss = event_real(ev, "train_loss");
    op->u.epoch.test_loss = event_real(ev, "test_loss");
    op->u.epoch.test_acc = event_real(ev, "test_acc");
    op->u.epoch.seconds = event_real(ev, "seconds");
    op->u.epoch.samples_per_s = event_real(ev, "samples_per_s");
    return NULL;
}

static int64_t apply_epoch(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->u.epoch.epoch);
    bind_real(st[0], 3, op->u.epoch.lr);
    bind_real(st[0], 4, op->u.epoch.train_loss);
    bind_real(st[0], 5, op->u.epoch.test_loss);
    bind_real(st[0], 6, op->u.epoch.test_acc);
    bind_real(st[0], 7, op->u.epoch.seconds);
    bind_real(st[0], 8, op->u.epoch.samples_per_s);
    sqlite3_bind_int64(st[0], 9, op->t);
    return run(db, st[0]);
}

static json_t *sse_epoch(const store_op *op, int64_t result) {
    if (result <= 0) return NULL;
    return json_pack("{s:I,s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "run", (json_int_t)op->run_id, "epoch",
                     (json_int_t)op->u.epoch.epoch, "lr", json_real_or_null(op->u.epoch.lr), "train_loss",
                     json_real_or_null(op->u.epoch.train_loss), "test_loss", json_real_or_null(op->u.epoch.test_loss),
                     "test_acc", json_real_or_null(op->u.epoch.test_acc), "seconds",
                     json_real_or_null(op->u.epoch.seconds), "samples_per_s",
                     json_real_or_null(op->u.epoch.samples_per_s), "t", json_int_or_null(op->t));
}

/* ---- checkpoint: rank 0 wrote one ---- */

static const char *parse_checkpoint(const json_t *ev, store_op *op) {
    op->u.checkpoint.global_step = event_int(ev, "global_step");
    if (op->u.checkpoint.global_step == NO_INT) return "a checkpoint event without an integer global_step";
    op->u.checkpoint.epoch = event_int(ev, "epoch");
    op->u.checkpoint.bytes = event_int(ev, "bytes");
    op->u.checkpoint.path = event_str(ev, "path");
    json_t *removed = json_object_get(ev, "removed");
    if (removed && !json_is_array(removed)) return "a checkpoint event whose removed is not an array of paths";
    for (size_t i = 0; i < json_array_size(removed); i++)
        if (!json_is_string(json_array_get(removed, i))) return "a checkpoint event whose removed is not an array of paths";
    op->u.checkpoint.removed = json_incref(removed);
    return NULL;
}

static int64_t apply_checkpoint(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->u.checkpoint.global_step);
    bind_int(st[0], 3, op->u.checkpoint.epoch);
    bind_text(st[0], 4, op->u.checkpoint.path);
    bind_int(st[0], 5, op->u.checkpoint.bytes);
    sqlite3_bind_int64(st[0], 6, op->t);
    int64_t changed = run(db, st[0]);
    if (json_array_size(op->u.checkpoint.removed)) { /* the older ones its `keep` deleted from disk */
        char *paths = json_dumps(op->u.checkpoint.removed, JSON_COMPACT);
        sqlite3_bind_int64(st[1], 1, op->run_id);
        bind_text(st[1], 2, paths);
        run(db, st[1]);
        free(paths);
    }
    return changed;
}

static json_t *sse_checkpoint(const store_op *op, int64_t result) {
    if (result <= 0) return NULL; /* a finished or deleted run's: refused */
    json_t *d = json_pack("{s:I,s:o,s:I,s:o,s:o,s:o}", "run", (json_int_t)op->run_id, "epoch",
                     json_int_or_null(op->u.checkpoint.epoch), "global_step", (json_int_t)op->u.checkpoint.global_step,
                     "path", json_string_or_null(op->u.checkpoint.path), "bytes",
                     json_int_or_null(op->u.checkpoint.bytes), "t", json_int_or_null(op->t));
    json_object_set_new(d, "removed", op->u.checkpoint.removed ? json_deep_copy(op->u.checkpoint.removed) : json_array());
    return d;
}

static void free_checkpoint(store_op *op) {
    free(op->u.checkpoint.path);
    json_decref(op->u.checkpoint.removed);
}

/* ---- run life: insert (queued), starting, running, canceling, finish, delete ---- */

static int64_t apply_insert(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    bind_text(st[0], 1, op->u.insert.name);
    bind_text(st[0], 2, op->u.insert.config);
    sqlite3_bind_int(st[0], 3, op->u.insert.world_size);
    bind_text(st[0], 4, op->u.insert.device_kind);
    sqlite3_bind_int64(st[0], 5, op->t);
    bind_text(st[0], 6, op->u.insert.command ? "command" : "builtin");
    return run(db, st[0]) == 1 ? sqlite3_last_insert_rowid(db) : -1;
}

static json_t *sse_insert(const store_op *op, int64_t result) {
    if (result <= 0) return NULL;
    json_t *d = run_event(result, run_status_name(RUN_QUEUED), op->t);
    json_object_set_new(d, "name", json_string_or_null(op->u.insert.name));
    json_object_set_new(d, "world_size", json_integer(op->u.insert.world_size));
    json_object_set_new(d, "device_kind", json_string(op->u.insert.device_kind ? op->u.insert.device_kind : ""));
    return d;
}

static void free_insert(store_op *op) {
    free(op->u.insert.name);
    free(op->u.insert.config);
}

static int64_t apply_starting(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    bind_text(st[0], 2, op->u.starting.devices);
    bind_int(st[0], 3, op->u.starting.pid); /* none for a run whose launchers all run on agents */
    sqlite3_bind_int64(st[0], 4, op->t);
    bind_int(st[0], 5, op->u.starting.pid_start_time);
    bind_text(st[0], 6, op->u.starting.secret);
    return run(db, st[0]);
}

static json_t *sse_starting(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_STARTING), op->t);
    json_t *devices = op->u.starting.devices ? json_loads(op->u.starting.devices, 0, NULL) : NULL;
    json_object_set_new(d, "devices", devices ? devices : json_array());
    json_object_set_new(d, "pid", json_int_or_null(op->u.starting.pid));
    return d;
}

static void free_starting(store_op *op) {
    free(op->u.starting.devices);
    free(op->u.starting.secret);
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
    bind_text(st[0], 2, op->u.finish.status);
    bind_text(st[0], 3, op->u.finish.reason);
    bind_int(st[0], 4, op->u.finish.exit_code);
    bind_int(st[0], 5, op->u.finish.exit_signal);
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

/* A failed or canceled built-in run queued again from a checkpoint (POST
 * /runs/{id}/resume): the resume is recorded with what the run was, the run is
 * queued, and what it recorded past the checkpoint goes (the trainer does those
 * steps again: one point per step). Its progress is the checkpoint's. */
static int64_t apply_resume(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->t);
    bind_text(st[0], 3, op->u.resume.from_checkpoint);
    bind_int(st[0], 4, op->u.resume.from_epoch);
    bind_int(st[0], 5, op->u.resume.from_global_step);
    int64_t n = run(db, st[0]);
    int64_t gs = op->u.resume.from_global_step == NO_INT ? 0 : op->u.resume.from_global_step;
    int64_t epoch = op->u.resume.from_epoch == NO_INT ? -1 : op->u.resume.from_epoch;
    for (int i = 1; n == 1 && i < OP_MAX_SQL && st[i]; i++) {
        sqlite3_bind_int64(st[i], 1, op->run_id);
        sqlite3_bind_int64(st[i], 2, i == 3 ? epoch : gs);
        run(db, st[i]);
    }
    return n;
}

static json_t *sse_resume(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_QUEUED), op->t);
    json_object_set_new(d, "resumed", json_pack("{s:o,s:o,s:o}", "from_checkpoint",
                                                json_string_or_null(op->u.resume.from_checkpoint), "from_epoch",
                                                json_int_or_null(op->u.resume.from_epoch), "from_global_step",
                                                json_int_or_null(op->u.resume.from_global_step)));
    return d;
}

static void free_resume(store_op *op) { free(op->u.resume.from_checkpoint); }

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
        .kind = OP_HELLO, .event = "hello", .parse = parse_hello,
        .sql = {"INSERT INTO ranks (run_id, rank, pid, host, device, state, connected_at, last_seen)"
                " VALUES (?1, ?2, ?3, ?4, ?5, 'init', ?6, ?6)"
                " ON CONFLICT (run_id, rank) DO UPDATE SET pid = excluded.pid, host = excluded.host,"
                " device = excluded.device, connected_at = excluded.connected_at, last_seen = excluded.last_seen",
                "UPDATE runs SET total_steps = coalesce(?2, total_steps), epochs = coalesce(?3, epochs),"
                " steps_per_epoch = coalesce(?4, steps_per_epoch) WHERE id = ?1"},
        .apply = apply_hello, .sse_event = "rank", .sse_data = sse_hello, .learn = learn_hello,
        .free_fields = free_hello,
    },
    [OP_STATUS] = {
        .kind = OP_STATUS, .event = "status", .parse = parse_status,
        .sql = {"INSERT INTO ranks (run_id, rank, state, detail, last_seen) VALUES (?1, ?2, ?3, ?4, ?5)"
                " ON CONFLICT (run_id, rank) DO UPDATE SET state = excluded.state, detail = excluded.detail,"
                " last_seen = excluded.last_seen"},
        .apply = apply_status, .sse_event = "rank", .sse_data = sse_status, .free_fields = free_status,
    },
    [OP_STEP] = {
        .kind = OP_STEP, .event = "step", .parse = parse_step,
        .sql = {"INSERT OR REPLACE INTO steps (run_id, global_step, epoch, step, loss, lr, samples_per_s, t)"
                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                "INSERT OR REPLACE INTO series (run_id, key, global_step, value, t) VALUES (?1, ?2, ?3, ?4, ?5)"},
        .apply = apply_step, .summary = SUMMARY_PROGRESS | SUMMARY_SEEN, .progress_event = "step",
        .progress_data = progress_step, .progress_rank = run_wide, .learn = learn_step, .free_fields = free_step,
    },
    [OP_METRIC] = {
        /* never queued as itself: parse turns it into a step, epoch or heartbeat op */
        .kind = OP_METRIC, .event = "metric", .parse = parse_metric, .progress_rank = run_wide,
    },
    [OP_HEARTBEAT] = {
        .kind = OP_HEARTBEAT, .event = "heartbeat", .parse = parse_heartbeat,
        .sql = {"INSERT INTO ranks (run_id, rank, global_step, step_ms, last_seen, gpu_mem_used_bytes,"
                " gpu_mem_total_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                " ON CONFLICT (run_id, rank) DO UPDATE SET global_step = excluded.global_step,"
                " step_ms = excluded.step_ms, last_seen = excluded.last_seen,"
                " gpu_mem_used_bytes = coalesce(excluded.gpu_mem_used_bytes, gpu_mem_used_bytes),"
                " gpu_mem_total_bytes = coalesce(excluded.gpu_mem_total_bytes, gpu_mem_total_bytes)"},
        .apply = apply_heartbeat, .progress_event = "heartbeat", .progress_data = progress_heartbeat,
        .progress_rank = heartbeat_rank,
    },
    [OP_EPOCH] = {
        .kind = OP_EPOCH, .event = "epoch", .parse = parse_epoch,
        .sql = {"INSERT OR REPLACE INTO epochs (run_id, epoch, lr, train_loss, test_loss, test_acc, seconds,"
                " samples_per_s, t) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"},
        .apply = apply_epoch, .summary = SUMMARY_SEEN, .sse_event = "epoch", .sse_data = sse_epoch,
    },
    [OP_CHECKPOINT] = {
        .kind = OP_CHECKPOINT, .event = "checkpoint", .parse = parse_checkpoint,
        .sql = {"INSERT OR REPLACE INTO checkpoints (run_id, global_step, epoch, path, bytes, t)"
                " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                "DELETE FROM checkpoints WHERE run_id = ?1 AND path IN (SELECT value FROM json_each(?2))"},
        .apply = apply_checkpoint, .summary = SUMMARY_SEEN, .sse_event = "checkpoint", .sse_data = sse_checkpoint,
        .free_fields = free_checkpoint,
    },
    [OP_RUN_INSERT] = {
        .kind = OP_RUN_INSERT,
        .sql = {"INSERT INTO runs (name, status, config, world_size, device_kind, created_at, kind)"
                " VALUES (?1, 'queued', ?2, ?3, ?4, ?5, ?6)"},
        .apply = apply_insert, .sse_event = "run", .sse_data = sse_insert, .free_fields = free_insert,
    },
    [OP_RUN_STARTING] = {
        .kind = OP_RUN_STARTING,
        .sql = {"UPDATE runs SET status = 'starting', devices = ?2, pid = ?3, started_at = ?4, pid_start_time = ?5,"
                " secret = ?6 WHERE id = ?1 AND status = 'queued'"},
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
        .sql = {"UPDATE runs SET status = ?2, reason = ?3, exit_code = ?4, exit_signal = ?5, finished_at = ?6"
                " WHERE id = ?1 AND status NOT IN ('succeeded', 'failed', 'canceled')"},
        .apply = apply_finish, .sse_event = "run", .sse_data = sse_finish, .ends_run = finish_ends_run,
        .free_fields = free_finish,
    },
    [OP_RUN_DELETE] = {
        .kind = OP_RUN_DELETE,
        .sql = {"DELETE FROM runs WHERE id = ?1 AND status IN ('succeeded', 'failed', 'canceled')",
                "DELETE FROM steps WHERE run_id = ?1", "DELETE FROM series WHERE run_id = ?1",
                "DELETE FROM epochs WHERE run_id = ?1",
                "DELETE FROM ranks WHERE run_id = ?1", "DELETE FROM checkpoints WHERE run_id = ?1",
                "DELETE FROM events WHERE run_id = ?1"},
        .apply = apply_delete, .sse_event = "deleted", .sse_data = sse_delete, .ends_run = delete_ends_run,
    },
    [OP_RUN_RESUME] = {
        .kind = OP_RUN_RESUME,
        .sql = {"INSERT INTO run_resumes (run_id, n, at, from_checkpoint, from_epoch, from_global_step, prior_status,"
                " prior_reason, prior_exit_code, prior_exit_signal)"
                " SELECT id, (SELECT count(*) + 1 FROM run_resumes WHERE run_id = ?1), ?2, ?3, ?4, ?5, status, reason,"
                " exit_code, exit_signal FROM runs WHERE id = ?1 AND status IN ('failed', 'canceled') AND kind = 'builtin'",
                /* ?2: the checkpoint's global step */
                "UPDATE runs SET status = 'queued', reason = NULL, exit_code = NULL, exit_signal = NULL,"
                " finished_at = NULL, devices = NULL, pid = NULL, first_step_at = NULL, first_global_step = NULL,"
                " last_step_at = NULL, samples_per_s = NULL, global_step = ?2,"
                " epoch = (SELECT epoch FROM steps WHERE run_id = ?1 AND global_step = ?2),"
                " step = (SELECT step FROM steps WHERE run_id = ?1 AND global_step = ?2),"
                " loss = (SELECT loss FROM steps WHERE run_id = ?1 AND global_step = ?2),"
                " lr = (SELECT lr FROM steps WHERE run_id = ?1 AND global_step = ?2) WHERE id = ?1",
                "DELETE FROM steps WHERE run_id = ?1 AND global_step > ?2",
                "DELETE FROM epochs WHERE run_id = ?1 AND epoch > ?2", /* ?2: the checkpoint's epoch */
                "DELETE FROM checkpoints WHERE run_id = ?1 AND global_step > ?2",
                "DELETE FROM series WHERE run_id = ?1 AND global_step > ?2"},
        .apply = apply_resume, .sse_event = "run", .sse_data = sse_resume, .free_fields = free_resume,
    },
    [OP_SYNC] = {.kind = OP_SYNC, .apply = apply_nothing},
};

const op_kind_desc *op_kind_for_event(const char *type) {
    for (int i = 0; type && i < OP_KIND_COUNT; i++)
        if (OP_KINDS[i].event && strcmp(OP_KINDS[i].event, type) == 0) return &OP_KINDS[i];
    return NULL;
}

void store_op_free(store_op *op) {
    if (op->kind >= 0 && op->kind < OP_KIND_COUNT && OP_KINDS[op->kind].free_fields)
        OP_KINDS[op->kind].free_fields(op);
}
