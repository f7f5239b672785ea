/* Unit tests of migration 0021 (a run's steps in step_rows under one integer key:
 * step_rows.h) on a real SQLite file with the real migrations: a database of the
 * schema before it keeps every step, each column as it was in value and type (read
 * through the steps view), edge cases too (step 0 and the highest, a step without
 * step, epoch or values, a time before the run's creation, a step above its global
 * step, a run without a row); the writer's own statements store, cut, resume from and
 * delete steps as before; a typical step costs at most 40 bytes written in key order
 * (the table WITHOUT ROWID took about 50); and every statement of the server on
 * step_rows is one range (or one key) of the rowid, read in key order (EXPLAIN QUERY
 * PLAN: no SCAN of it, no sort). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "event_kinds.h"
#include "migrations.h"
#include "rollups.h"
#include "run_ops.h"
#include "series_read.h"
#include "store_read.h"

static sqlite3 *db;

#define CREATED INT64_C(1765000000000)
#define MAX_ROWS 4096

static void exec(const char *sql) {
    char *msg = NULL;
    REQUIRE(sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK, "%s: %s", sql, msg ? msg : "");
}

static int64_t count(const char *sql) {
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
    int64_t v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
}

/* every step as the steps table (or view) gives it: each column's type and value */
typedef struct {
    int type[8];
    int64_t i[8];
    double d[8];
} step_row;

static int read_steps(step_row *rows) {
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(db,
                               "SELECT run_id, global_step, epoch, step, loss, lr, samples_per_s, t FROM steps"
                               " ORDER BY run_id, global_step",
                               -1, &st, NULL) == SQLITE_OK,
            "read the steps: %s", sqlite3_errmsg(db));
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW && n < MAX_ROWS) {
        memset(&rows[n], 0, sizeof rows[n]);
        for (int c = 0; c < 8; c++) {
            rows[n].type[c] = sqlite3_column_type(st, c);
            if (rows[n].type[c] == SQLITE_INTEGER) rows[n].i[c] = sqlite3_column_int64(st, c);
            if (rows[n].type[c] == SQLITE_FLOAT) rows[n].d[c] = sqlite3_column_double(st, c);
        }
        n++;
    }
    sqlite3_finalize(st);
    return n;
}

static void bind_step(sqlite3_stmt *st, int64_t run, int64_t gs, int64_t epoch, int64_t step, double loss, int64_t t) {
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, gs);
    sqlite3_bind_int64(st, 3, epoch);
    sqlite3_bind_int64(st, 4, step);
    sqlite3_bind_double(st, 5, loss);
    sqlite3_bind_double(st, 6, 0.001);
    sqlite3_bind_double(st, 7, 50000.0 + (double)(gs % 100));
    sqlite3_bind_int64(st, 8, t);
}

/* The plan of `sql` when it names step_rows: each of its lines on step_rows a search of
 * one rowid or of a range bounded on both sides, none a sort. 1 when checked, 0 when it does not name step_rows. */
static int plan_held(const char *sql) {
    if (!sql || !strstr(sql, "step_rows")) return 0;
    char *explain = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", sql);
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(db, explain, -1, &st, NULL) == SQLITE_OK, "%s: %s", explain, sqlite3_errmsg(db));
    char plan[2048] = "";
    bool ok = true;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *d = (const char *)sqlite3_column_text(st, 3);
        /* one key, or a range bounded on both sides (within the run) */
        if (strstr(d, "step_rows") && !strstr(d, "SEARCH step_rows USING INTEGER PRIMARY KEY (rowid=?)") &&
            !strstr(d, "SEARCH step_rows USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"))
            ok = false;
        if (strstr(d, "TEMP B-TREE")) ok = false;
        snprintf(plan + strlen(plan), sizeof plan - strlen(plan), "%s; ", d);
    }
    sqlite3_finalize(st);
    sqlite3_free(explain);
    CHECK(ok, "\"%s\" is not one range of the key in its order: %s", sql, plan);
    return 1;
}

int main(void) {
    char path[] = "/tmp/ddpd-test-step-rows-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp");
    close(fd);
    char err[512];
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK, "open");
    exec("PRAGMA journal_mode = WAL");
    exec("PRAGMA synchronous = OFF");
    int at = -1;
    for (int i = 0; i < ddpd_migrations_count; i++)
        if (strstr(ddpd_migrations[i].name, "_step_rows.sql")) at = i;
    REQUIRE(at > 0, "migration 0021 is built in");

    /* a database of the schema before it: run 7's 2000 steps over 4 epochs, every
     * fifth without a throughput, then its odd ones; run 8's lowest and highest step;
     * run 9's, of a run without a row */
    REQUIRE(migrate_apply(db, ddpd_migrations, at, err, sizeof err) == at, "to the one before: %s", err);
    exec("INSERT INTO runs (id, status, config, world_size, device_kind, created_at) VALUES"
         " (7, 'running', '{}', 1, 'cpu', 1765000000000), (8, 'running', '{}', 1, 'cpu', 5)");
    exec("WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 2000)"
         " INSERT INTO steps (run_id, global_step, epoch, step, loss, lr, samples_per_s, t)"
         " SELECT 7, x, (x - 1) / 500, (x - 1) % 500, 1.0 / x + 0.001 * (x % 7), 0.001,"
         " CASE WHEN x % 5 THEN 50000 + x % 100 END, 1765000000000 + 100 * x FROM s");
    exec("INSERT INTO steps (run_id, global_step, epoch, step, loss, lr, samples_per_s, t) VALUES"
         " (7, 2001, NULL, NULL, NULL, NULL, NULL, 1765000000000 - 50),"
         " (7, 2002, 4, 99999, 3.0, 1e-300, 1234.5, 1765000000000 + 86400000 * 40),"
         " (8, 0, 0, 0, 2.0, 0.1, 12.25, 1765000000000), (8, 4294967295, 7, 4294967295, -0.5, 0.1, NULL, 6),"
         " (9, 3, 0, 2, 0.125, 0.1, NULL, 1765000000123)");
    static step_row before[MAX_ROWS], after[MAX_ROWS];
    int n_before = read_steps(before);
    REQUIRE(n_before == 2005, "the steps before: %d", n_before);

    REQUIRE(migrate_apply(db, ddpd_migrations, ddpd_migrations_count, err, sizeof err) == ddpd_migrations_count,
            "to the last: %s", err);
    CHECK(count("SELECT count(*) FROM step_rows") == 2005, "every step kept in step_rows");
    int n_after = read_steps(after);
    CHECK(n_after == n_before, "the view reads %d steps of %d", n_after, n_before);
    int differ = 0;
    for (int r = 0; r < n_after && r < n_before; r++)
        for (int c = 0; c < 8; c++)
            if (before[r].type[c] != after[r].type[c] || before[r].i[c] != after[r].i[c] ||
                memcmp(&before[r].d[c], &after[r].d[c], sizeof(double)) != 0) {
                if (differ++ < 5)
                    CHECK(false, "step %d column %d: type %d -> %d, %lld -> %lld, %.17g -> %.17g", r, c,
                          before[r].type[c], after[r].type[c], (long long)before[r].i[c], (long long)after[r].i[c],
                          before[r].d[c], after[r].d[c]);
            }
    CHECK(differ == 0, "every column of every step as it was (%d differ)", differ);
    CHECK(count("SELECT count(*) FROM steps WHERE run_id = 8 AND global_step = 4294967295 AND t = 6") == 1,
          "the highest step of run 8, its time before the run's creation");

    /* the writer's row: a new step, then the same step again (its replacement) */
    const char *row_sql = OP_KINDS[OP_STEP].row->sql;
    REQUIRE(row_sql, "the step's row has its own SQL");
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(db, row_sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", row_sql, sqlite3_errmsg(db));
    bind_step(st, 7, 2003, 4, 2, 0.25, CREATED + 1);
    CHECK(sqlite3_step(st) == SQLITE_DONE, "write a step: %s", sqlite3_errmsg(db));
    bind_step(st, 7, 2003, 4, 3, 0.5, CREATED + 2);
    CHECK(sqlite3_step(st) == SQLITE_DONE, "write it again: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    CHECK(count("SELECT count(*) FROM steps WHERE run_id = 7 AND global_step = 2003 AND epoch = 4 AND step = 3"
                " AND loss = 0.5 AND lr = 0.001 AND samples_per_s = 50003 AND t = 1765000000002") == 1,
          "the step as its second write gave it");

    /* a restart's cut: the steps past 1990 written before 1765000000000 + 199500 leave
     * for superseded_steps (1991 .. 1994, 2001 and 2003), with their own columns */
    const char *const *step_sql = OP_KINDS[OP_STEP].sql;
    for (int i = 3; i <= 4; i++) { /* STEP_SQL[3], [4]: the steps into superseded_steps, then out of step_rows */
        REQUIRE(sqlite3_prepare_v2(db, step_sql[i], -1, &st, NULL) == SQLITE_OK, "%s: %s", step_sql[i],
                sqlite3_errmsg(db));
        sqlite3_bind_int64(st, 1, 7);
        sqlite3_bind_int64(st, 2, 1990);
        sqlite3_bind_int64(st, 3, CREATED + 199500);
        CHECK(sqlite3_step(st) == SQLITE_DONE, "%s: %s", step_sql[i], sqlite3_errmsg(db));
        sqlite3_finalize(st);
    }
    CHECK(count("SELECT count(*) FROM superseded_steps WHERE run_id = 7") == 6, "the cut steps kept: %lld",
          (long long)count("SELECT count(*) FROM superseded_steps WHERE run_id = 7"));
    CHECK(count("SELECT count(*) FROM superseded_steps WHERE run_id = 7 AND global_step = 1994 AND epoch = 3"
                " AND step = 493 AND t = 1765000199400") == 1,
          "a cut step with its epoch, step and time");
    CHECK(count("SELECT count(*) FROM superseded_steps WHERE run_id = 7 AND global_step = 2001") == 1,
          "the step of a time before the run's creation is cut too");
    CHECK(count("SELECT count(*) FROM steps WHERE run_id = 7 AND global_step > 1990") == 7 &&
              count("SELECT count(*) FROM steps WHERE run_id = 7 AND global_step IN (1995, 2000, 2002)") == 3,
          "1991 .. 1994, 2001 and 2003 gone, 1995 .. 2000 and 2002 stay: %lld",
          (long long)count("SELECT count(*) FROM steps WHERE run_id = 7 AND global_step > 1990"));

    /* a resume from step 1500: the run's epoch, step, loss and lr are that step's */
    exec("UPDATE runs SET status = 'failed' WHERE id = 7");
    REQUIRE(sqlite3_prepare_v2(db, OP_RUN_RESUME_SQL[1], -1, &st, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, 7);
    sqlite3_bind_int64(st, 2, 1500);
    CHECK(sqlite3_step(st) == SQLITE_DONE, "resume: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    CHECK(count("SELECT count(*) FROM runs WHERE id = 7 AND epoch = 2 AND step = 499 AND lr = 0.001"
                " AND loss = 1.0 / 1500 + 0.001 * (1500 % 7)") == 1,
          "the run's progress from step 1500");

    /* a run's deletion takes its steps, only its */
    REQUIRE(sqlite3_prepare_v2(db, OP_RUN_DELETE_SQL[1], -1, &st, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(db));
    sqlite3_bind_int64(st, 1, 8);
    CHECK(sqlite3_step(st) == SQLITE_DONE, "delete run 8's steps: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    CHECK(count("SELECT count(*) FROM steps WHERE run_id = 8") == 0 && count("SELECT count(*) FROM steps") == 1998,
          "run 8's steps gone, the others kept: %lld", (long long)count("SELECT count(*) FROM steps"));

    /* bytes: 30,000 steps of a fresh run as a trainer writes them, in key order */
    exec("INSERT INTO runs (id, status, config, world_size, device_kind, created_at) VALUES"
         " (10, 'running', '{}', 1, 'cpu', 1765000000000)");
    exec("PRAGMA wal_checkpoint(TRUNCATE)");
    int64_t pages = count("PRAGMA page_count"), page_size = count("PRAGMA page_size");
    REQUIRE(sqlite3_prepare_v2(db, row_sql, -1, &st, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(db));
    exec("BEGIN");
    for (int64_t g = 1; g <= 30000; g++) {
        bind_step(st, 10, g, 0, g - 1, 2.0 / (1.0 + (double)g / 1000.0) + 0.001 * (double)(g % 7), CREATED + g / 3);
        REQUIRE(sqlite3_step(st) == SQLITE_DONE, "write step %lld: %s", (long long)g, sqlite3_errmsg(db));
    }
    exec("COMMIT");
    sqlite3_finalize(st);
    double per_step = (double)((count("PRAGMA page_count") - pages) * page_size) / 30000.0;
    CHECK(per_step <= 40.0, "a step costs %.1f bytes (at most 40: 13.3 per point)", per_step);
    printf("# a step in %.1f bytes\n", per_step);

    /* the plans of every statement on step_rows */
    exec("ANALYZE");
    int plans = 0;
    for (int i = 0; i < RQ_COUNT; i++) plans += plan_held(rollup_sql(i));
    for (int i = 0; series_read_sql(i); i++) plans += plan_held(series_read_sql(i));
    for (int i = 0; store_read_steps_sql(i); i++) plans += plan_held(store_read_steps_sql(i));
    for (int i = 0; OP_RUN_DELETE_SQL[i]; i++) plans += plan_held(OP_RUN_DELETE_SQL[i]);
    for (int i = 0; OP_RUN_RESUME_SQL[i]; i++) plans += plan_held(OP_RUN_RESUME_SQL[i]);
    for (int i = 0; OP_RUN_REQUEUE_SQL[i]; i++) plans += plan_held(OP_RUN_REQUEUE_SQL[i]);
    for (int i = 0; step_sql[i]; i++) plans += plan_held(step_sql[i]);
    CHECK(plans >= 17, "%d plans held", plans);

    sqlite3_close(db);
    unlink(path);
    char side[sizeof path + 8];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    return test_done("test_step_rows");
}
