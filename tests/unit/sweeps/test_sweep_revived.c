/* Unit test of the sweeps' searcher's look for reopened sweeps (sweep_store_revived,
 * server/sweep/sweep_store.c) on a real SQLite file with every migration applied:
 *
 *  - answers: a finished sweep whose ended trial's run was resumed after the trial
 *    ended is found; a running sweep, a resume from before the trial ended, a trial
 *    whose run ended again, and 3,000 queued runs of no sweep are not;
 *  - plan: the statement reads runs through the live sweep runs' index
 *    (runs_live_sweep, migration 0023), never runs_by_status, which would seek every
 *    queued run on every pass, nor a scan. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "buf.h"
#include "check.h"
#include "migrate.h"
#include "migrations.h"
#include "scratch_dir.h"
#include "sweep_store.h"

#define QUEUED 3000

static void exec(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    REQUIRE(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
}

/* A run of sweep `sweep` (0: none) and trial, in status, with id `id`. */
static void run(sqlite3 *db, int id, const char *status, int sweep, int trial) {
    char s[16] = "NULL", t[16] = "NULL";
    if (sweep) {
        snprintf(s, sizeof s, "%d", sweep);
        snprintf(t, sizeof t, "%d", trial);
    }
    char *sql = sqlite3_mprintf("INSERT INTO runs (id, name, status, config, world_size, device_kind, created_at,"
                                " sweep_id, trial) VALUES (%d, 'r', '%q', '{}', 1, 'cpu', %d, %s, %s)",
                                id, status, 1000 + id, s, t);
    exec(db, sql);
    sqlite3_free(sql);
}

static void sweep(sqlite3 *db, int id, const char *status) {
    char *sql = sqlite3_mprintf("INSERT INTO sweeps (id, name, spec, status, n_trials, created_at)"
                                " VALUES (%d, 's', '{}', '%q', 2, 1)", id, status);
    exec(db, sql);
    sqlite3_free(sql);
}

/* Trial `trial` of sweep `s`, its run, its state since `updated`. */
static void trial(sqlite3 *db, int s, int trial, int run_id, const char *state, int updated) {
    char *sql = sqlite3_mprintf("INSERT INTO sweep_trials (sweep_id, trial, params, run_id, state, updated_at)"
                                " VALUES (%d, %d, '{}', %d, '%q', %d)", s, trial, run_id, state, updated);
    exec(db, sql);
    sqlite3_free(sql);
}

static void resumed(sqlite3 *db, int run_id, int at) {
    char *sql = sqlite3_mprintf("INSERT INTO run_resumes (run_id, n, at, prior_status) VALUES (%d, 1, %d, 'canceled')",
                                run_id, at);
    exec(db, sql);
    sqlite3_free(sql);
}

static int revived(int64_t *first) {
    int64_t *ids = NULL;
    int n = sweep_store_revived(&ids);
    *first = n > 0 ? ids[0] : 0;
    free(ids);
    return n;
}

int main(void) {
    char *dir = scratch_dir_make("sweep-revived");
    REQUIRE(dir, "scratch dir");
    char *path = xasprintf("%s/ddpd.db", dir);
    sqlite3 *db;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK, "open");
    char err[512];
    REQUIRE(migrate_apply(db, ddpd_migrations, ddpd_migrations_count, err, sizeof err) == ddpd_migrations_count,
            "migrated: %s", err);

    exec(db, "BEGIN");
    for (int i = 1; i <= QUEUED; i++) run(db, i, "queued", 0, 0);
    /* sweep 1 finished; its trial 0 ended at 500 and its run was resumed at 600 */
    sweep(db, 1, "succeeded");
    run(db, 5001, "queued", 1, 0);
    trial(db, 1, 0, 5001, "canceled", 500);
    resumed(db, 5001, 600);
    run(db, 5002, "succeeded", 1, 1);
    trial(db, 1, 1, 5002, "succeeded", 500);
    /* sweep 2 still runs: it follows its trials itself */
    sweep(db, 2, "running");
    run(db, 5003, "queued", 2, 0);
    trial(db, 2, 0, 5003, "canceled", 500);
    resumed(db, 5003, 600);
    /* sweep 3 finished after its trial's run was resumed (at 400, the trial ended at 500) */
    sweep(db, 3, "failed");
    run(db, 5004, "running", 3, 0);
    trial(db, 3, 0, 5004, "failed", 500);
    resumed(db, 5004, 400);
    exec(db, "COMMIT");

    REQUIRE(sweep_store_open(path, err, sizeof err) == 0, "sweep store opened: %s", err);
    int64_t first;
    int n = revived(&first);
    CHECK(n == 1 && first == 1, "only sweep 1 is reopened: %d sweeps, the first %lld", n, (long long)first);

    /* its resumed run ends again: nothing to reopen (the partial index drops the row) */
    exec(db, "UPDATE runs SET status = 'canceled' WHERE id = 5001");
    n = revived(&first);
    CHECK(n == 0, "a resumed run that ended again reopens nothing: %d sweeps (first %lld)", n, (long long)first);
    exec(db, "UPDATE runs SET status = 'starting' WHERE id = 5001");
    n = revived(&first);
    CHECK(n == 1 && first == 1, "starting again, it reopens sweep 1: %d sweeps, the first %lld", n,
          (long long)first);

    /* the plan: the live sweep runs' index, no scan, not the status index */
    char *sql = xasprintf("EXPLAIN QUERY PLAN %s", SWEEP_REVIVED_SQL);
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "plan: %s", sqlite3_errmsg(db));
    buf_t plan = {0};
    while (sqlite3_step(st) == SQLITE_ROW) buf_printf(&plan, "%s\n", (const char *)sqlite3_column_text(st, 3));
    sqlite3_finalize(st);
    free(sql);
    const char *p = plan.data ? plan.data : "";
    printf("plan:\n%s", p);
    CHECK(strstr(p, "SEARCH r USING INDEX runs_live_sweep") != NULL, "runs read through runs_live_sweep:\n%s", p);
    CHECK(strstr(p, "runs_by_status") == NULL, "not through runs_by_status:\n%s", p);
    CHECK(strstr(p, "SCAN") == NULL, "no scan:\n%s", p);
    buf_free(&plan);

    sweep_store_close();
    sqlite3_close(db);
    scratch_dir_remove(dir);
    free(path);
    free(dir);
    return test_done("test_sweep_revived");
}
