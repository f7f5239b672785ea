/* A series' chart from its rollups, and its points a page at a time: see
 * series_read.h. */
#include "series_read.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "step_rows.h"
#include "rollups.h"
#include "store_read.h"

enum { X_BEGIN, X_COMMIT, X_FIRST_STEPS, X_LAST_STEPS, X_FIRST_POINTS, X_LAST_POINTS, X_KEY, X_RAW_STEPS, X_RAW_POINTS,
       X_ROWS, X_COUNT };

static const char *const XSQL[X_COUNT] = {
    [X_BEGIN] = "BEGIN",
    [X_COMMIT] = "COMMIT",
    [X_FIRST_STEPS] = "SELECT (SELECT " STEP_GS " FROM step_rows WHERE " STEP_AFTER("?1", "?3") " ORDER BY k LIMIT 1)",
    [X_LAST_STEPS] = "SELECT (SELECT " STEP_GS " FROM step_rows WHERE " STEP_AFTER("?1", "?3")
                     " ORDER BY k DESC LIMIT 1)",
    [X_FIRST_POINTS] = "SELECT min(global_step) FROM series_points WHERE run_id = ?1 AND key_id = ?2 AND global_step > ?3",
    [X_LAST_POINTS] = "SELECT max(global_step) FROM series_points WHERE run_id = ?1 AND key_id = ?2 AND global_step > ?3",
    [X_KEY] = "SELECT id FROM series_keys WHERE run_id = ?1 AND key = ?2",
};

const char *series_read_sql(int i) { return i >= 0 && i < X_COUNT ? XSQL[i] : NULL; }

static sqlite3_stmt *xst(int which, int64_t run, int64_t key) {
    const char *sql = which == X_RAW_STEPS ? rollup_sql(RQ_RAW_STEPS)
                      : which == X_RAW_POINTS ? rollup_sql(RQ_RAW_POINTS)
                      : which == X_ROWS       ? rollup_sql(RQ_ROWS)
                                              : XSQL[which];
    sqlite3_stmt *st = store_read_extra(which, sql);
    if (st && which != X_BEGIN && which != X_COMMIT) {
        sqlite3_bind_int64(st, 1, run);
        if (which != X_KEY && sqlite3_bind_parameter_count(st) >= 2) sqlite3_bind_int64(st, 2, key);
    }
    return st;
}

static void push(series_answer *a, rollup_point p) {
    if (a->n && a->points[a->n - 1].step == p.step) return;
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 256;
        a->points = xrealloc(a->points, a->cap * sizeof *a->points);
    }
    a->points[a->n++] = p;
}

void series_answer_free(series_answer *a) {
    free(a->points);
    memset(a, 0, sizeof *a);
}

int64_t store_series_key(int64_t run, const char *name) {
    static const char *const builtin[] = {"loss", "lr", "samples_per_s"};
    for (int i = 0; i < 3; i++)
        if (strcmp(name, builtin[i]) == 0) return -1 - i;
    sqlite3_stmt *st = xst(X_KEY, run, 0);
    if (!st) return NO_INT;
    sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : rc == SQLITE_DONE ? 0 : NO_INT;
    sqlite3_reset(st);
    return id;
}

static int64_t step_bound(int which, int64_t run, int64_t key, int64_t after, bool *ok) {
    sqlite3_stmt *st = xst(which, run, key);
    if (!st) {
        *ok = false;
        return NO_INT;
    }
    sqlite3_bind_int64(st, 3, after);
    int64_t v = NO_INT;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) v = sqlite3_column_int64(st, 0);
    else if (rc != SQLITE_ROW) *ok = false;
    sqlite3_reset(st);
    return v;
}

/* The raw points of steps [lo, hi]: into *agg (when given), and when `out` is given,
 * each one; at most `limit` of them into it (0: all), and then out->next_after is the
 * step of the last one given: the rest come after it. */
static int raw(int64_t run, int64_t key, int64_t lo, int64_t hi, rollup_agg *agg, series_answer *out, int64_t limit) {
    sqlite3_stmt *st = xst(key < 0 ? X_RAW_STEPS : X_RAW_POINTS, run, key);
    if (!st) return -1;
    sqlite3_bind_int64(st, 3, lo);
    sqlite3_bind_int64(st, 4, hi);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        rollup_agg one;
        rollup_agg_init(&one);
        rollup_add_raw(st, key, &one);
        if (!one.n) continue;
        if (out && limit && (int64_t)out->n == limit) {
            out->next_after = out->points[out->n - 1].step;
            break;
        }
        if (out) push(out, one.last);
        if (agg) rollup_agg_merge(agg, &one);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -1;
}

/* The rows of level `level`'s buckets [lo, hi], each merged into *agg (into one), or
 * handed to `each` with its bucket. */
typedef void (*row_fn)(void *ctx, int64_t bucket, const rollup_agg *a);
static int rows(int64_t run, int64_t key, int level, int64_t lo, int64_t hi, row_fn each, void *ctx) {
    sqlite3_stmt *st = xst(X_ROWS, run, key);
    if (!st) return -1;
    sqlite3_bind_int(st, 3, level);
    sqlite3_bind_int64(st, 4, lo);
    sqlite3_bind_int64(st, 5, hi);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        rollup_agg a;
        rollup_agg_from_row(st, &a);
        each(ctx, sqlite3_column_int64(st, 0), &a);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

static void merge_row(void *ctx, int64_t bucket, const rollup_agg *a) {
    (void)bucket;
    rollup_agg_merge(ctx, a);
}

/* The aggregate of steps [lo, hi] (hi <= last, the series' last step) from the fewest
 * rows: the largest complete aligned buckets that fit, the points themselves only
 * within the finest level's buckets at its ends (at most 2 * 64). */
static int range_agg(int64_t run, int64_t key, int64_t lo, int64_t hi, int64_t last, rollup_agg *agg) {
    int64_t x = lo;
    if (x < 0) { /* no step is negative but in a test's hands: read them, the buckets start at 0 */
        if (raw(run, key, x, hi < 0 ? hi : -1, agg, NULL, 0) != 0) return -1;
        x = 0;
    }
    while (x <= hi) {
        int best = -1;
        for (int j = ROLLUP_LEVEL_MAX; j >= ROLLUP_LEVEL_MIN; j--) {
            int64_t w = (int64_t)1 << j;
            if (x >= 0 && (x & (w - 1)) == 0 && x + w - 1 <= hi && x + w - 1 < last) {
                best = j;
                break;
            }
        }
        if (best >= 0) {
            if (rows(run, key, best, x >> best, x >> best, merge_row, agg) != 0) return -1;
            x += (int64_t)1 << best;
        } else {
            int64_t end = x | (((int64_t)1 << ROLLUP_LEVEL_MIN) - 1);
            if (end > hi) end = hi;
            if (raw(run, key, x, end, agg, NULL, 0) != 0) return -1;
            if (end == INT64_MAX) break;
            x = end + 1;
        }
    }
    return 0;
}

static void emit_bucket(series_answer *a, const rollup_agg *g) {
    rollup_point p[2];
    int n = rollup_agg_extremes(g, p);
    for (int i = 0; i < n; i++) push(a, p[i]);
    a->count += g->n;
}

typedef struct {
    series_answer *a;
    int64_t next; /* the next bucket a row may fill */
} body_ctx;

static void body_row(void *ctx, int64_t bucket, const rollup_agg *g) {
    body_ctx *c = ctx;
    emit_bucket(c->a, g);
    c->next = bucket + 1;
}

static int chart(int64_t run, int64_t key, int64_t after, int64_t max_points, series_answer *a) {
    bool ok = true;
    int64_t from = after == NO_INT ? INT64_MIN : after;
    int64_t first = step_bound(key < 0 ? X_FIRST_STEPS : X_FIRST_POINTS, run, key, from, &ok);
    int64_t last = step_bound(key < 0 ? X_LAST_STEPS : X_LAST_POINTS, run, key, from, &ok);
    if (!ok) return -1;
    a->bucket_steps = 1;
    if (first == NO_INT) return 0;
    rollup_agg all;
    rollup_agg_init(&all);
    if (last - first + 1 <= max_points) { /* fits: every point */
        if (raw(run, key, first, last, &all, a, 0) != 0) return -1;
        a->count = all.n;
        return 0;
    }
    int64_t buckets = (max_points - 1) / 2;
    int k = rollup_level_for(first, last, buckets);
    a->bucket_steps = (int64_t)1 << k;
    int64_t b0 = first >> k, b1 = last >> k;
    if (k < ROLLUP_LEVEL_MIN) { /* finer than the rollups: the points (at most 64 a bucket) */
        for (int64_t b = b0; b <= b1; b++) {
            rollup_agg g;
            rollup_agg_init(&g);
            if (raw(run, key, b == b0 ? first : b << k, b == b1 ? last : ((b + 1) << k) - 1, &g, NULL, 0) != 0) return -1;
            emit_bucket(a, &g);
        }
    } else {
        /* the first bucket: part of it may lie at or before `after` */
        int64_t body_from = b0;
        if (b0 == b1 || (after != NO_INT && (b0 << k) <= after)) {
            rollup_agg g;
            rollup_agg_init(&g);
            int64_t hi = b0 == b1 ? last : ((b0 + 1) << k) - 1;
            if (range_agg(run, key, first, hi, last, &g) != 0) return -1;
            emit_bucket(a, &g);
            body_from = b0 + 1;
        }
        /* the complete buckets: one row each */
        if (body_from < b1) {
            body_ctx c = {a, body_from};
            if (rows(run, key, k, body_from, b1 - 1, body_row, &c) != 0) return -1;
        }
        /* the newest bucket: from the finer levels and its newest points */
        if (b1 > b0) {
            rollup_agg g;
            rollup_agg_init(&g);
            if (range_agg(run, key, b1 << k, last, last, &g) != 0) return -1;
            emit_bucket(a, &g);
        }
    }
    /* the series' last point: a live chart's right edge */
    rollup_agg tail;
    rollup_agg_init(&tail);
    if (raw(run, key, last, last, &tail, NULL, 0) != 0) return -1;
    if (tail.n) push(a, tail.last);
    return 0;
}

/* One read transaction around `fn`, so that its reads agree with each other. */
/* One read of a series, in one read transaction: what it reads is of one moment. */
static int in_one_read(int (*read)(int64_t, int64_t, int64_t, int64_t, series_answer *), int64_t run, int64_t key,
                       int64_t after, int64_t n, series_answer *a) {
    sqlite3_stmt *b = xst(X_BEGIN, 0, 0), *c = xst(X_COMMIT, 0, 0);
    if (!b || !c || sqlite3_step(b) != SQLITE_DONE) return -1;
    sqlite3_reset(b);
    int rc = read(run, key, after, n, a);
    sqlite3_step(c);
    sqlite3_reset(c);
    return rc;
}

int store_series_chart(int64_t run, int64_t key, int64_t after, int64_t max_points, series_answer *a) {
    memset(a, 0, sizeof *a);
    a->next_after = NO_INT;
    return in_one_read(chart, run, key, after, max_points < 3 ? 3 : max_points, a);
}

static int page(int64_t run, int64_t key, int64_t after, int64_t limit, series_answer *a) {
    bool ok = true;
    int64_t from = after == NO_INT ? INT64_MIN : after;
    int64_t last = step_bound(key < 0 ? X_LAST_STEPS : X_LAST_POINTS, run, key, from, &ok);
    if (!ok) return -1;
    int64_t first = step_bound(key < 0 ? X_FIRST_STEPS : X_FIRST_POINTS, run, key, from, &ok);
    if (!ok) return -1;
    if (last == NO_INT || first == NO_INT) return 0;
    rollup_agg all;
    rollup_agg_init(&all);
    if (range_agg(run, key, first, last, last, &all) != 0) return -1;
    a->count = all.n;
    return raw(run, key, first, INT64_MAX, NULL, a, limit);
}

int store_series_page(int64_t run, int64_t key, int64_t after, int64_t limit, series_answer *a) {
    memset(a, 0, sizeof *a);
    a->next_after = NO_INT;
    a->bucket_steps = 1;
    return in_one_read(page, run, key, after, limit < 1 ? 1 : limit, a);
}
