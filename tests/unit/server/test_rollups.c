/* Unit tests of server/store/rollups.c on a real SQLite file with the real migrations:
 * after every kind of write the store makes (points in order with gaps, a point
 * written again, one written into a gap, a cut of the tail as a resume makes, the
 * points after it) every complete bucket of every level has the row its points give
 * (checked against the points themselves, for the steps table's three series and a
 * named one), and no row of a bucket that holds none; the series stored before
 * migration 0018 keep their points under key ids and are rolled up by the backfill;
 * every statement of the writer and of the chart reads is a search of an index
 * (EXPLAIN QUERY PLAN: no SCAN), so that a chart reads what it draws. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "migrations.h"
#include "rollups.h"
#include "series_read.h"

static sqlite3 *db;
#define RUN 7

static void exec(const char *sql) {
    char *msg = NULL;
    REQUIRE(sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK, "%s: %s", sql, msg ? msg : "");
}

static double value_at(int64_t s, int which) {
    if (s == 1500 && which == 0) return 80.0;           /* a loss spike */
    if (s == 2222 && which == 0) return NAN;            /* a null loss */
    if (which == 2 && s % 5 == 0) return NAN;           /* no samples_per_s: no point */
    return (1.0 + which) * exp(-(double)s / 3000.0) + 0.001 * (double)((s * 7919 + which) % 17);
}

static void bind_real(sqlite3_stmt *st, int i, double v) {
    if (isnan(v)) sqlite3_bind_null(st, i);
    else sqlite3_bind_double(st, i, v);
}

/* A step of the steps table and a point of the named series, as apply_step writes them. */
static void write_step(int64_t key_id, int64_t s, double bump) {
    static sqlite3_stmt *steps, *point;
    if (!steps) {
        sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO steps (run_id, global_step, loss, lr, samples_per_s, t)"
                               " VALUES (?1, ?2, ?3, ?4, ?5, ?6)", -1, &steps, NULL);
        sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO series_points (run_id, key_id, global_step, value, t)"
                               " VALUES (?1, ?2, ?3, ?4, ?5)", -1, &point, NULL);
    }
    int64_t prev = rollup_prev_step(db, RUN, ROLLUP_STEPS);
    sqlite3_bind_int64(steps, 1, RUN);
    sqlite3_bind_int64(steps, 2, s);
    for (int i = 0; i < 3; i++) bind_real(steps, 3 + i, value_at(s, i) + bump);
    sqlite3_bind_int64(steps, 6, 1000 * s);
    REQUIRE(sqlite3_step(steps) == SQLITE_DONE, "insert a step: %s", sqlite3_errmsg(db));
    sqlite3_reset(steps);
    CHECK(rollup_written(db, RUN, ROLLUP_STEPS, s, prev) == 0, "rolled up step %lld", (long long)s);
    prev = rollup_prev_step(db, RUN, key_id);
    sqlite3_bind_int64(point, 1, RUN);
    sqlite3_bind_int64(point, 2, key_id);
    sqlite3_bind_int64(point, 3, s);
    bind_real(point, 4, s == 3333 ? -40.0 : value_at(s, 1) * 3 + bump);
    sqlite3_bind_int64(point, 5, 1000 * s + 1);
    REQUIRE(sqlite3_step(point) == SQLITE_DONE, "insert a point: %s", sqlite3_errmsg(db));
    sqlite3_reset(point);
    CHECK(rollup_written(db, RUN, key_id, s, prev) == 0, "rolled up point %lld", (long long)s);
}

static bool same_point(rollup_point a, rollup_point b) {
    return a.step == b.step && a.t == b.t && ((isnan(a.value) && isnan(b.value)) || a.value == b.value);
}

/* Every complete bucket of levels 5..14 of series `key` against its points. */
static int verify(int64_t key, const char *when) {
    sqlite3_stmt *mx, *raw, *row;
    sqlite3_prepare_v2(db, rollup_sql(key < 0 ? RQ_MAX_STEPS : RQ_MAX_POINTS), -1, &mx, NULL);
    sqlite3_bind_int64(mx, 1, RUN);
    if (key > 0) sqlite3_bind_int64(mx, 2, key);
    int64_t last = sqlite3_step(mx) == SQLITE_ROW ? sqlite3_column_int64(mx, 0) : -1;
    sqlite3_finalize(mx);
    sqlite3_prepare_v2(db, rollup_sql(key < 0 ? RQ_RAW_STEPS : RQ_RAW_POINTS), -1, &raw, NULL);
    sqlite3_prepare_v2(db, rollup_sql(RQ_ROWS), -1, &row, NULL);
    int bad = 0, checked = 0;
    for (int k = ROLLUP_LEVEL_MIN; k <= 14; k++) {
        for (int64_t b = 0; ((b + 1) << k) - 1 < last; b++) {
            rollup_agg want, got;
            rollup_agg_init(&want);
            rollup_agg_init(&got);
            sqlite3_reset(raw);
            sqlite3_bind_int64(raw, 1, RUN);
            sqlite3_bind_int64(raw, 2, key);
            sqlite3_bind_int64(raw, 3, b << k);
            sqlite3_bind_int64(raw, 4, ((b + 1) << k) - 1);
            while (sqlite3_step(raw) == SQLITE_ROW) rollup_add_raw(raw, key, &want);
            sqlite3_reset(row);
            sqlite3_bind_int64(row, 1, RUN);
            sqlite3_bind_int64(row, 2, key);
            sqlite3_bind_int(row, 3, k);
            sqlite3_bind_int64(row, 4, b);
            sqlite3_bind_int64(row, 5, b);
            int rows = 0;
            while (sqlite3_step(row) == SQLITE_ROW) {
                rollup_agg_from_row(row, &got);
                rows++;
            }
            checked++;
            bool ok = want.n == 0 ? rows == 0
                                  : rows == 1 && got.n == want.n && got.n_num == want.n_num &&
                                        fabs(got.sum - want.sum) <= 1e-9 * (1 + fabs(want.sum)) &&
                                        got.has_min == want.has_min && (!want.has_min || same_point(got.min, want.min)) &&
                                        same_point(got.max, want.max) && same_point(got.last, want.last);
            if (!ok && bad++ < 3)
                fprintf(stderr, "%s: key %lld level %d bucket %lld: %d rows, n %lld (want %lld), max step %lld (want %lld)\n",
                        when, (long long)key, k, (long long)b, rows, (long long)got.n, (long long)want.n,
                        (long long)got.max.step, (long long)want.max.step);
        }
    }
    sqlite3_finalize(raw);
    sqlite3_finalize(row);
    CHECK(bad == 0 && checked > 50, "%s: series %lld: %d of %d complete buckets wrong", when, (long long)key, bad,
          checked);
    return bad;
}

static void verify_all(int64_t key_id, const char *when) {
    for (int64_t k = -1; k >= -3; k--) verify(k, when);
    verify(key_id, when);
}

static int64_t count(const char *sql) {
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return n;
}

int main(void) {
    char path[] = "/tmp/ddpd-test-rollups-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp");
    close(fd);
    char err[512];

    /* a database at 0017 holding series the old way, then 0018 */
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK, "open");
    exec("PRAGMA journal_mode = WAL");
    exec("PRAGMA synchronous = OFF");
    REQUIRE(ddpd_migrations_count >= 18, "migration 0018 is built in");
    REQUIRE(migrate_apply(db, ddpd_migrations, 17, err, sizeof err) == 17, "to 0017: %s", err);
    exec("INSERT INTO runs (id, status, config, world_size, device_kind, created_at) VALUES (7, 'running', '{}', 1, 'cpu', 0)");
    exec("WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 3000)"
         " INSERT INTO steps (run_id, global_step, loss, lr, samples_per_s, t)"
         " SELECT 7, x, 1.0 / x, 0.1, CASE WHEN x % 5 THEN x END, 1000 * x FROM s");
    exec("WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 3000)"
         " INSERT INTO series (run_id, key, global_step, value, t) SELECT 7, k.key, x, x % 101, 1000 * x"
         " FROM s, (SELECT 'accuracy' AS key UNION ALL SELECT 'grad_norm') k");
    REQUIRE(migrate_apply(db, ddpd_migrations, ddpd_migrations_count, err, sizeof err) == ddpd_migrations_count,
            "to the last: %s", err);
    CHECK(count("SELECT count(*) FROM series_keys WHERE run_id = 7") == 2, "one key row per series");
    CHECK(count("SELECT count(*) FROM series_points WHERE run_id = 7") == 6000, "every point kept");
    CHECK(count("SELECT count(*) FROM series WHERE run_id = 7 AND key = 'grad_norm' AND value = 3000 % 101"
                " AND global_step = 3000") == 1, "the series view reads them by name");
    CHECK(count("SELECT count(*) FROM rollup_backfill") == 3, "the steps and two series wait for their rollups");
    CHECK(rollup_backfill(db, err, sizeof err) == 0, "backfill: %s", err);
    CHECK(count("SELECT count(*) FROM rollup_backfill") == 0, "backfill done");
    int64_t acc = count("SELECT id FROM series_keys WHERE run_id = 7 AND key = 'accuracy'");
    verify_all(acc, "backfilled");

    /* a fresh run's series through the writer's calls */
    exec("DELETE FROM runs WHERE id = 7");
    exec("DELETE FROM steps WHERE run_id = 7"); /* as a run's deletion does (run_ops.c) */
    rollup_forget();
    CHECK(count("SELECT count(*) FROM series_points") + count("SELECT count(*) FROM rollups") +
              count("SELECT count(*) FROM series_keys") == 0,
          "a deleted run's series, keys and rollups go with it");
    exec("INSERT INTO runs (id, status, config, world_size, device_kind, created_at) VALUES (7, 'running', '{}', 1, 'cpu', 0)");
    exec("BEGIN");
    int64_t key = rollup_key_id(db, RUN, "val_loss");
    CHECK(key == 1 && rollup_key_id(db, RUN, "val_loss") == 1 && rollup_key_id(db, RUN, "acc") == 2,
          "key ids: 1 for the first, the same again, 2 for the next");
    for (int64_t s = 1; s <= 6000; s++)
        if (s % 1000 < 900 || s % 1000 > 930) write_step(key, s, 0); /* gaps of 31 steps */
    exec("COMMIT");
    verify_all(key, "in order");

    /* written again (a command run's restart over its steps), and into a gap */
    exec("BEGIN");
    for (int64_t s = 1200; s <= 1300; s++) write_step(key, s, 0.5);
    for (int64_t s = 2905; s <= 2925; s += 4) write_step(key, s, -0.25);
    write_step(key, 4000, -3.0);
    exec("COMMIT");
    verify_all(key, "written again");

    /* a resume's cut past step 3500, then the restart's steps */
    exec("DELETE FROM steps WHERE run_id = 7 AND global_step > 3500");
    exec("DELETE FROM series_points WHERE run_id = 7 AND global_step > 3500");
    CHECK(rollup_cut(db, RUN, 3500) == 0, "cut");
    verify_all(key, "cut");
    exec("BEGIN");
    for (int64_t s = 3501; s <= 9000; s++) write_step(key, s, 1.0);
    exec("COMMIT");
    verify_all(key, "after the cut");

    /* a cut that keeps points past it (a restart's own, newer than its start) */
    exec("DELETE FROM steps WHERE run_id = 7 AND global_step > 5000 AND global_step < 8000");
    exec("DELETE FROM series_points WHERE run_id = 7 AND global_step > 5000 AND global_step < 8000");
    CHECK(rollup_cut(db, RUN, 5000) == 0, "cut keeping a tail");
    verify_all(key, "cut keeping a tail");

    /* the plans: every statement seeks (but the backfill's LIMIT 1 of its queue) */
    exec("ANALYZE");
    int plans = 0;
    for (int i = 0; i < RQ_COUNT + 64; i++) {
        const char *sql = i < RQ_COUNT ? rollup_sql(i) : series_read_sql(i - RQ_COUNT);
        if (!sql || i == RQ_BACKFILL_NEXT || strncmp(sql, "BEGIN", 5) == 0 || strncmp(sql, "COMMIT", 6) == 0) {
            if (i >= RQ_COUNT && !sql) break;
            continue;
        }
        char *explain = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", sql);
        sqlite3_stmt *st;
        REQUIRE(sqlite3_prepare_v2(db, explain, -1, &st, NULL) == SQLITE_OK, "%s: %s", explain, sqlite3_errmsg(db));
        char plan[1024] = "";
        bool scan = false;
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *d = (const char *)sqlite3_column_text(st, 3);
            /* (SCAN CONSTANT ROW: a SELECT of a scalar subquery, no table) */
            if (strncmp(d, "SCAN", 4) == 0 && strcmp(d, "SCAN CONSTANT ROW") != 0) scan = true;
            snprintf(plan + strlen(plan), sizeof plan - strlen(plan), "%s; ", d);
        }
        sqlite3_finalize(st);
        sqlite3_free(explain);
        CHECK(!scan && (strstr(plan, "SEARCH") || !strstr(sql, "WHERE")), "\"%s\" scans: %s", sql, plan);
        /* a chart's level: one range of the primary key, every column of it bound */
        if (i == RQ_ROWS)
            CHECK(strstr(plan, "USING PRIMARY KEY (run_id=? AND key_id=? AND level=? AND bucket>? AND bucket<?)"),
                  "a chart's rows are one range of the primary key: %s", plan);
        plans++;
    }
    CHECK(plans >= RQ_COUNT + 4, "%d plans held", plans);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "EXPLAIN QUERY PLAN SELECT * FROM series WHERE run_id = 7 AND key = 'val_loss' ORDER BY global_step",
                       -1, &st, NULL);
    char plan[1024] = "";
    while (sqlite3_step(st) == SQLITE_ROW)
        snprintf(plan + strlen(plan), sizeof plan - strlen(plan), "%s; ", (const char *)sqlite3_column_text(st, 3));
    sqlite3_finalize(st);
    CHECK(!strstr(plan, "SCAN") && !strstr(plan, "TEMP B-TREE"), "a series by its name through the view: %s", plan);

    rollup_detach();
    sqlite3_close(db);
    unlink(path);
    char side[sizeof path + 8]; /* its WAL and shared memory, which a close with a statement left keeps */
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    return test_done("test_rollups");
}
