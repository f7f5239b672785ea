/* Unit tests of the store's writer when the database cannot be written
 * (server/store/store.c, write_fault.c), on a real SQLite file: SQLite's own
 * "database or disk is full" (SQLITE_FULL), brought on by capping the writer's
 * connection at the pages it has (PRAGMA max_page_count), and lifted again while
 * the writer retries. A batch that cannot be committed is kept, not dropped: the
 * store says it cannot write (store_health_take, store_unwritable: the reason, the
 * writes waiting), a new run or a deletion is refused at once, a waited run change
 * is answered "failed" and still kept; once pages can be had again, everything is
 * written in the order it came (every step, the run's final status) and the store is
 * writable again. Stopping while it still cannot write gives up after a bound and
 * says what is lost, instead of hanging. The tmpfs test of the whole server
 * (tests/integration/server/test_server_full_disk.py) fills a real disk. */
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
#include "store_read.h"

#define T0 1700000000000LL
#define STEPS 5000

/* The writer's connection (attach) and the hook that lifts the cap: on the writer's
 * thread, after a failed attempt, when the test asks. */
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
static void on_commit(bool committed) {
    if (committed) return;
    atomic_fetch_add(&failed_commits, 1);
    if (atomic_exchange(&lift_cap, 0)) sqlite3_exec(writer_db, "PRAGMA max_page_count = 1073741823", NULL, NULL, NULL);
}
static const store_observer OBSERVER = {on_attach, on_detach, on_record, on_commit};

/* The writer is idle (everything before was waited for): its connection may be used
 * from this thread. The cap cannot go below the pages the file has: it becomes them. */
static void cap_pages(void) {
    store_sync();
    sqlite3_exec(writer_db, "PRAGMA max_page_count = 1", NULL, NULL, NULL);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls the store's health until it is (or is not) writable; false at the deadline. */
static bool wait_writable(bool want, store_health *h) {
    for (int i = 0; i < 6000; i++) { /* a minute: a deadline, not a measurement */
        store_health_take(h);
        if (h->writable == want) return true;
        sleep_ms(10);
    }
    return false;
}

static int64_t insert_run(const char *name, int64_t t) {
    store_op op = {.kind = OP_RUN_INSERT, .t = t};
    op.u.insert.name = xstrdup(name);
    op.u.insert.config = xstrdup("{}");
    op.u.insert.world_size = 1;
    op.u.insert.device_kind = "cpu";
    return store_submit_wait(&op);
}

static store_op op_starting(int64_t id, int64_t t) {
    store_op op = {.kind = OP_RUN_STARTING, .run_id = id, .t = t};
    op.u.starting.devices = xstrdup("[\"cpu:0\"]");
    op.u.starting.pid = 4242;
    return op;
}

static store_op op_finish(int64_t id, const char *status, int64_t t) {
    store_op op = {.kind = OP_RUN_FINISH, .run_id = id, .t = t};
    op.u.finish.status = status;
    op.u.finish.reason = xstrdup("");
    op.u.finish.exit_code = 0;
    op.u.finish.exit_signal = NO_INT;
    return op;
}

/* `count` steps of run id from global step `from`, between `before` and `after`
 * (kinds other than OP_SYNC), in one submission: the writer takes them together. */
static void submit_steps_between(int64_t id, const store_op *before, int from, int count, const store_op *after) {
    store_op *ops = xmalloc(((size_t)count + 2) * sizeof *ops);
    size_t n = 0;
    if (before) ops[n++] = *before;
    for (int i = 0; i < count; i++) {
        int g = from + i;
        store_op *op = &ops[n++];
        *op = (store_op){.kind = OP_STEP, .run_id = id, .rank = 0, .t = T0 + 1000 + g};
        op->u.step.epoch = 0;
        op->u.step.step = g - 1;
        op->u.step.global_step = g;
        op->u.step.loss = 1.0 / g;
        op->u.step.lr = 0.01;
        op->u.step.samples_per_s = 100.0;
    }
    if (after) ops[n++] = *after;
    store_submit(ops, n);
    free(ops);
}

static void submit_steps(int64_t id, int from, int count) { submit_steps_between(id, NULL, from, count, NULL); }

static const char *status_of(int64_t id, char out[32]) {
    run_brief b;
    snprintf(out, 32, "%s", store_get_brief(id, &b) == 1 ? run_status_name(b.status) : "(none)");
    return out;
}

/* Steps of a run in the file: how many, how many distinct, the first and last. */
static void count_steps(int64_t id, int64_t *n, int64_t *distinct, int64_t *lo, int64_t *hi) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    *n = *distinct = *lo = *hi = -1;
    if (sqlite3_open_v2(layout_db_path(), &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT count(*), count(DISTINCT global_step), min(global_step), max(global_step)"
                               " FROM steps WHERE run_id = ?1", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, id);
        if (sqlite3_step(st) == SQLITE_ROW) {
            *n = sqlite3_column_int64(st, 0);
            *distinct = sqlite3_column_int64(st, 1);
            *lo = sqlite3_column_int64(st, 2);
            *hi = sqlite3_column_int64(st, 3);
        }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* A run's life while the disk is "full": kept, then written in order. */
static void test_kept_and_written(void) {
    int64_t a = insert_run("full-disk", T0);
    REQUIRE(a > 0, "a run is inserted while the store can write (got %lld)", (long long)a);
    store_op st = op_starting(a, T0 + 1);
    store_submit_now(&st);
    submit_steps(a, 1, 10);
    store_sync();
    store_health h;
    store_health_take(&h);
    CHECK(h.writable && h.pending == 0 && !h.reason[0], "writable at first, nothing waiting (pending %llu)",
          (unsigned long long)h.pending);
    char why[1024] = "untouched";
    CHECK(!store_unwritable(why, sizeof why) && strcmp(why, "untouched") == 0, "store_unwritable says nothing: %s", why);

    cap_pages();
    /* In the order a run's life has them: running needs starting first (its SQL says
     * status = 'starting'), the steps come before the end. One submission: the
     * writer's first attempt has them all. */
    store_op running = {.kind = OP_RUN_RUNNING, .run_id = a, .t = T0 + 2};
    store_op fin = op_finish(a, "succeeded", T0 + 9000);
    submit_steps_between(a, &running, 11, STEPS - 10, &fin);

    REQUIRE(wait_writable(false, &h), "the store says it cannot write once the pages run out");
    CHECK(strstr(h.reason, "full") != NULL, "the reason is SQLite's: %s", h.reason);
    CHECK(h.pending >= STEPS - 10 + 2, "the writes are kept: %llu waiting", (unsigned long long)h.pending);
    CHECK(h.since_ms > 0 && h.attempts >= 1 && h.failed_total >= 1, "since %lld, %llu attempts", (long long)h.since_ms,
          (unsigned long long)h.attempts);
    CHECK(store_unwritable(why, sizeof why) && strstr(why, "the database cannot be written: database or disk is full") &&
              strstr(why, "writes waiting") && strstr(why, "free space") && strstr(why, layout_db_path()),
          "one sentence names the reason, the file, what waits and what to do: %s", why);

    /* What a caller can ask again is refused at once, and nothing is kept of it. */
    uint64_t refused = h.refused_total;
    CHECK(insert_run("while-full", T0 + 3) == -1, "a new run is refused while the store cannot write");
    store_op del = {.kind = OP_RUN_DELETE, .run_id = a, .t = T0 + 4};
    CHECK(store_submit_wait(&del) == -1, "a deletion is refused while the store cannot write");
    store_health_take(&h);
    CHECK(h.refused_total == refused + 2, "both are counted as refused (%llu)", (unsigned long long)h.refused_total);
    /* A run change waited for is answered "failed" and kept. */
    int64_t b_id = a + 1000; /* no such run: its finish changes nothing, but must not be lost either */
    store_op fin_b = op_finish(b_id, "failed", T0 + 9001);
    CHECK(store_submit_wait(&fin_b) == -1, "a waited run change is answered failed while the store cannot write");
    char status[32];
    CHECK(strcmp(status_of(a, status), "starting") == 0, "nothing of the kept batch is in the database yet: %s", status);
    int64_t n, distinct, lo, hi;
    count_steps(a, &n, &distinct, &lo, &hi);
    CHECK(n == 10, "only the steps written before are in the file: %lld", (long long)n);

    atomic_store(&lift_cap, 1); /* the next failed attempt lifts the cap: space is back */
    REQUIRE(wait_writable(true, &h), "the store is writable again once pages can be had");
    store_sync();
    store_health_take(&h);
    CHECK(h.writable && h.pending == 0 && !h.reason[0] && h.attempts == 0,
          "writable, nothing waiting (pending %llu, reason \"%s\")", (unsigned long long)h.pending, h.reason);
    CHECK(!store_unwritable(why, sizeof why), "store_unwritable says nothing once it can write");
    CHECK(strcmp(status_of(a, status), "succeeded") == 0,
          "the run's final status is written, after running (its changes in order): %s", status);
    count_steps(a, &n, &distinct, &lo, &hi);
    CHECK(n == STEPS && distinct == STEPS && lo == 1 && hi == STEPS, "every step is written once: %lld (%lld distinct) %lld..%lld",
          (long long)n, (long long)distinct, (long long)lo, (long long)hi);
    char *raw = NULL;
    json_t *doc = store_run_json(a, &raw);
    json_t *gs = doc ? json_object_get(doc, "global_step") : NULL;
    if (!gs && doc) gs = json_object_get(json_object_get(doc, "progress"), "global_step");
    CHECK(doc && json_integer_value(gs) == STEPS, "the run's progress is its last step");
    json_decref(doc);
    free(raw);
    CHECK(insert_run("after", T0 + 10000) > a, "a new run is stored again");
    CHECK(atomic_load(&failed_commits) >= 1, "the writer retried: %d failed attempts", atomic_load(&failed_commits));
}

/* Stopping while it still cannot write: the writer gives up after its bound. */
static void test_stop_while_full(void) {
    int64_t a = insert_run("stop-while-full", T0 + 20000);
    REQUIRE(a > 0, "a run is inserted");
    cap_pages();
    submit_steps(a, 1, STEPS);
    store_health h;
    REQUIRE(wait_writable(false, &h), "the store cannot write");
    store_read_release();
    store_close(); /* returns: the ctest timeout would catch a hang */
    CHECK(1, "store_close returned while the database could not be written");
    char err[512];
    REQUIRE(store_open(layout_db_path(), &OBSERVER, NULL, err, sizeof err) == 0, "store_open again: %s", err);
    store_health_take(&h);
    CHECK(h.writable && h.pending == 0, "a store opened again starts writable, nothing waiting");
    int64_t n, distinct, lo, hi;
    count_steps(a, &n, &distinct, &lo, &hi);
    CHECK(n == 0, "what could not be written before the stop is not there (it was logged as lost): %lld", (long long)n);
    CHECK(insert_run("reopened", T0 + 30000) > a, "and it writes again");
}

int main(void) {
    char *dir = scratch_dir_make("store-faults");
    REQUIRE(dir, "mkdtemp: %s", strerror(errno));
    state_layout_init(dir);
    char err[512];
    REQUIRE(store_open(layout_db_path(), &OBSERVER, NULL, err, sizeof err) == 0, "store_open: %s", err);
    REQUIRE(writer_db, "the observer is attached to the writer's connection");
    test_kept_and_written();
    test_stop_while_full();
    store_read_release();
    store_close();
    state_layout_free();
    scratch_dir_remove(dir);
    free(dir);
    return test_done("test_store_faults");
}
