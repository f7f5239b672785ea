/* The server's own ops on the store (run_ops.h): each kind's statements, in the
 * order its apply binds them (st[i]), the function that binds and runs them, and what
 * the live feed publishes of it. The table that names them is OP_KINDS
 * (event_kinds.c). */
#include "run_ops.h"

#include <stdio.h>
#include <stdlib.h>

#include "attempt_steps.h"
#include "base.h"
#include "journal_writers.h"
#include "step_rows.h"
#include "kind_fields.h"
#include "rollups.h"
#include "run_status.h"
#include "write_fault.h"

/* {run, status, t}: a run's new status in the feed. */
static json_t *run_event(int64_t run_id, const char *status, int64_t t) {
    return json_pack("{s:I,s:s,s:o}", "run", (json_int_t)run_id, "status", status, "t", json_int_or_null(t));
}

/* ---- insert: a run queued (result: its id, the next one or a rebuilt run's own) ---- */

const char *const OP_RUN_INSERT_SQL[] = {
    "INSERT INTO runs (id, name, status, config, world_size, device_kind, created_at, kind, owner, priority,"
    " preemptible, queued_at, sweep_id, trial, memory_bytes) VALUES (?7, ?1, 'queued', ?2, ?3, ?4,"
    /* created_at never before the newest run's (one seek of runs_by_created): a time
     * window of GET /runs is a range of ids (run_list.c), a clock stepped back or not */
    " max(?5, coalesce((SELECT max(created_at) FROM runs), ?5)), ?6, ?8,"
    " ?9, ?10, ?5, ?11, ?12, ?13)",
    /* who submitted it (u.insert.actor): its audit entry, bound after the row went in */
    "INSERT INTO audit (t, actor, action, target, run_id, subject, detail) VALUES (?1, ?2, 'run.submit',"
    " 'run/' || ?3, ?3, ?4, ?5)",
    /* its timeline's first entry (u.insert.submitted), in the same transaction: a
     * submission is one commit */
    "INSERT INTO run_timeline (run_id, t, kind, detail) VALUES (?1, ?2, 'submitted', ?3)",
    NULL,
};

int64_t op_run_insert_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
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
    if (write_fault_step(db, st[0]) != 1) return -1;
    int64_t id = sqlite3_last_insert_rowid(db);
    if (op->u.insert.actor) { /* who submitted it, in the same transaction (sched/runs.c, store/audit.h) */
        json_t *d = json_pack("{s:s?,s:i,s:s?,s:i,s:s}", "name", op->u.insert.name, "world_size",
                              op->u.insert.world_size, "device_kind", op->u.insert.device_kind, "priority",
                              op->u.insert.priority, "kind", op->u.insert.command ? "command" : "builtin");
        if (op->u.insert.sweep_id > 0) {
            json_object_set_new(d, "sweep_id", json_integer(op->u.insert.sweep_id));
            json_object_set_new(d, "trial", json_integer(op->u.insert.trial));
        }
        char *detail = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(d);
        sqlite3_bind_int64(st[1], 1, op->t);
        bind_text_or_null(st[1], 2, op->u.insert.actor);
        sqlite3_bind_int64(st[1], 3, id);
        bind_text_or_null(st[1], 4, op->u.insert.owner);
        bind_text_or_null(st[1], 5, detail);
        int64_t ok = write_fault_step(db, st[1]);
        free(detail);
        if (ok != 1) return -1;
    }
    if (op->u.insert.submitted) {
        sqlite3_bind_int64(st[2], 1, id);
        sqlite3_bind_int64(st[2], 2, op->t);
        bind_text_or_null(st[2], 3, op->u.insert.submitted);
        if (write_fault_step(db, st[2]) != 1) return -1;
    }
    return id;
}

json_t *op_run_insert_sse(const store_op *op, int64_t result) {
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

void op_run_insert_free(store_op *op) {
    free(op->u.insert.name);
    free(op->u.insert.config);
    free(op->u.insert.owner);
    free(op->u.insert.actor);
    free(op->u.insert.submitted);
}

/* ---- starting: a queued run launched (its devices, pid and secret; a batch job's id) ---- */

const char *const OP_RUN_STARTING_SQL[] = {
    "UPDATE runs SET status = 'starting', devices = ?2, pid = ?3, started_at = ?4, pid_start_time = ?5,"
    " secret = ?6, slurm_job_id = coalesce(?7, slurm_job_id) WHERE id = ?1 AND status = 'queued'",
    NULL,
};

int64_t op_run_starting_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    bind_text_or_null(st[0], 2, op->u.starting.devices);
    bind_int_or_null(st[0], 3, op->u.starting.pid); /* none for a run whose launchers all run on agents */
    sqlite3_bind_int64(st[0], 4, op->t);
    bind_int_or_null(st[0], 5, op->u.starting.pid_start_time);
    bind_text_or_null(st[0], 6, op->u.starting.secret);
    bind_text_or_null(st[0], 7, op->u.starting.job); /* a batch system's job; none on this host or an agent */
    return write_fault_step(db, st[0]);
}

json_t *op_run_starting_sse(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_STARTING), op->t);
    json_t *devices = op->u.starting.devices ? json_loads(op->u.starting.devices, 0, NULL) : NULL;
    json_object_set_new(d, "devices", devices ? devices : json_array());
    json_object_set_new(d, "pid", json_int_or_null(op->u.starting.pid));
    if (op->u.starting.job) json_object_set_new(d, "slurm_job_id", json_string(op->u.starting.job));
    return d;
}

void op_run_starting_free(store_op *op) {
    free(op->u.starting.devices);
    free(op->u.starting.secret);
    free(op->u.starting.job);
}

/* ---- running, canceling: a started run's status ---- */

/* Statements that take the run's id alone (running, canceling, restart). */
int64_t op_apply_by_id(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    return write_fault_step(db, st[0]);
}

const char *const OP_RUN_RUNNING_SQL[] = {
    "UPDATE runs SET status = 'running' WHERE id = ?1 AND status = 'starting'",
    NULL,
};

json_t *op_run_running_sse(const store_op *op, int64_t result) {
    return result == 1 ? run_event(op->run_id, run_status_name(RUN_RUNNING), op->t) : NULL;
}

const char *const OP_RUN_CANCELING_SQL[] = {
    "UPDATE runs SET status = 'canceling' WHERE id = ?1 AND status IN ('starting', 'running')",
    NULL,
};

json_t *op_run_canceling_sse(const store_op *op, int64_t result) {
    return result == 1 ? run_event(op->run_id, run_status_name(RUN_CANCELING), op->t) : NULL;
}

/* ---- finish: a run ended (its final status, reason and exit) ---- */

const char *const OP_RUN_FINISH_SQL[] = {
    "UPDATE runs SET status = ?2, reason = ?3, exit_code = ?4, exit_signal = ?5, finished_at = ?6,"
    " preempting = 0 WHERE id = ?1 AND status NOT IN ('succeeded', 'failed', 'canceled', 'stopped', 'timeout')",
    /* its journal to compact, once this is committed (journal_compact.h) */
    "INSERT OR IGNORE INTO journal_compact (run_id) VALUES (?1)",
    NULL,
};

int64_t op_run_finish_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    bind_text_or_null(st[0], 2, op->u.finish.status);
    bind_text_or_null(st[0], 3, op->u.finish.reason);
    bind_int_or_null(st[0], 4, op->u.finish.exit_code);
    bind_int_or_null(st[0], 5, op->u.finish.exit_signal);
    sqlite3_bind_int64(st[0], 6, op->t);
    int64_t n = write_fault_step(db, st[0]);
    run_status s;
    if (n == 1 && run_status_parse(op->u.finish.status, &s) && run_status_is_final(s)) {
        sqlite3_bind_int64(st[1], 1, op->run_id);
        write_fault_step(db, st[1]);
        journal_writers_finished(op->run_id);
    }
    return n;
}

json_t *op_run_finish_sse(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, op->u.finish.status, op->t);
    json_object_set_new(d, "reason", json_string_or_null(op->u.finish.reason));
    json_object_set_new(d, "exit_code", json_int_or_null(op->u.finish.exit_code));
    json_object_set_new(d, "exit_signal", json_int_or_null(op->u.finish.exit_signal));
    return d;
}

bool op_run_finish_ends_run(const store_op *op, int64_t result) {
    run_status s;
    return result == 1 && run_status_parse(op->u.finish.status, &s) && run_status_is_final(s);
}

void op_run_finish_free(store_op *op) { free(op->u.finish.reason); }

/* ---- delete: a finished run and everything recorded of it (result: 1, else 0) ---- */

const char *const OP_RUN_DELETE_SQL[] = {
    "DELETE FROM runs WHERE id = ?1 AND status IN ('succeeded', 'failed', 'canceled', 'stopped', 'timeout')",
    "DELETE FROM step_rows WHERE " STEP_OF_RUN("?1"), "DELETE FROM series_points WHERE run_id = ?1",
    "DELETE FROM epochs WHERE run_id = ?1",
    "DELETE FROM ranks WHERE run_id = ?1", "DELETE FROM checkpoints WHERE run_id = ?1",
    "DELETE FROM events WHERE run_id = ?1", "DELETE FROM run_timeline WHERE run_id = ?1",
    NULL,
};

/* A finished run and everything recorded of it, its feed events too. */
int64_t op_run_delete_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    rollup_forget(); /* its series go (and their rollups, by migration 0017's trigger) */
    attempt_steps_forget();
    sqlite3_bind_int64(st[0], 1, op->run_id);
    int64_t n = write_fault_step(db, st[0]);
    for (int i = 1; n == 1 && i < OP_MAX_SQL && st[i]; i++) {
        sqlite3_bind_int64(st[i], 1, op->run_id);
        write_fault_step(db, st[i]);
    }
    return n;
}

json_t *op_run_delete_sse(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    return json_pack("{s:I,s:I}", "run", (json_int_t)op->run_id, "t", (json_int_t)op->t);
}

bool op_run_delete_ends_run(const store_op *op, int64_t result) {
    (void)op;
    return result == 1;
}

/* ---- resume: a failed, canceled or stopped run queued again (result: 1, else 0) ---- */

const char *const OP_RUN_RESUME_SQL[] = {
    "INSERT INTO run_resumes (run_id, n, at, from_checkpoint, from_epoch, from_global_step, prior_status,"
    " prior_reason, prior_exit_code, prior_exit_signal, attempt)"
    " SELECT id, (SELECT count(*) + 1 FROM run_resumes WHERE run_id = ?1), ?2, ?3, ?4, ?5, status, reason,"
    " exit_code, exit_signal, ?6 FROM runs WHERE id = ?1 AND status IN ('failed', 'canceled', 'stopped', 'timeout')"
    " AND (?3 IS NOT NULL OR kind = 'command')",
    /* ?2: the checkpoint's global step; NULL (a command run): its progress stays */
    "UPDATE runs SET status = 'queued', reason = NULL, exit_code = NULL, exit_signal = NULL,"
    " finished_at = NULL, devices = NULL, pid = NULL, slurm_job_id = NULL, first_step_at = NULL,"
    " first_global_step = NULL,"
    " last_step_at = NULL, samples_per_s = CASE WHEN ?2 IS NULL THEN samples_per_s END,"
    " global_step = coalesce(?2, global_step),"
    " queued_at = (SELECT at FROM run_resumes WHERE run_id = ?1 ORDER BY n DESC LIMIT 1),"
    " epoch = CASE WHEN ?2 IS NULL THEN epoch ELSE (SELECT epoch FROM step_rows WHERE " STEP_AT("?1", "?2") ") END,"
    " step = CASE WHEN ?2 IS NULL THEN step ELSE (SELECT " STEP_STEP " FROM step_rows WHERE " STEP_AT("?1", "?2") ") END,"
    " loss = CASE WHEN ?2 IS NULL THEN loss ELSE (SELECT loss FROM step_rows WHERE " STEP_AT("?1", "?2") ") END,"
    " lr = CASE WHEN ?2 IS NULL THEN lr ELSE (SELECT lr FROM step_rows WHERE " STEP_AT("?1", "?2") ") END"
    " WHERE id = ?1",
    "DELETE FROM step_rows WHERE " STEP_AFTER("?1", "?2"),
    "DELETE FROM epochs WHERE run_id = ?1 AND epoch > ?2", /* ?2: the checkpoint's epoch */
    "DELETE FROM checkpoints WHERE run_id = ?1 AND global_step > ?2",
    "DELETE FROM series_points WHERE run_id = ?1 AND global_step > ?2",
    NULL,
};

/* A failed or canceled run queued again (POST /runs/{id}/resume): the resume is
 * recorded with what the run was and the attempt it starts at, and the run is
 * queued. A built-in run continues from a checkpoint: what it recorded past that
 * checkpoint goes (the trainer does those steps again: one point per step) and its
 * progress is the checkpoint's. A command run (no checkpoint: its script loads its
 * own snapshot) keeps what it recorded; the steps it reports again replace theirs. */
int64_t op_run_resume_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    bool from_checkpoint = op->u.resume.from_checkpoint != NULL;
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->t);
    bind_text_or_null(st[0], 3, op->u.resume.from_checkpoint);
    bind_int_or_null(st[0], 4, op->u.resume.from_epoch);
    bind_int_or_null(st[0], 5, op->u.resume.from_global_step);
    bind_int_or_null(st[0], 6, op->u.resume.attempt);
    int64_t n = write_fault_step(db, st[0]);
    int64_t gs = op->u.resume.from_global_step == NO_INT ? 0 : op->u.resume.from_global_step;
    int64_t epoch = op->u.resume.from_epoch == NO_INT ? -1 : op->u.resume.from_epoch;
    for (int i = 1; n == 1 && i < OP_MAX_SQL && st[i] && (i == 1 || from_checkpoint); i++) {
        sqlite3_bind_int64(st[i], 1, op->run_id);
        if (i == 1 && !from_checkpoint) sqlite3_bind_null(st[i], 2); /* its progress stays */
        else sqlite3_bind_int64(st[i], 2, i == 3 ? epoch : gs);
        write_fault_step(db, st[i]);
    }
    if (n == 1 && from_checkpoint) rollup_cut(db, op->run_id, gs);
    return n;
}

json_t *op_run_resume_sse(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_QUEUED), op->t);
    json_object_set_new(d, "resumed", json_pack("{s:o,s:o,s:o,s:o}", "from_checkpoint",
                                                json_string_or_null(op->u.resume.from_checkpoint), "from_epoch",
                                                json_int_or_null(op->u.resume.from_epoch), "from_global_step",
                                                json_int_or_null(op->u.resume.from_global_step), "attempt",
                                                json_int_or_null(op->u.resume.attempt)));
    return d;
}

void op_run_resume_free(store_op *op) { free(op->u.resume.from_checkpoint); }

/* ---- preempting, requeue: a started run preempted for another, then queued again ---- */

const char *const OP_RUN_PREEMPTING_SQL[] = {
    "UPDATE runs SET preempting = 1, preempted_by = ?2, preempted_at = ?3"
    " WHERE id = ?1 AND status IN ('starting', 'running')",
    NULL,
};

/* A started run is being preempted for another: kept, so that a server that dies
 * before the run is queued again queues it at start-up instead of failing it. The
 * feed says nothing yet (the run's status has not changed): the requeue says it. */
int64_t op_run_preempting_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->u.preempting.by);
    sqlite3_bind_int64(st[0], 3, op->t);
    return write_fault_step(db, st[0]);
}

const char *const OP_RUN_REQUEUE_SQL[] = {
    /* ?3: the global step it continues from (NULL: a command run's: its progress stays) */
    /* ?4: an elastic run resized (its ranks then; NULL: a preemption): no preemption counted */
    "UPDATE runs SET status = 'queued', preempting = 0, preemptions = preemptions + (?4 IS NULL), queued_at = ?2,"
    " devices = NULL, pid = NULL, pid_start_time = NULL, secret = NULL, slurm_job_id = NULL, first_step_at = NULL,"
    " first_global_step = NULL, last_step_at = NULL, samples_per_s = NULL,"
    " global_step = coalesce(?3, global_step),"
    " epoch = CASE WHEN ?3 IS NULL THEN epoch ELSE (SELECT epoch FROM step_rows WHERE " STEP_AT("?1", "?3") ") END,"
    " step = CASE WHEN ?3 IS NULL THEN step ELSE (SELECT " STEP_STEP " FROM step_rows WHERE " STEP_AT("?1", "?3") ") END,"
    " loss = CASE WHEN ?3 IS NULL THEN loss ELSE (SELECT loss FROM step_rows WHERE " STEP_AT("?1", "?3") ") END,"
    " lr = CASE WHEN ?3 IS NULL THEN lr ELSE (SELECT lr FROM step_rows WHERE " STEP_AT("?1", "?3") ") END"
    " WHERE id = ?1 AND status IN ('starting', 'running', 'canceling')",
    /* a preempted attempt reads so, not as the cancel (SIGTERM) that stopped a command run's (a resize ends none) */
    "UPDATE run_attempts SET status = ?4, reason = ?3, ended_at = coalesce(ended_at, ?2),"
    " failing_rank = NULL, exit_code = NULL, signal = NULL, last_line = NULL"
    " WHERE run_id = ?1 AND attempt = (SELECT max(attempt) FROM run_attempts WHERE run_id = ?1)",
    "DELETE FROM step_rows WHERE " STEP_AFTER("?1", "?2"),
    "DELETE FROM epochs WHERE run_id = ?1 AND epoch > ?2", /* ?2: the last epoch it holds */
    "DELETE FROM checkpoints WHERE run_id = ?1 AND global_step > ?2",
    "DELETE FROM series_points WHERE run_id = ?1 AND global_step > ?2",
    NULL,
};

/* A preempted run queued again (st[0]); its attempt closed as preempted, whatever its
 * launcher called the stop (st[1]; a resized run's attempt goes on at its new size:
 * left open); a built-in run's records past the checkpoint it goes on from dropped
 * (the rest; a command run's restart reports its steps again over them). */
int64_t op_run_requeue_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->t);
    bind_int_or_null(st[0], 3, op->u.requeue.from_global_step);
    int resized = op->u.requeue.resized_to;
    bind_int_or_null(st[0], 4, resized > 0 ? resized : NO_INT);
    int64_t n = write_fault_step(db, st[0]);
    if (n != 1) return n;
    if (resized <= 0) {
        char reason[96] = "preempted";
        if (op->u.requeue.by > 0) snprintf(reason, sizeof reason, "preempted by run %lld", (long long)op->u.requeue.by);
        sqlite3_bind_int64(st[1], 1, op->run_id);
        sqlite3_bind_int64(st[1], 2, op->t);
        bind_text_or_null(st[1], 3, op->u.requeue.reason ? op->u.requeue.reason : reason);
        sqlite3_bind_text(st[1], 4, "preempted", -1, SQLITE_STATIC);
        write_fault_step(db, st[1]);
    }
    int64_t gs = op->u.requeue.from_global_step, epoch = op->u.requeue.from_epoch == NO_INT ? -1 : op->u.requeue.from_epoch;
    for (int i = 2; gs != NO_INT && i < OP_MAX_SQL && st[i]; i++) {
        sqlite3_bind_int64(st[i], 1, op->run_id);
        sqlite3_bind_int64(st[i], 2, i == 3 ? epoch : gs);
        write_fault_step(db, st[i]);
    }
    if (gs != NO_INT) rollup_cut(db, op->run_id, gs);
    return n;
}

void op_run_requeue_free(store_op *op) { free(op->u.requeue.reason); }

json_t *op_run_requeue_sse(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_QUEUED), op->t);
    bool resized = op->u.requeue.resized_to > 0;
    json_object_set_new(d, "preempted_by", op->u.requeue.by > 0 && !resized ? json_integer(op->u.requeue.by) : json_null());
    if (resized) json_object_set_new(d, "resized_to", json_integer(op->u.requeue.resized_to));
    return d;
}

/* ---- restart: a started run queued again to start its next attempt (sched/run_restart.c) ---- */

const char *const OP_RUN_RESTART_SQL[] = {
    "UPDATE runs SET status = 'queued', devices = NULL, pid = NULL, pid_start_time = NULL, secret = NULL,"
    " slurm_job_id = NULL"
    " WHERE id = ?1 AND status IN ('starting', 'running')",
    NULL,
};

json_t *op_run_restart_sse(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_QUEUED), op->t);
    json_object_set_new(d, "restarting", json_pack("{s:o,s:o}", "attempt", json_int_or_null(op->u.restart.attempt),
                                                   "reason", json_string_or_null(op->u.restart.reason)));
    return d;
}

void op_run_restart_free(store_op *op) { free(op->u.restart.reason); }

/* ---- usage: an owner's decayed usage as of the op's time (fair share) ---- */

const char *const OP_USAGE_SQL[] = {
    "INSERT OR REPLACE INTO usage (owner, device_seconds, as_of) VALUES (?1, ?2, ?3)",
    NULL,
};

int64_t op_usage_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    bind_text_or_null(st[0], 1, op->u.usage.owner ? op->u.usage.owner : "");
    sqlite3_bind_double(st[0], 2, op->u.usage.device_seconds);
    sqlite3_bind_int64(st[0], 3, op->t);
    return write_fault_step(db, st[0]);
}

void op_usage_free(store_op *op) { free(op->u.usage.owner); }

/* ---- submitted: a queued run handed to a batch system (Slurm) ---- */

const char *const OP_RUN_SUBMITTED_SQL[] = {
    "UPDATE runs SET slurm_job_id = ?2, secret = ?3 WHERE id = ?1 AND status = 'queued'",
    NULL,
};

/* A queued run handed to Slurm: it stays queued (it waits in Slurm's queue), with
 * the job's id and the run's secret kept, so that a restarted server follows that
 * job instead of submitting the run again. */
int64_t op_run_submitted_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    bind_text_or_null(st[0], 2, op->u.submitted.job);
    bind_text_or_null(st[0], 3, op->u.submitted.secret);
    return write_fault_step(db, st[0]);
}

json_t *op_run_submitted_sse(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_QUEUED), op->t);
    json_object_set_new(d, "slurm_job_id", json_string_or_null(op->u.submitted.job));
    return d;
}

void op_run_submitted_free(store_op *op) {
    free(op->u.submitted.job);
    free(op->u.submitted.secret);
}

/* ---- sync: nothing (waiting on it waits for everything queued before) ---- */

int64_t op_sync_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    (void)db;
    (void)st;
    (void)op;
    return 0;
}

/* ---- reason: a stopped trial's reason, as its sweep's searcher decided on it ---- */

const char *const OP_RUN_REASON_SQL[] = {
    "UPDATE runs SET reason = ?2 WHERE id = ?1 AND status = 'stopped'",
    NULL,
};

int64_t op_run_reason_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    bind_text_or_null(st[0], 2, op->u.finish.reason);
    return write_fault_step(db, st[0]);
}

json_t *op_run_reason_sse(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = run_event(op->run_id, run_status_name(RUN_STOPPED), op->t);
    json_object_set_new(d, "reason", json_string_or_null(op->u.finish.reason));
    return d;
}

/* ---- sweep event: a sweep's searcher decided (nothing stored: the feed's `sweep` event) ---- */

/* A sweep's decision: published as it is (`run` is its trial's run, 0 for the sweep's own). */
int64_t op_sweep_event_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    (void)db;
    (void)st;
    (void)op;
    return 1;
}

json_t *op_sweep_event_sse(const store_op *op, int64_t result) {
    if (result != 1) return NULL;
    json_t *d = json_pack("{s:I,s:I,s:s,s:s}", "run", (json_int_t)(op->run_id > 0 ? op->run_id : 0), "sweep",
                          (json_int_t)op->u.sweep.sweep_id, "action", op->u.sweep.action ? op->u.sweep.action : "",
                          "status", op->u.sweep.status ? op->u.sweep.status : "");
    json_object_set_new(d, "trial", op->u.sweep.trial >= 0 ? json_integer(op->u.sweep.trial) : json_null());
    json_object_set_new(d, "detail", json_string_or_null(op->u.sweep.detail));
    json_object_set_new(d, "t", json_time(op->t));
    return d;
}

void op_sweep_event_free(store_op *op) {
    free(op->u.sweep.action);
    free(op->u.sweep.detail);
    free(op->u.sweep.status);
}

/* ---- sweep write: the sweeps' tables (server/sweep/sweep_store.c) ---- */

/* The sweeps' own writes, in the writer's transaction like every other change, so that
 * the database keeps one writer. One op is one of the searcher's decisions (the
 * statements between sweep_store_begin and sweep_store_commit), applied whole or not
 * at all: inside a savepoint, rolled back to it when a statement is refused, so that
 * none of its earlier statements stays. A refused op is logged and answered -1; the
 * rest of the batch goes on. */
int64_t op_sweep_write_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
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

void op_sweep_write_free(store_op *op) { free(op->u.exec.sql); }

/* ---- timeline: an entry of a run's timeline ---- */

const char *const OP_TIMELINE_SQL[] = {
    "INSERT INTO run_timeline (run_id, t, kind, detail) VALUES (?1, ?2, ?3, ?4)",
    NULL,
};

int64_t op_timeline_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->t);
    bind_text_or_null(st[0], 3, op->u.timeline.kind);
    bind_text_or_null(st[0], 4, op->u.timeline.detail);
    return write_fault_step(db, st[0]);
}

void op_timeline_free(store_op *op) { free(op->u.timeline.detail); }

/* ---- disk: what a run's directory holds on disk, as last measured ---- */

const char *const OP_RUN_DISK_SQL[] = {
    "UPDATE runs SET disk_bytes = ?2, disk_measured_at = ?3 WHERE id = ?1",
    NULL,
};

/* What a run's directory holds on disk, as the server measured it (sched's disk use). */
int64_t op_run_disk_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->run_id);
    sqlite3_bind_int64(st[0], 2, op->u.disk.bytes);
    sqlite3_bind_int64(st[0], 3, op->t);
    return write_fault_step(db, st[0]);
}

/* ---- audit: an entry of the audit log (audit.h) ---- */

/* ---- journal compacted: a finished run's row of journal_compact goes ---- */

const char *const OP_JOURNAL_COMPACTED_SQL[] = {
    "DELETE FROM journal_compact WHERE run_id = ?1",
    NULL,
};

const char *const OP_AUDIT_SQL[] = {
    "INSERT INTO audit (t, actor, action, target, run_id, subject, detail) VALUES (?1, ?2, ?3, ?4, ?5,"
    " coalesce(?6, (SELECT owner FROM runs WHERE id = ?5)), ?7)",
    NULL,
};

int64_t op_audit_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op) {
    sqlite3_bind_int64(st[0], 1, op->t);
    bind_text_or_null(st[0], 2, op->u.audit.actor);
    bind_text_or_null(st[0], 3, op->u.audit.action);
    bind_text_or_null(st[0], 4, op->u.audit.target);
    if (op->run_id > 0) sqlite3_bind_int64(st[0], 5, op->run_id);
    else sqlite3_bind_null(st[0], 5);
    bind_text_or_null(st[0], 6, op->u.audit.subject);
    bind_text_or_null(st[0], 7, op->u.audit.detail);
    return write_fault_step(db, st[0]) == 1 ? sqlite3_last_insert_rowid(db) : -1;
}

void op_audit_free(store_op *op) {
    free(op->u.audit.actor);
    free(op->u.audit.action);
    free(op->u.audit.target);
    free(op->u.audit.subject);
    free(op->u.audit.detail);
}
