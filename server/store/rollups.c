/* A series' keys and rollups, kept as its points are written: see rollups.h. */
#include "rollups.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "step_rows.h"
#include "kind_fields.h"
#include "op_types.h"
#include "write_fault.h"

#define AGG_COLUMNS                                                                               \
    "n, n_num, sum_value, min_step, min_value, min_t, max_step, max_value, max_t, last_step, last_value," \
    " last_t"

static const char *const RQ_SQL[RQ_COUNT] = {
    [RQ_MAX_STEPS] = "SELECT (SELECT " STEP_GS " FROM step_rows WHERE " STEP_OF_RUN("?1") " ORDER BY k DESC LIMIT 1)",
    [RQ_MAX_POINTS] = "SELECT max(global_step) FROM series_points WHERE run_id = ?1 AND key_id = ?2",
    [RQ_RAW_STEPS] = "SELECT " STEP_GS ", loss, lr, samples_per_s, " STEP_T("?1") " FROM step_rows WHERE "
                     STEP_FROM_TO("?1", "?3", "?4") " ORDER BY k",
    [RQ_RAW_POINTS] = "SELECT global_step, value, t FROM series_points WHERE run_id = ?1 AND key_id = ?2"
                      " AND global_step >= ?3 AND global_step <= ?4 ORDER BY global_step",
    /* the steps stored from the bucket's start and the times back from the last point's
     * (small numbers: SQLite stores them in a byte or two); read back whole */
    [RQ_ROWS] = "SELECT bucket, n, n_num, sum_value, (bucket << level) + min_step, min_value, last_t - min_t,"
                " (bucket << level) + max_step, max_value, last_t - max_t, (bucket << level) + last_step, last_value,"
                " last_t FROM rollups WHERE run_id = ?1 AND key_id = ?2 AND level = ?3"
                " AND bucket >= ?4 AND bucket <= ?5 ORDER BY bucket",
    [RQ_PUT] = "INSERT OR REPLACE INTO rollups (run_id, key_id, level, bucket, " AGG_COLUMNS ")"
               " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    [RQ_DEL] = "DELETE FROM rollups WHERE run_id = ?1 AND key_id = ?2 AND level = ?3 AND bucket >= ?4 AND bucket <= ?5",
    [RQ_KEY_GET] = "SELECT id FROM series_keys WHERE run_id = ?1 AND key = ?2",
    [RQ_KEY_NEW] = "INSERT INTO series_keys (run_id, key, id)"
                   " VALUES (?1, ?2, (SELECT coalesce(max(id), 0) + 1 FROM series_keys WHERE run_id = ?1))",
    [RQ_KEYS_OF_RUN] = "SELECT id FROM series_keys WHERE run_id = ?1",
    [RQ_STEPS_AFTER] = "SELECT " STEP_GS " FROM step_rows WHERE " STEP_AFTER("?1", "?3") " ORDER BY k",
    [RQ_POINTS_AFTER] = "SELECT global_step FROM series_points WHERE run_id = ?1 AND key_id = ?2 AND global_step > ?3"
                        " ORDER BY global_step",
    [RQ_PREV_STEPS] = "SELECT (SELECT " STEP_GS " FROM step_rows WHERE " STEP_UP_TO("?1", "?3") " ORDER BY k DESC LIMIT 1)",
    [RQ_PREV_POINTS] = "SELECT max(global_step) FROM series_points WHERE run_id = ?1 AND key_id = ?2"
                       " AND global_step <= ?3",
    [RQ_BACKFILL_NEXT] = "SELECT run_id, key_id FROM rollup_backfill LIMIT 1",
    [RQ_BACKFILL_DONE] = "DELETE FROM rollup_backfill WHERE run_id = ?1 AND key_id = ?2",
};

const char *rollup_sql(int which) { return RQ_SQL[which]; }

/* The highest step of the series written lately, so that a point's write needs no
 * seek for it: a small table by (run, key), dropped on a rollback (rollup_forget) and
 * a series' entry on a cut. */
#define PREV_SLOTS 256
typedef struct {
    int64_t run, key, step; /* run 0: empty */
} prev_slot;

static struct {
    sqlite3 *db;
    sqlite3_stmt *st[RQ_COUNT];
    prev_slot prev[PREV_SLOTS];
} W;

static prev_slot *prev_slot_of(int64_t run, int64_t key) {
    uint64_t h = ((uint64_t)run * 0x9E3779B97F4A7C15u) ^ ((uint64_t)key * 0xC2B2AE3D27D4EB4Fu);
    return &W.prev[(h >> 32) % PREV_SLOTS];
}

void rollup_forget(void) { memset(W.prev, 0, sizeof W.prev); }

static void forget_run(int64_t run) {
    for (int i = 0; i < PREV_SLOTS; i++)
        if (W.prev[i].run == run) W.prev[i].run = 0;
}

void rollup_detach(void) {
    rollup_forget();
    for (int i = 0; i < RQ_COUNT; i++) {
        sqlite3_finalize(W.st[i]);
        W.st[i] = NULL;
    }
    W.db = NULL;
}

int rollup_attach(sqlite3 *db, char *err, size_t errlen) {
    rollup_detach();
    for (int i = 0; i < RQ_COUNT; i++) {
        if (sqlite3_prepare_v3(db, RQ_SQL[i], -1, SQLITE_PREPARE_PERSISTENT, &W.st[i], NULL) != SQLITE_OK) {
            snprintf(err, errlen, "preparing \"%s\": %s", RQ_SQL[i], sqlite3_errmsg(db));
            rollup_detach();
            return -1;
        }
    }
    W.db = db;
    return 0;
}

/* Statement `which` on the writer's db, reset, ?1 bound to the run and ?2 to the key. */
static sqlite3_stmt *wst(sqlite3 *db, int which, int64_t run, int64_t key) {
    if (db != W.db) {
        char err[256];
        if (rollup_attach(db, err, sizeof err) != 0) {
            log_error("%s", err);
            return NULL;
        }
    }
    sqlite3_stmt *st = W.st[which];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, key);
    return st;
}

static double col_real(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}

void rollup_agg_from_row(sqlite3_stmt *st, rollup_agg *a) {
    rollup_agg_init(a);
    a->n = sqlite3_column_int64(st, 1);
    a->n_num = sqlite3_column_int64(st, 2);
    a->sum = sqlite3_column_double(st, 3);
    a->has_min = sqlite3_column_type(st, 4) != SQLITE_NULL;
    if (a->has_min) a->min = (rollup_point){sqlite3_column_int64(st, 4), col_real(st, 5), sqlite3_column_int64(st, 6)};
    a->max = (rollup_point){sqlite3_column_int64(st, 7), col_real(st, 8), sqlite3_column_int64(st, 9)};
    a->last = (rollup_point){sqlite3_column_int64(st, 10), col_real(st, 11), sqlite3_column_int64(st, 12)};
}

void rollup_add_raw(sqlite3_stmt *st, int64_t key, rollup_agg *a) {
    int ncol = sqlite3_column_count(st);
    int vcol = key < 0 ? (int)(-key) : 1;
    if (key == -3 && sqlite3_column_type(st, vcol) == SQLITE_NULL) return; /* no throughput: no point */
    rollup_agg_add(a, sqlite3_column_int64(st, 0), col_real(st, vcol), sqlite3_column_int64(st, ncol - 1));
}

int64_t rollup_key_id(sqlite3 *db, int64_t run, const char *key) {
    for (int tries = 0; tries < 2; tries++) {
        sqlite3_stmt *st = wst(db, RQ_KEY_GET, run, 0);
        if (!st) return -1;
        sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
        sqlite3_reset(st);
        if (rc == SQLITE_ROW) return id;
        if (rc != SQLITE_DONE || tries) return -1;
        st = wst(db, RQ_KEY_NEW, run, 0);
        sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
        if (write_fault_step(db, st) < 0) return -1;
    }
    return -1;
}

static int64_t one_int(sqlite3_stmt *st) {
    int64_t v = NO_INT;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) v = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return v;
}

int64_t rollup_prev_step(sqlite3 *db, int64_t run, int64_t key) {
    prev_slot *p = prev_slot_of(run, key);
    if (db == W.db && p->run == run && p->key == key) return p->step;
    sqlite3_stmt *st = wst(db, key < 0 ? RQ_MAX_STEPS : RQ_MAX_POINTS, run, key);
    return st ? one_int(st) : NO_INT;
}

/* The row of (key, level, bucket): written when it holds a point, else removed. */
static int put(sqlite3 *db, int64_t run, int64_t key, int level, int64_t bucket, const rollup_agg *a) {
    sqlite3_stmt *st = wst(db, a->n ? RQ_PUT : RQ_DEL, run, key);
    if (!st) return -1;
    sqlite3_bind_int(st, 3, level);
    sqlite3_bind_int64(st, 4, bucket);
    if (!a->n) {
        sqlite3_bind_int64(st, 5, bucket);
        return write_fault_step(db, st) < 0 ? -1 : 0;
    }
    int64_t start = bucket << level, t = a->last.t; /* RQ_ROWS says why */
    sqlite3_bind_int64(st, 5, a->n);
    sqlite3_bind_int64(st, 6, a->n_num);
    sqlite3_bind_double(st, 7, a->sum);
    if (a->has_min) {
        sqlite3_bind_int64(st, 8, a->min.step - start);
        bind_real_or_null(st, 9, a->min.value);
        sqlite3_bind_int64(st, 10, t - a->min.t);
    }
    sqlite3_bind_int64(st, 11, a->max.step - start);
    bind_real_or_null(st, 12, a->max.value);
    sqlite3_bind_int64(st, 13, t - a->max.t);
    sqlite3_bind_int64(st, 14, a->last.step - start);
    bind_real_or_null(st, 15, a->last.value);
    sqlite3_bind_int64(st, 16, t);
    return write_fault_step(db, st) < 0 ? -1 : 0;
}

/* Rolls up bucket `bucket` of `level` for the series (the steps group: its three
 * keys at once): from the points at the finest level, else from the two buckets of
 * the level below (complete, so rolled up already). */
static int roll(sqlite3 *db, int64_t run, int64_t key, int level, int64_t bucket) {
    int nk = key < 0 ? ROLLUP_STEP_KEYS : 1;
    rollup_agg a[ROLLUP_STEP_KEYS];
    for (int i = 0; i < nk; i++) rollup_agg_init(&a[i]);
    if (level == ROLLUP_LEVEL_MIN) {
        sqlite3_stmt *st = wst(db, key < 0 ? RQ_RAW_STEPS : RQ_RAW_POINTS, run, key);
        if (!st) return -1;
        sqlite3_bind_int64(st, 3, bucket << level);
        sqlite3_bind_int64(st, 4, ((bucket + 1) << level) - 1);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            for (int i = 0; i < nk; i++) rollup_add_raw(st, key < 0 ? -1 - i : key, &a[i]);
        sqlite3_reset(st);
        if (rc != SQLITE_DONE) return -1;
    } else {
        for (int i = 0; i < nk; i++) {
            sqlite3_stmt *st = wst(db, RQ_ROWS, run, key < 0 ? -1 - i : key);
            if (!st) return -1;
            sqlite3_bind_int(st, 3, level - 1);
            sqlite3_bind_int64(st, 4, bucket * 2);
            sqlite3_bind_int64(st, 5, bucket * 2 + 1);
            int rc;
            while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                rollup_agg child;
                rollup_agg_from_row(st, &child);
                rollup_agg_merge(&a[i], &child);
            }
            sqlite3_reset(st);
            if (rc != SQLITE_DONE) return -1;
        }
    }
    for (int i = 0; i < nk; i++)
        if (put(db, run, key < 0 ? -1 - i : key, level, bucket, &a[i]) != 0) return -1;
    return 0;
}

int rollup_written(sqlite3 *db, int64_t run, int64_t key, int64_t step, int64_t prev) {
    if (db == W.db && run != 0) *prev_slot_of(run, key) = (prev_slot){run, key, prev == NO_INT || step > prev ? step : prev};
    if (prev == NO_INT || step < 0) return 0;
    for (int k = ROLLUP_LEVEL_MIN; k <= ROLLUP_LEVEL_MAX; k++) {
        if (step > prev) {
            /* past the highest step: the buckets that held it are complete */
            if ((prev >> k) == (step >> k)) break;
            if (roll(db, run, key, k, prev >> k) != 0) return -1;
        } else {
            /* written again, or in a gap: the complete buckets that hold it change */
            int64_t end = (((step >> k) + 1) << k) - 1;
            if (end >= prev) break;
            if (roll(db, run, key, k, step >> k) != 0) return -1;
        }
    }
    return 0;
}

/* One series past `step`: its rows of buckets that reach past it go, and its points
 * still past it (a restart's, kept by a cut) are rolled up again. */
static int cut_series(sqlite3 *db, int64_t run, int64_t key, int64_t step) {
    int nk = key < 0 ? ROLLUP_STEP_KEYS : 1;
    for (int i = 0; i < nk; i++) {
        for (int k = ROLLUP_LEVEL_MIN; k <= ROLLUP_LEVEL_MAX; k++) {
            sqlite3_stmt *st = wst(db, RQ_DEL, run, key < 0 ? -1 - i : key);
            if (!st) return -1;
            sqlite3_bind_int(st, 3, k);
            sqlite3_bind_int64(st, 4, step < 0 ? INT64_MIN : step >> k);
            sqlite3_bind_int64(st, 5, INT64_MAX);
            if (write_fault_step(db, st) < 0) return -1;
        }
    }
    sqlite3_stmt *st = wst(db, key < 0 ? RQ_PREV_STEPS : RQ_PREV_POINTS, run, key);
    if (!st) return -1;
    sqlite3_bind_int64(st, 3, step);
    int64_t prev = one_int(st);
    /* the steps past it, collected first: rolling up reads the same table */
    st = wst(db, key < 0 ? RQ_STEPS_AFTER : RQ_POINTS_AFTER, run, key);
    if (!st) return -1;
    sqlite3_bind_int64(st, 3, step);
    int64_t *after = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            after = xrealloc(after, cap * sizeof *after);
        }
        after[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_reset(st);
    int out = rc == SQLITE_DONE ? 0 : -1;
    for (size_t i = 0; out == 0 && i < n; i++) {
        out = rollup_written(db, run, key, after[i], prev);
        prev = after[i];
    }
    free(after);
    return out;
}

int rollup_cut(sqlite3 *db, int64_t run, int64_t step) {
    forget_run(run);
    if (cut_series(db, run, ROLLUP_STEPS, step) != 0) return -1;
    sqlite3_stmt *st = wst(db, RQ_KEYS_OF_RUN, run, 0);
    if (!st) return -1;
    int64_t *keys = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            keys = xrealloc(keys, cap * sizeof *keys);
        }
        keys[n++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_reset(st);
    int out = rc == SQLITE_DONE ? 0 : -1;
    for (size_t i = 0; out == 0 && i < n; i++) out = cut_series(db, run, keys[i], step);
    free(keys);
    return out;
}

int rollup_backfill(sqlite3 *db, char *err, size_t errlen) {
    int64_t series = 0;
    for (;;) {
        sqlite3_stmt *st = wst(db, RQ_BACKFILL_NEXT, 0, 0);
        if (!st) break;
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            sqlite3_reset(st);
            if (series) log_info("rolled up the %lld series stored before this version", (long long)series);
            return 0;
        }
        if (rc != SQLITE_ROW) break;
        int64_t run = sqlite3_column_int64(st, 0), key = sqlite3_column_int64(st, 1);
        sqlite3_reset(st);
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) break;
        /* every point from the first, as though written now */
        int ok = cut_series(db, run, key, INT64_MIN) == 0;
        st = wst(db, RQ_BACKFILL_DONE, run, key);
        ok = ok && st && sqlite3_step(st) == SQLITE_DONE;
        if (st) sqlite3_reset(st);
        if (!ok || sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            break;
        }
        series++;
    }
    snprintf(err, errlen, "rolling up the series stored before this version failed: %s", sqlite3_errmsg(db));
    return -1;
}
