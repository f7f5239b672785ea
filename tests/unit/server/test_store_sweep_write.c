/* Unit tests of the sweeps' writes through the store's writer (OP_SWEEP_WRITE,
 * op_sweep_write_apply in server/store/run_ops.c) on a real SQLite file: one op is one of
 * the searcher's decisions, applied whole or not at all. An op whose later statement
 * the database refuses (a CHECK, a primary key) leaves nothing of its earlier ones,
 * answers -1, and the writer goes on: the ops before and after it in the same batch
 * are written. An op whose second statement meets a full database (SQLITE_FULL, the
 * connection capped at the pages it has) is a fault of the batch: its waiter is told
 * -1 at once, the op is kept and the batch retried whole once pages can be had: both
 * its rows are there, once. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "check.h"
#include "scratch_dir.h"
#include "state_layout.h"
#include "store.h"

#define T0 1700000000000LL

static sqlite3 *writer_db;
static atomic_int lift_cap, failed_commits;

static int on_attach(sqlite3 *db, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    writer_db = db;
    return 0;
}
static void on_detach(void) { writer_db = NULL; }
static void on_record(const store_op *op, int64_t result) {
    (void)op;
    (void)result;
}
/* After a failed attempt (on the writer's thread), the cap is lifted when asked. */
static void on_commit(bool committed) {
    if (committed) return;
    atomic_fetch_add(&failed_commits, 1);
    if (atomic_exchange(&lift_cap, 0))
        sqlite3_exec(writer_db, "PRAGMA max_page_count = 1073741823", NULL, NULL, NULL);
}
static const store_observer OBSERVER = {on_attach, on_detach, on_record, on_commit};

static store_op exec_op(const char *sql) {
    store_op op = {.kind = OP_SWEEP_WRITE, .t = T0};
    op.u.exec.sql = xstrdup(sql);
    return op;
}

/* One number the file holds, read on a connection of the test's own (-1: unreadable). */
static long long count(const char *sql) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long long n = -1;
    if (sqlite3_open_v2(layout_db_path(), &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

/* Polls the store's health until it is writable again; false at the deadline. */
static bool wait_writable(void) {
    for (int i = 0; i < 6000; i++) { /* a minute: a deadline, not a measurement */
        store_health h;
        store_health_take(&h);
        if (h.writable && h.pending == 0) return true;
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    }
    return false;
}

#define SWEEP(name) "INSERT INTO sweeps (name, spec, status, n_trials, created_at) VALUES ('" name "', '{}', 'running', 1, 1)"
#define TRIAL(sweep, state)                                                                                          \
    "INSERT INTO sweep_trials (sweep_id, trial, params, state, updated_at) VALUES (" sweep ", 0, '{}', '" state "', 1)"

static void refused_later_statement(void) {
    /* the second statement breaks the trials' CHECK on state: the sweep's row goes too */
    store_op op = exec_op(SWEEP("first") ";\n" TRIAL("(SELECT max(id) FROM sweeps)", "bogus") ";\n");
    CHECK(store_submit_wait(&op) == -1, "an op with a refused statement answers -1");
    CHECK(count("SELECT count(*) FROM sweeps WHERE name = 'first'") == 0,
          "the first statement's row is not there: %lld", count("SELECT count(*) FROM sweeps WHERE name = 'first'"));
    CHECK(count("SELECT count(*) FROM sweep_trials") == 0, "nor any trial");

    /* a primary key: the same decision twice in one op */
    op = exec_op("INSERT INTO sweep_decisions (sweep_id, n, trial, action, t) VALUES (7, 0, NULL, 'made', 1);\n"
                 "UPDATE sweep_decisions SET detail = 'x' WHERE sweep_id = 7;\n"
                 "INSERT INTO sweep_decisions (sweep_id, n, trial, action, t) VALUES (7, 0, NULL, 'made', 2);\n");
    CHECK(store_submit_wait(&op) == -1, "a duplicate key: -1");
    CHECK(count("SELECT count(*) FROM sweep_decisions WHERE sweep_id = 7") == 0, "neither the insert nor the update stays");

    /* the writer goes on: the next op is written whole */
    op = exec_op(SWEEP("second") ";\n" TRIAL("(SELECT max(id) FROM sweeps)", "pending") ";\n");
    int64_t r = store_submit_wait(&op);
    CHECK(r > 0, "the next op is written: %lld", (long long)r);
    CHECK(count("SELECT count(*) FROM sweeps s JOIN sweep_trials t ON t.sweep_id = s.id WHERE s.name = 'second'") == 1,
          "with both its rows");
}

static void same_batch(void) {
    /* three ops queued together (the writer takes them in one transaction): the
     * refused one in the middle fails alone */
    int failed = atomic_load(&failed_commits);
    store_op ops[3] = {exec_op(SWEEP("before") ";\n"),
                       exec_op(SWEEP("middle") ";\n" TRIAL("(SELECT max(id) FROM sweeps)", "bogus") ";\n"),
                       exec_op(SWEEP("after") ";\n")};
    store_submit(ops, 3);
    store_sync();
    CHECK(count("SELECT count(*) FROM sweeps WHERE name IN ('before', 'after')") == 2, "the ops around it are there");
    CHECK(count("SELECT count(*) FROM sweeps WHERE name = 'middle'") == 0, "the refused op's first statement is not");
    CHECK(atomic_load(&failed_commits) == failed, "and no commit failed for it");
}

static void full_database(void) {
    /* the writer is idle: its connection capped at the pages it has, so the second
     * statement (a spec of 200 kB) cannot get pages: a fault, the batch retried whole */
    store_sync();
    sqlite3_exec(writer_db, "PRAGMA max_page_count = 1", NULL, NULL, NULL);
    int failed = atomic_load(&failed_commits);
    atomic_store(&lift_cap, 1);
    char *sql = xasprintf("INSERT INTO sweep_decisions (sweep_id, n, trial, action, t) VALUES (9, 0, NULL, 'made', 1);\n"
                          "INSERT INTO sweeps (name, spec, status, n_trials, created_at) VALUES ('big', printf('%%.*c',"
                          " 200000, 'x'), 'running', 1, 1);\n");
    store_op op = exec_op(sql);
    free(sql);
    int64_t r = store_submit_wait(&op);
    CHECK(r == -1, "its waiter is told it failed: %lld", (long long)r);
    CHECK(atomic_load(&failed_commits) > failed, "the full database failed the batch (%d failed commits)",
          atomic_load(&failed_commits) - failed);
    CHECK(wait_writable(), "the batch kept is written once pages can be had");
    CHECK(count("SELECT count(*) FROM sweep_decisions WHERE sweep_id = 9") == 1 &&
              count("SELECT count(*) FROM sweeps WHERE name = 'big' AND length(spec) = 200000") == 1,
          "both its rows, once: %lld %lld", count("SELECT count(*) FROM sweep_decisions WHERE sweep_id = 9"),
          count("SELECT count(*) FROM sweeps WHERE name = 'big'"));
}

int main(void) {
    char *dir = scratch_dir_make("sweep-write");
    REQUIRE(dir, "mkdtemp: %s", strerror(errno));
    state_layout_init(dir);
    char err[512];
    REQUIRE(store_open(layout_db_path(), &OBSERVER, NULL, err, sizeof err) == 0, "store_open: %s", err);
    refused_later_statement();
    same_batch();
    full_database();
    store_close();
    state_layout_free();
    scratch_dir_remove(dir);
    free(dir);
    return test_done("test_store_sweep_write");
}
