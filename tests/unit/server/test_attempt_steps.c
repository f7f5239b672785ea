/* Unit tests of server/store/attempt_steps.c and migration 0020 on a real SQLite file
 * with the real migrations: the attempts on record before 0020 get their restart's
 * first step by the migration's one scan; then, through the writer's calls, a new
 * restart's first step is the lowest written since it started (not one written
 * before it, nor a higher one after), and the first attempt has none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attempt_steps.h"
#include "check.h"
#include "migrations.h"

static sqlite3 *db;

static void exec(const char *sql) {
    char *msg = NULL;
    REQUIRE(sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK, "%s: %s", sql, msg ? msg : "");
}

/* The first step of attempt `a` of run 7: -1 when NULL, -2 when there is no such row. */
static int64_t first_of(int a) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT first_global_step FROM run_attempts WHERE run_id = 7 AND attempt = %d", a);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    int rc = sqlite3_step(st);
    int64_t v = rc != SQLITE_ROW ? -2 : sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

int main(void) {
    char path[] = "/tmp/ddpd-test-attempt-steps-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp");
    close(fd);
    char err[512];
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK, "open");
    exec("PRAGMA journal_mode = WAL");
    int at = -1;
    for (int i = 0; i < ddpd_migrations_count; i++)
        if (strstr(ddpd_migrations[i].name, "_attempt_first_step.sql")) at = i;
    REQUIRE(at > 0, "migration 0020 is built in");

    /* before it: attempt 1 started at t 5000 and did steps 3 and 4 again; 5-10 came after */
    REQUIRE(migrate_apply(db, ddpd_migrations, at, err, sizeof err) == at, "to the one before: %s", err);
    exec("INSERT INTO runs (id, status, config, world_size, device_kind, created_at) VALUES (7, 'running', '{}', 1, 'cpu', 0)");
    exec("INSERT INTO run_attempts (run_id, attempt, started_at) VALUES (7, 0, 0), (7, 1, 5000)");
    exec("WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < 10)"
         " INSERT INTO steps (run_id, global_step, loss, t) SELECT 7, x, 1.0 / x, 1000 * x FROM s");
    exec("UPDATE steps SET t = 6000 + global_step WHERE run_id = 7 AND global_step IN (3, 4)");
    REQUIRE(migrate_apply(db, ddpd_migrations, ddpd_migrations_count, err, sizeof err) == ddpd_migrations_count,
            "to the last: %s", err);
    CHECK(first_of(0) == -1, "the first attempt has none: %lld", (long long)first_of(0));
    CHECK(first_of(1) == 3, "the restart on record: its first step, 3: %lld", (long long)first_of(1));

    /* a new restart, written through the writer's calls */
    exec("INSERT INTO run_attempts (run_id, attempt, started_at) VALUES (7, 2, 20000)");
    attempt_steps_forget_run(7);
    CHECK(attempt_step_written(db, 7, 2, 19000) == 0 && first_of(2) == -1, "a step before it started is not its");
    CHECK(attempt_step_written(db, 7, 8, 21000) == 0 && first_of(2) == 8, "its first step: %lld", (long long)first_of(2));
    CHECK(attempt_step_written(db, 7, 9, 22000) == 0 && first_of(2) == 8, "a later, higher one leaves it");
    CHECK(attempt_step_written(db, 7, 6, 23000) == 0 && first_of(2) == 6, "a lower one takes its place: %lld",
          (long long)first_of(2));
    CHECK(first_of(1) == 3, "the earlier restart keeps its own");
    /* what the writer remembered goes with a rollback: read again, it still holds */
    attempt_steps_forget();
    CHECK(attempt_step_written(db, 7, 7, 24000) == 0 && first_of(2) == 6, "after forgetting: %lld", (long long)first_of(2));

    sqlite3_close(db);
    unlink(path);
    char side[sizeof path + 8];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    return test_done("test_attempt_steps");
}
