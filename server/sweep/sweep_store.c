/* The sweeps' tables: see sweep_store.h. */
#include "sweep_store.h"

#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

static sqlite3 *DB;
static pthread_mutex_t MU = PTHREAD_MUTEX_INITIALIZER;

int sweep_store_open(const char *db_path, char *err, size_t errlen) {
    if (sqlite3_open_v2(db_path, &DB, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "sweeps: cannot open %s: %s", db_path, sqlite3_errmsg(DB));
        return -1;
    }
    sqlite3_busy_timeout(DB, 5000);
    return 0;
}

void sweep_store_close(void) {
    sqlite3_close(DB);
    DB = NULL;
}

void sweep_store_lock(void) { pthread_mutex_lock(&MU); }
void sweep_store_unlock(void) { pthread_mutex_unlock(&MU); }

static int exec(const char *sql) {
    char *msg = NULL;
    if (sqlite3_exec(DB, sql, NULL, NULL, &msg) != SQLITE_OK) {
        log_warn("sweeps: %s: %s", sql, msg ? msg : "?");
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

int sweep_store_begin(void) { return exec("BEGIN IMMEDIATE"); }
int sweep_store_commit(void) {
    if (exec("COMMIT") == 0) return 0;
    exec("ROLLBACK");
    return -1;
}

static sqlite3_stmt *prep(const char *sql) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(DB, sql, -1, &st, NULL) != SQLITE_OK) log_warn("sweeps: %s: %s", sql, sqlite3_errmsg(DB));
    return st;
}

static int step_done(sqlite3_stmt *st) {
    int rc = st ? sqlite3_step(st) : SQLITE_ERROR;
    if (rc != SQLITE_DONE) log_warn("sweeps: a write failed: %s", sqlite3_errmsg(DB));
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

static char *col_text(sqlite3_stmt *st, int c) {
    const unsigned char *t = sqlite3_column_text(st, c);
    return t ? xstrdup((const char *)t) : NULL;
}

int64_t sweep_store_insert(const char *name, const char *owner, const char *spec, int n_trials, int64_t t) {
    sqlite3_stmt *st = prep("INSERT INTO sweeps (name, owner, spec, status, n_trials, created_at) VALUES (?1, ?2, ?3,"
                            " 'running', ?4, ?5)");
    if (!st) return -1;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
    if (owner) sqlite3_bind_text(st, 2, owner, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 3, spec, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 4, n_trials);
    sqlite3_bind_int64(st, 5, t);
    return step_done(st) == 0 ? sqlite3_last_insert_rowid(DB) : -1;
}

#define SWEEP_COLS "id, name, owner, spec, status, reason, n_trials, best_trial, created_at, finished_at"

static void read_sweep(sqlite3_stmt *st, sweep_row *r) {
    r->id = sqlite3_column_int64(st, 0);
    r->name = col_text(st, 1);
    r->owner = col_text(st, 2);
    r->spec = col_text(st, 3);
    snprintf(r->status, sizeof r->status, "%s", (const char *)sqlite3_column_text(st, 4));
    r->reason = col_text(st, 5);
    r->n_trials = sqlite3_column_int(st, 6);
    r->best_trial = sqlite3_column_type(st, 7) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 7);
    r->created_at = sqlite3_column_int64(st, 8);
    r->finished_at = sqlite3_column_int64(st, 9);
}

int sweep_store_list(sweep_row **out, bool running_only) {
    sqlite3_stmt *st = prep(running_only ? "SELECT " SWEEP_COLS " FROM sweeps WHERE status = 'running' ORDER BY id"
                                         : "SELECT " SWEEP_COLS " FROM sweeps ORDER BY id DESC");
    if (!st) return -1;
    int n = 0, cap = 0;
    *out = NULL;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap) *out = xrealloc(*out, (size_t)(cap = cap ? cap * 2 : 8) * sizeof **out);
        read_sweep(st, &(*out)[n++]);
    }
    sqlite3_finalize(st);
    return n;
}

int sweep_store_get(int64_t id, sweep_row *out) {
    sqlite3_stmt *st = prep("SELECT " SWEEP_COLS " FROM sweeps WHERE id = ?1");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int found = sqlite3_step(st) == SQLITE_ROW;
    if (found) read_sweep(st, out);
    sqlite3_finalize(st);
    return found;
}

void sweep_row_free(sweep_row *r) {
    free(r->name);
    free(r->owner);
    free(r->spec);
    free(r->reason);
}

int sweep_store_finish(int64_t id, const char *status, const char *reason, int64_t t) {
    sqlite3_stmt *st = prep("UPDATE sweeps SET status = ?2, reason = ?3, finished_at = ?4 WHERE id = ?1 AND status = 'running'");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, status, -1, SQLITE_TRANSIENT);
    if (reason) sqlite3_bind_text(st, 3, reason, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 4, t);
    return step_done(st);
}

int sweep_store_set_best(int64_t id, int trial) {
    sqlite3_stmt *st = prep("UPDATE sweeps SET best_trial = ?2 WHERE id = ?1");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    if (trial >= 0) sqlite3_bind_int(st, 2, trial);
    return step_done(st);
}

int sweep_store_trials(int64_t id, trial_row **out) {
    sqlite3_stmt *st = prep("SELECT trial, params, run_id, state, rung, promoted, metric, metric_epoch, reason"
                            " FROM sweep_trials WHERE sweep_id = ?1 ORDER BY trial");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int n = 0, cap = 0;
    *out = NULL;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap) *out = xrealloc(*out, (size_t)(cap = cap ? cap * 2 : 8) * sizeof **out);
        trial_row *t = &(*out)[n++];
        t->trial = sqlite3_column_int(st, 0);
        t->params = col_text(st, 1);
        t->run_id = sqlite3_column_int64(st, 2);
        snprintf(t->state, sizeof t->state, "%s", (const char *)sqlite3_column_text(st, 3));
        t->rung = sqlite3_column_int(st, 4);
        t->promoted = sqlite3_column_int(st, 5);
        t->metric = sqlite3_column_type(st, 6) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 6);
        t->metric_epoch = sqlite3_column_type(st, 7) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 7);
        t->reason = col_text(st, 8);
    }
    sqlite3_finalize(st);
    return n;
}

void trial_rows_free(trial_row *t, int n) {
    for (int i = 0; i < n; i++) {
        free(t[i].params);
        free(t[i].reason);
    }
    free(t);
}

int sweep_store_trial_put(int64_t id, const trial_row *t, int64_t now) {
    sqlite3_stmt *st = prep("INSERT OR REPLACE INTO sweep_trials (sweep_id, trial, params, run_id, state, rung, promoted,"
                            " metric, metric_epoch, reason, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, t->trial);
    sqlite3_bind_text(st, 3, t->params, -1, SQLITE_TRANSIENT);
    if (t->run_id > 0) sqlite3_bind_int64(st, 4, t->run_id);
    sqlite3_bind_text(st, 5, t->state, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int(st, 6, t->rung);
    sqlite3_bind_int(st, 7, t->promoted);
    if (!isnan(t->metric)) sqlite3_bind_double(st, 8, t->metric);
    if (t->metric_epoch >= 0) sqlite3_bind_int(st, 9, t->metric_epoch);
    if (t->reason) sqlite3_bind_text(st, 10, t->reason, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 11, now);
    return step_done(st);
}

int sweep_store_decide(int64_t id, int trial, const char *action, const char *detail, int64_t t) {
    sqlite3_stmt *st = prep("INSERT INTO sweep_decisions (sweep_id, n, trial, action, detail, t) VALUES (?1,"
                            " (SELECT count(*) FROM sweep_decisions WHERE sweep_id = ?1), ?2, ?3, ?4, ?5)");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    if (trial >= 0) sqlite3_bind_int(st, 2, trial);
    sqlite3_bind_text(st, 3, action, -1, SQLITE_TRANSIENT);
    if (detail) sqlite3_bind_text(st, 4, detail, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 5, t);
    return step_done(st);
}

int sweep_store_rung_put(int64_t id, int rung, int trial, double metric, int64_t t) {
    sqlite3_stmt *st = prep("INSERT OR IGNORE INTO sweep_rungs (sweep_id, rung, trial, metric, t) VALUES (?1, ?2, ?3, ?4, ?5)");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, rung);
    sqlite3_bind_int(st, 3, trial);
    sqlite3_bind_double(st, 4, metric);
    sqlite3_bind_int64(st, 5, t);
    return step_done(st);
}

int sweep_store_rung(int64_t id, int rung, int **trials, double **metrics) {
    sqlite3_stmt *st = prep("SELECT trial, metric FROM sweep_rungs WHERE sweep_id = ?1 AND rung = ?2 ORDER BY trial");
    *trials = NULL;
    *metrics = NULL;
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, rung);
    int n = 0, cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            *trials = xrealloc(*trials, (size_t)cap * sizeof **trials);
            *metrics = xrealloc(*metrics, (size_t)cap * sizeof **metrics);
        }
        (*trials)[n] = sqlite3_column_int(st, 0);
        (*metrics)[n++] = sqlite3_column_double(st, 1);
    }
    sqlite3_finalize(st);
    return n;
}

int sweep_store_run_state(int64_t run_id, char status[16], char **reason) {
    sqlite3_stmt *st = prep("SELECT status, reason FROM runs WHERE id = ?1");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run_id);
    int found = sqlite3_step(st) == SQLITE_ROW;
    if (found) {
        snprintf(status, 16, "%s", (const char *)sqlite3_column_text(st, 0));
        if (reason) *reason = col_text(st, 1);
    }
    sqlite3_finalize(st);
    return found;
}

int64_t sweep_store_trial_run(int64_t id, int trial) {
    sqlite3_stmt *st = prep("SELECT id FROM runs WHERE sweep_id = ?1 AND trial = ?2 ORDER BY id LIMIT 1");
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, trial);
    int64_t run = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    return run;
}

/* The epoch table's columns, which may be named in SQL as they are. */
static bool epoch_column(const char *key) {
    static const char *const cols[] = {"test_loss", "test_acc", "train_loss", "lr", "seconds", "samples_per_s"};
    for (size_t i = 0; i < sizeof cols / sizeof *cols; i++)
        if (strcmp(key, cols[i]) == 0) return true;
    return false;
}

int sweep_store_run_metric(int64_t run_id, const char *key, double **values) {
    *values = NULL;
    bool col = epoch_column(key);
    char *sql = col ? xasprintf("SELECT epoch, %s FROM epochs WHERE run_id = ?1 ORDER BY epoch", key)
                    : xstrdup("SELECT global_step, value FROM series WHERE run_id = ?1 AND key = ?2 ORDER BY global_step");
    sqlite3_stmt *st = prep(sql);
    free(sql);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, run_id);
    if (!col) sqlite3_bind_text(st, 2, key, -1, SQLITE_TRANSIENT);
    int n = 0, cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int at = col ? sqlite3_column_int(st, 0) : n;
        if (at < 0 || at > 1000000) continue;
        while (at >= cap) {
            int was = cap;
            cap = cap ? cap * 2 : 16;
            *values = xrealloc(*values, (size_t)cap * sizeof **values);
            for (int i = was; i < cap; i++) (*values)[i] = NAN;
        }
        (*values)[at] = sqlite3_column_type(st, 1) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 1);
        if (at + 1 > n) n = at + 1;
    }
    sqlite3_finalize(st);
    return n;
}
