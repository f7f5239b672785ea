/* The sweeps' tables: see sweep_store.h. Reads on a connection of this file's own;
 * writes go to the store's writer (OP_SWEEP_WRITE), the database's one writer, as
 * statements with their values in them, a transaction's together in one op. */
#include "sweep_store.h"

#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "event_kinds.h"
#include "store.h"

static sqlite3 *DB;
static pthread_mutex_t MU = PTHREAD_MUTEX_INITIALIZER;
static buf_t TX;       /* the statements of the transaction begun, until its commit */
static bool IN_TX;

int sweep_store_open(const char *db_path, char *err, size_t errlen) {
    if (sqlite3_open_v2(db_path, &DB, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
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

/* Writes `sql` (taken: sqlite3_mprintf's) now, waiting for its commit, or with the
 * transaction begun. The op's result (a rowid, or 1), or -1. */
static int64_t write_sql(char *sql) {
    if (!sql) return -1;
    if (IN_TX) {
        buf_printf(&TX, "%s;\n", sql);
        sqlite3_free(sql);
        return 1;
    }
    store_op op = {.kind = OP_SWEEP_WRITE, .t = now_ms()};
    op.u.exec.sql = xstrdup(sql);
    sqlite3_free(sql);
    return store_submit_wait(&op);
}

int sweep_store_begin(void) {
    IN_TX = true;
    TX.len = 0;
    if (TX.data) TX.data[0] = 0;
    return 0;
}

int sweep_store_commit(void) {
    IN_TX = false;
    if (!TX.len) return 0;
    store_op op = {.kind = OP_SWEEP_WRITE, .t = now_ms()};
    op.u.exec.sql = xstrdup(TX.data);
    TX.len = 0;
    return store_submit_wait(&op) < 0 ? -1 : 0;
}

static sqlite3_stmt *prep(const char *sql) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(DB, sql, -1, &st, NULL) != SQLITE_OK) log_warn("sweeps: %s: %s", sql, sqlite3_errmsg(DB));
    return st;
}

static char *col_text(sqlite3_stmt *st, int c) {
    const unsigned char *t = sqlite3_column_text(st, c);
    return t ? xstrdup((const char *)t) : NULL;
}

int64_t sweep_store_insert(const char *name, const char *owner, const char *spec, int n_trials, int64_t t) {
    return write_sql(sqlite3_mprintf("INSERT INTO sweeps (name, owner, spec, status, n_trials, created_at) VALUES (%Q,"
                                     " %Q, %Q, 'running', %d, %lld)", name, owner, spec, n_trials, (long long)t));
}

/* paused: a running sweep whose newest pause or resume (its own decisions) is a pause */
#define SWEEP_COLS                                                                                          \
    "id, name, owner, spec, status, reason, n_trials, best_trial, created_at, finished_at,"                 \
    " coalesce((SELECT action FROM sweep_decisions d WHERE d.sweep_id = sweeps.id AND d.trial IS NULL"      \
    " AND d.action IN ('paused', 'resumed') ORDER BY n DESC LIMIT 1) = 'paused', 0)"

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
    r->paused = sqlite3_column_int(st, 10) != 0 && strcmp(r->status, "running") == 0;
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
    return write_sql(sqlite3_mprintf("UPDATE sweeps SET status = %Q, reason = %Q, finished_at = %lld WHERE id = %lld AND"
                                     " status = 'running'", status, reason, (long long)t, (long long)id)) < 0 ? -1 : 0;
}

int sweep_store_set_best(int64_t id, int trial) {
    char best[16] = "NULL";
    if (trial >= 0) snprintf(best, sizeof best, "%d", trial);
    return write_sql(sqlite3_mprintf("UPDATE sweeps SET best_trial = %s WHERE id = %lld", best, (long long)id)) < 0 ? -1 : 0;
}

int sweep_store_trials(int64_t id, trial_row **out) {
    sqlite3_stmt *st = prep("SELECT trial, params, run_id, state, rung, promoted, metric, metric_epoch, reason,"
                            " (SELECT status FROM runs WHERE id = sweep_trials.run_id),"
                            " coalesce((SELECT max(at) FROM run_resumes WHERE run_id = sweep_trials.run_id), 0) > updated_at"
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
        const unsigned char *rs = sqlite3_column_text(st, 9);
        snprintf(t->run_status, sizeof t->run_status, "%s", rs ? (const char *)rs : "");
        t->resumed_since = sqlite3_column_int(st, 10) != 0;
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

/* A number as SQL: NULL when NaN. */
static void real_sql(double v, char *out, size_t n) {
    if (isnan(v)) snprintf(out, n, "NULL");
    else snprintf(out, n, "%.17g", v);
}

int sweep_store_trial_put(int64_t id, const trial_row *t, int64_t now) {
    char run[24] = "NULL", metric[40], epoch[16] = "NULL";
    if (t->run_id > 0) snprintf(run, sizeof run, "%lld", (long long)t->run_id);
    real_sql(t->metric, metric, sizeof metric);
    if (t->metric_epoch >= 0) snprintf(epoch, sizeof epoch, "%d", t->metric_epoch);
    return write_sql(sqlite3_mprintf("INSERT OR REPLACE INTO sweep_trials (sweep_id, trial, params, run_id, state, rung,"
                                     " promoted, metric, metric_epoch, reason, updated_at) VALUES (%lld, %d, %Q, %s, %Q,"
                                     " %d, %d, %s, %s, %Q, %lld)", (long long)id, t->trial, t->params, run, t->state,
                                     t->rung, t->promoted, metric, epoch, t->reason, (long long)now)) < 0 ? -1 : 0;
}

int sweep_store_decide(int64_t id, int trial, const char *action, const char *detail, int64_t t) {
    char tr[16] = "NULL";
    if (trial >= 0) snprintf(tr, sizeof tr, "%d", trial);
    return write_sql(sqlite3_mprintf("INSERT INTO sweep_decisions (sweep_id, n, trial, action, detail, t) VALUES (%lld,"
                                     " (SELECT count(*) FROM sweep_decisions WHERE sweep_id = %lld), %s, %Q, %Q, %lld)",
                                     (long long)id, (long long)id, tr, action, detail, (long long)t)) < 0 ? -1 : 0;
}

int sweep_store_rung_put(int64_t id, int rung, int trial, double metric, int64_t t) {
    char m[40];
    real_sql(metric, m, sizeof m);
    return write_sql(sqlite3_mprintf("INSERT OR IGNORE INTO sweep_rungs (sweep_id, rung, trial, metric, t) VALUES (%lld,"
                                     " %d, %d, %s, %lld)", (long long)id, rung, trial, m, (long long)t)) < 0 ? -1 : 0;
}

int sweep_store_rung(int64_t id, int rung, sweep_mark **out) {
    sqlite3_stmt *st = prep("SELECT trial, metric FROM sweep_rungs WHERE sweep_id = ?1 AND rung = ?2 ORDER BY trial");
    *out = NULL;
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, rung);
    int n = 0, cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap) *out = xrealloc(*out, (size_t)(cap = cap ? cap * 2 : 16) * sizeof **out);
        (*out)[n++] = (sweep_mark){.trial = sqlite3_column_int(st, 0), .metric = sqlite3_column_double(st, 1)};
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

/* values[at] from each row (at: column 0, or the row's number), NaN where missing: n. */
static int read_metric(sqlite3_stmt *st, bool by_row, double **values) {
    int n = 0, cap = 0, row = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        int at = by_row ? row++ : sqlite3_column_int(st, 0);
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
    return n;
}

int sweep_store_run_metric(int64_t run_id, const char *key, double **values) {
    *values = NULL;
    bool col = epoch_column(key);
    /* a column of the epoch table; else the per-epoch series (EPOCH_SERIES_PREFIX KEY,
     * its step the epoch); else a step series, its points taken as epochs in order */
    char *sql = col ? xasprintf("SELECT epoch, %s FROM epochs WHERE run_id = ?1 ORDER BY epoch", key)
                    : xstrdup("SELECT global_step, value FROM series WHERE run_id = ?1 AND key = ?2 ORDER BY global_step");
    sqlite3_stmt *st = prep(sql);
    free(sql);
    if (!st) return -1;
    int n = 0;
    for (int pass = col ? 1 : 0; pass < 2 && n == 0; pass++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, run_id);
        char *name = !col && pass == 0 ? xasprintf(EPOCH_SERIES_PREFIX "%s", key) : NULL;
        if (!col) sqlite3_bind_text(st, 2, name ? name : key, -1, SQLITE_TRANSIENT);
        n = read_metric(st, !col && pass == 1, values);
        free(name);
    }
    sqlite3_finalize(st);
    return n;
}

char *sweep_store_run_metric_names(int64_t run_id) {
    buf_t b = {0};
    buf_printf(&b, "%s", "");
    sqlite3_stmt *st = prep("SELECT count(test_loss), count(test_acc), count(train_loss), count(lr), count(seconds),"
                            " count(samples_per_s) FROM epochs WHERE run_id = ?1");
    static const char *const cols[] = {"test_loss", "test_acc", "train_loss", "lr", "seconds", "samples_per_s"};
    if (st) {
        sqlite3_bind_int64(st, 1, run_id);
        if (sqlite3_step(st) == SQLITE_ROW)
            for (int i = 0; i < 6; i++)
                if (sqlite3_column_int64(st, i) > 0) buf_printf(&b, "%s%s", b.len ? ", " : "", cols[i]);
        sqlite3_finalize(st);
    }
    st = prep("SELECT DISTINCT key FROM series WHERE run_id = ?1 ORDER BY key LIMIT 50");
    if (st) {
        sqlite3_bind_int64(st, 1, run_id);
        size_t plen = strlen(EPOCH_SERIES_PREFIX);
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *k = (const char *)sqlite3_column_text(st, 0);
            if (!k) continue;
            if (strncmp(k, EPOCH_SERIES_PREFIX, plen) == 0) buf_printf(&b, "%s%s", b.len ? ", " : "", k + plen);
            else buf_printf(&b, "%s%s (per step)", b.len ? ", " : "", k);
        }
        sqlite3_finalize(st);
    }
    return b.data ? b.data : xstrdup("");
}

int sweep_store_grow(int64_t id, int n_trials, const char *spec, bool reopen) {
    return write_sql(sqlite3_mprintf("UPDATE sweeps SET n_trials = %d, spec = %Q%s WHERE id = %lld", n_trials, spec,
                                     reopen ? ", status = 'running', reason = NULL, finished_at = NULL" : "",
                                     (long long)id)) < 0 ? -1 : 0;
}

/* Through the live sweep runs' own index (migration 0023), named: without statistics,
 * SQLite would take runs_by_status and seek every queued run's row on every pass. */
const char SWEEP_REVIVED_SQL[] =
    "SELECT DISTINCT r.sweep_id FROM runs r INDEXED BY runs_live_sweep JOIN sweeps s ON s.id = r.sweep_id"
    " JOIN sweep_trials t ON t.sweep_id = r.sweep_id AND t.trial = r.trial AND t.run_id = r.id"
    " WHERE r.status IN ('queued', 'starting', 'running') AND r.sweep_id IS NOT NULL"
    " AND s.status IN ('succeeded', 'failed')"
    " AND t.state IN ('succeeded', 'failed', 'canceled', 'stopped')"
    " AND (SELECT max(at) FROM run_resumes rr WHERE rr.run_id = r.id) > t.updated_at"
    " ORDER BY r.sweep_id";

int sweep_store_revived(int64_t **ids) {
    *ids = NULL;
    sqlite3_stmt *st = prep(SWEEP_REVIVED_SQL);
    if (!st) return -1;
    int n = 0, cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (n == cap) *ids = xrealloc(*ids, (size_t)(cap = cap ? cap * 2 : 4) * sizeof **ids);
        (*ids)[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return n;
}

bool sweep_store_trial_by_hand(int64_t id, int trial) {
    sqlite3_stmt *st = prep("SELECT 1 FROM sweep_decisions WHERE sweep_id = ?1 AND trial = ?2"
                            " AND action = 'resumed by hand' LIMIT 1");
    if (!st) return false;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int(st, 2, trial);
    bool found = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return found;
}

char *sweep_store_sweep_detail(int64_t id, const char *action) {
    sqlite3_stmt *st = prep("SELECT detail FROM sweep_decisions WHERE sweep_id = ?1 AND trial IS NULL AND action = ?2"
                            " ORDER BY n DESC LIMIT 1");
    if (!st) return NULL;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, action, -1, SQLITE_STATIC);
    char *detail = sqlite3_step(st) == SQLITE_ROW ? col_text(st, 0) : NULL;
    sqlite3_finalize(st);
    return detail;
}

bool sweep_store_run_stoppable(int64_t run_id) {
    sqlite3_stmt *st = prep("SELECT kind = 'command' OR EXISTS (SELECT 1 FROM checkpoints WHERE run_id = ?1)"
                            " FROM runs WHERE id = ?1");
    if (!st) return false;
    sqlite3_bind_int64(st, 1, run_id);
    bool yes = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) != 0;
    sqlite3_finalize(st);
    return yes;
}
