/* Unit tests of the server's own ops whose statements no other C test holds
 * (server/store/run_ops.c: each op's statements, in the order its apply binds them),
 * through the store's writer on a real SQLite file, read back row by row: a built-in
 * run resumed from a checkpoint drops what it recorded past it (steps, series,
 * epochs, checkpoints) and takes that checkpoint's progress, a command run's resume
 * keeps everything, a built-in run without a checkpoint is not resumed; a run being
 * preempted is marked, then queued again with its attempt closed as preempted and,
 * a built-in run's, its records past the checkpoint dropped; a restart queues a
 * started run and forgets its process; usage is kept per owner; a stopped run's
 * reason is rewritten and no other's. Each op on a run in the wrong state changes
 * nothing. And the feed's data of those ops (their SSE events), member by member. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "base.h"
#include "check.h"
#include "event_kinds.h"
#include "scratch_dir.h"
#include "state_layout.h"
#include "store.h"

#define T0 1700000000000LL /* unix ms: every op's time is fixed */

static sqlite3 *DB; /* a reader of the store's file, beside its writer */

static bool str_is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* The rows of a query as text: columns joined by '|', rows by "; ", NULL as NULL. */
static char *rows(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *sql = sqlite3_vmprintf(fmt, ap);
    va_end(ap);
    sqlite3_stmt *st = NULL;
    buf_t out = {0};
    buf_printf(&out, "%s", "");
    if (sqlite3_prepare_v2(DB, sql, -1, &st, NULL) != SQLITE_OK) {
        buf_printf(&out, "(%s: %s)", sql, sqlite3_errmsg(DB));
    } else {
        for (int n = 0; sqlite3_step(st) == SQLITE_ROW; n++) {
            if (n) buf_printf(&out, "; ");
            for (int i = 0; i < sqlite3_column_count(st); i++) {
                const char *v = (const char *)sqlite3_column_text(st, i);
                buf_printf(&out, "%s%s", i ? "|" : "", v ? v : "NULL");
            }
        }
    }
    sqlite3_finalize(st);
    sqlite3_free(sql);
    return out.data;
}

#define CHECK_ROWS(want, ...)                                                                  \
    do {                                                                                       \
        char *got_ = rows(__VA_ARGS__);                                                        \
        CHECK(str_is(got_, want), "%s:\n      want %s\n      got  %s", #__VA_ARGS__, want, got_); \
        free(got_);                                                                            \
    } while (0)

/* ---- a run and what it recorded ---- */

static int64_t submit(store_op *op) { return store_submit_wait(op); }

static int64_t insert_run(const char *name, bool command, int64_t t) {
    store_op op = {.kind = OP_RUN_INSERT, .t = t};
    op.u.insert.name = xstrdup(name);
    op.u.insert.config = xstrdup("{}");
    op.u.insert.world_size = 1;
    op.u.insert.device_kind = "cpu";
    op.u.insert.command = command;
    return submit(&op);
}

static int64_t by_id(store_op_kind kind, int64_t id, int64_t t) {
    store_op op = {.kind = kind, .run_id = id, .t = t};
    return submit(&op);
}

/* queued -> starting (devices, pid, secret) -> running */
static void start_run(int64_t id, int64_t t) {
    store_op op = {.kind = OP_RUN_STARTING, .run_id = id, .t = t};
    op.u.starting.devices = xstrdup("[\"cpu:0\"]");
    op.u.starting.pid = 4000 + id;
    op.u.starting.pid_start_time = 77;
    op.u.starting.secret = xstrdup("0123456789abcdef");
    CHECK(submit(&op) == 1, "run %lld starts", (long long)id);
    CHECK(by_id(OP_RUN_RUNNING, id, t + 1) == 1, "run %lld runs", (long long)id);
}

static int64_t finish(int64_t id, const char *status, const char *reason, int64_t code, int64_t t) {
    store_op op = {.kind = OP_RUN_FINISH, .run_id = id, .t = t};
    op.u.finish.status = status;
    op.u.finish.reason = reason ? xstrdup(reason) : NULL;
    op.u.finish.exit_code = code;
    op.u.finish.exit_signal = NO_INT;
    return submit(&op);
}

/* Steps 1..n at T0 + 100 + g (loss 2 - g/4, lr 0.1, samples/s 100 + g, a series
 * value acc = g/8): 3 steps an epoch. */
static void steps(int64_t id, int n, bool of_reporter) {
    for (int g = 1; g <= n; g++) {
        store_op op = {.kind = OP_STEP, .run_id = id, .rank = 0, .t = T0 + 100 + g};
        op.u.step.global_step = g;
        op.u.step.epoch = (g - 1) / 3;
        op.u.step.step = (g - 1) % 3 + 1;
        op.u.step.loss = 2.0 - g / 4.0;
        op.u.step.lr = 0.1;
        op.u.step.samples_per_s = 100 + g;
        op.u.step.series = json_pack("{s:f}", "acc", g / 8.0);
        op.u.step.of_reporter = of_reporter;
        submit(&op);
    }
}

/* Epochs 0 and 1, each checkpointed (at steps 3 and 6). */
static void epochs_and_checkpoints(int64_t id) {
    for (int e = 0; e < 2; e++) {
        store_op ep = {.kind = OP_EPOCH, .run_id = id, .rank = 0, .t = T0 + 200 + e};
        ep.u.epoch.epoch = e;
        ep.u.epoch.lr = 0.1;
        ep.u.epoch.train_loss = 1.0 - e / 4.0;
        ep.u.epoch.test_loss = ep.u.epoch.test_acc = ep.u.epoch.seconds = ep.u.epoch.samples_per_s = NAN;
        submit(&ep);
        store_op ck = {.kind = OP_CHECKPOINT, .run_id = id, .rank = 0, .t = T0 + 210 + e};
        ck.u.checkpoint.epoch = e;
        ck.u.checkpoint.global_step = 3 * (e + 1);
        ck.u.checkpoint.bytes = 1000;
        ck.u.checkpoint.path = xasprintf("/ck/%d.pt", 3 * (e + 1));
        submit(&ck);
    }
}

static void attempt_started(int64_t id, int64_t attempt, int64_t t) {
    store_op op = {.kind = OP_ATTEMPT_STARTED, .run_id = id, .rank = -1, .t = t};
    op.u.attempt.attempt = attempt;
    op.u.attempt.master_port = NO_INT;
    op.u.attempt.failing_rank = op.u.attempt.exit_code = op.u.attempt.signal = NO_INT;
    submit(&op);
}

/* What a run recorded, one list per table: steps, series, epochs, checkpoints. */
#define RECORDS(id)                                                                                        \
    "SELECT (SELECT group_concat(global_step) FROM (SELECT global_step FROM steps WHERE run_id = %lld"      \
    " ORDER BY 1)), (SELECT group_concat(global_step) FROM (SELECT global_step FROM series WHERE run_id ="  \
    " %lld ORDER BY 1)), (SELECT group_concat(epoch) FROM (SELECT epoch FROM epochs WHERE run_id = %lld"     \
    " ORDER BY 1)), (SELECT group_concat(global_step) FROM (SELECT global_step FROM checkpoints WHERE"      \
    " run_id = %lld ORDER BY 1))",                                                                          \
        (long long)(id), (long long)(id), (long long)(id), (long long)(id)

#define PROGRESS "SELECT status, global_step, epoch, step, loss, lr, samples_per_s FROM runs WHERE id = %lld"

/* The feed's data of an op with its result, as the feed would publish it: `want`
 * (freed here), or none when it is NULL. */
static void check_sse(const store_op *op, int64_t result, char *want) {
    const op_kind_desc *d = &OP_KINDS[op->kind];
    json_t *data = d->sse_data ? d->sse_data(op, result) : NULL;
    char *got = data ? json_dumps(data, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    CHECK(want ? str_is(got, want) : got == NULL, "kind %d's %s event:\n      want %s\n      got  %s", op->kind,
          d->sse_event ? d->sse_event : "(none)", want ? want : "(none)", got ? got : "(none)");
    free(got);
    free(want);
    json_decref(data);
}

/* ---- resume ---- */

static store_op resume_op(int64_t id, const char *checkpoint, int64_t epoch, int64_t gs, int64_t attempt, int64_t t) {
    store_op op = {.kind = OP_RUN_RESUME, .run_id = id, .t = t};
    op.u.resume.from_checkpoint = checkpoint ? xstrdup(checkpoint) : NULL;
    op.u.resume.from_epoch = epoch;
    op.u.resume.from_global_step = gs;
    op.u.resume.attempt = attempt;
    return op;
}

static void test_resume(void) {
    /* a built-in run, failed after 6 steps, 2 epochs, 2 checkpoints: resumed from the first */
    int64_t a = insert_run("builtin", false, T0);
    start_run(a, T0 + 1);
    steps(a, 6, false);
    epochs_and_checkpoints(a);
    CHECK_ROWS("1,2,3,4,5,6|1,2,3,4,5,6|0,1|3,6", RECORDS(a));
    CHECK(finish(a, "failed", "rank 0 exited 1", 1, T0 + 300) == 1, "the run fails");
    store_op r = resume_op(a, "/ck/3.pt", 0, 3, 1, T0 + 400);
    CHECK(submit(&r) == 1, "a failed run with a checkpoint is resumed");
    CHECK_ROWS("queued|3|0|3|1.25|0.1|NULL", PROGRESS, (long long)a);
    CHECK_ROWS("NULL|NULL|NULL|NULL|NULL|NULL|NULL|NULL|1700000000400",
               "SELECT reason, exit_code, exit_signal, finished_at, devices, pid, first_step_at, last_step_at,"
               " queued_at FROM runs WHERE id = %lld",
               (long long)a);
    CHECK_ROWS("1|1700000000400|/ck/3.pt|0|3|failed|rank 0 exited 1|1|NULL|1",
               "SELECT n, at, from_checkpoint, from_epoch, from_global_step, prior_status, prior_reason,"
               " prior_exit_code, prior_exit_signal, attempt FROM run_resumes WHERE run_id = %lld",
               (long long)a);
    CHECK_ROWS("1,2,3|1,2,3|0|3", RECORDS(a));
    r = resume_op(a, "/ck/3.pt", 0, 3, 1, T0 + 410);
    CHECK(submit(&r) == 0, "a queued run is not resumed");
    CHECK_ROWS("1", "SELECT count(*) FROM run_resumes WHERE run_id = %lld", (long long)a);

    r = resume_op(a, "/ck/3.pt", 0, 3, 1, T0 + 400);
    check_sse(&r, 1,
              xasprintf("{\"run\":%lld,\"status\":\"queued\",\"t\":1700000000400,\"resumed\":{\"from_checkpoint\":"
                        "\"/ck/3.pt\",\"from_epoch\":0,\"from_global_step\":3,\"attempt\":1}}",
                        (long long)a));
    check_sse(&r, 0, NULL);
    store_op_free(&r);

    /* a command run, canceled: its script goes on from its own snapshot, nothing goes */
    int64_t c = insert_run("command", true, T0 + 10);
    start_run(c, T0 + 11);
    steps(c, 4, true);
    CHECK(finish(c, "canceled", "canceled by alice", NO_INT, T0 + 300) == 1, "the command run is canceled");
    r = resume_op(c, NULL, NO_INT, NO_INT, 2, T0 + 420);
    CHECK(submit(&r) == 1, "a canceled command run is resumed without a checkpoint");
    CHECK_ROWS("queued|4|1|1|1.0|0.1|104.0", PROGRESS, (long long)c);
    CHECK_ROWS("1,2,3,4|1,2,3,4|NULL|NULL", RECORDS(c));
    CHECK_ROWS("1|NULL|NULL|NULL|canceled|canceled by alice|2",
               "SELECT n, from_checkpoint, from_epoch, from_global_step, prior_status, prior_reason, attempt"
               " FROM run_resumes WHERE run_id = %lld",
               (long long)c);

    /* a built-in run without a checkpoint: nothing to continue from */
    int64_t b = insert_run("no-checkpoint", false, T0 + 20);
    CHECK(finish(b, "failed", "no data", 2, T0 + 21) == 1, "a queued run fails");
    r = resume_op(b, NULL, NO_INT, NO_INT, 1, T0 + 430);
    CHECK(submit(&r) == 0, "a built-in run without a checkpoint is not resumed");
    CHECK_ROWS("failed|0", "SELECT status, (SELECT count(*) FROM run_resumes WHERE run_id = id) FROM runs WHERE id = %lld",
               (long long)b);
}

/* ---- preempting, requeue ---- */

static void test_preempt(void) {
    /* a built-in run preempted by run 99, queued again from its checkpoint at step 3 */
    int64_t a = insert_run("preempted", false, T0 + 30);
    start_run(a, T0 + 31);
    attempt_started(a, 0, T0 + 32);
    steps(a, 6, false);
    epochs_and_checkpoints(a);
    store_op p = {.kind = OP_RUN_PREEMPTING, .run_id = a, .t = T0 + 500};
    p.u.preempting.by = 99;
    CHECK(submit(&p) == 1, "a running run is marked as being preempted");
    CHECK_ROWS("running|1|99|1700000000500", "SELECT status, preempting, preempted_by, preempted_at FROM runs"
               " WHERE id = %lld", (long long)a);

    store_op q = {.kind = OP_RUN_REQUEUE, .run_id = a, .t = T0 + 510};
    q.u.requeue.by = 99;
    q.u.requeue.from_epoch = 0;
    q.u.requeue.from_global_step = 3;
    CHECK(submit(&q) == 1, "the preempted run is queued again");
    CHECK_ROWS("queued|3|0|3|1.25|0.1|NULL", PROGRESS, (long long)a);
    CHECK_ROWS("0|1|1700000000510|NULL|NULL|NULL|NULL|NULL|NULL",
               "SELECT preempting, preemptions, queued_at, devices, pid, pid_start_time, secret, slurm_job_id,"
               " first_step_at FROM runs WHERE id = %lld",
               (long long)a);
    CHECK_ROWS("0|preempted|preempted by run 99|1700000000510",
               "SELECT attempt, status, reason, ended_at FROM run_attempts WHERE run_id = %lld", (long long)a);
    CHECK_ROWS("1,2,3|1,2,3|0|3", RECORDS(a));
    CHECK(submit(&q) == 0, "a queued run is not queued again");
    CHECK(submit(&p) == 0, "a queued run is not being preempted");
    check_sse(&q, 1,
              xasprintf("{\"run\":%lld,\"status\":\"queued\",\"t\":1700000000510,\"preempted_by\":99}", (long long)a));
    check_sse(&p, 1, NULL); /* the requeue says it: the status did not change */

    /* a command run: its restart reports its steps again, over what it keeps */
    int64_t c = insert_run("preempted-command", true, T0 + 40);
    start_run(c, T0 + 41);
    attempt_started(c, 0, T0 + 42);
    steps(c, 4, true);
    q = (store_op){.kind = OP_RUN_REQUEUE, .run_id = c, .t = T0 + 520};
    q.u.requeue.from_epoch = q.u.requeue.from_global_step = NO_INT;
    CHECK(submit(&q) == 1, "a preempted command run is queued again");
    CHECK_ROWS("queued|4|1|1|1.0|0.1|NULL", PROGRESS, (long long)c);
    CHECK_ROWS("1,2,3,4|1,2,3,4|NULL|NULL", RECORDS(c));
    CHECK_ROWS("0|preempted|preempted", "SELECT attempt, status, reason FROM run_attempts WHERE run_id = %lld",
               (long long)c);
    check_sse(&q, 1, xasprintf("{\"run\":%lld,\"status\":\"queued\",\"t\":1700000000520,\"preempted_by\":null}",
                               (long long)c));
}

/* ---- restart, usage, reason ---- */

static void test_restart_usage_reason(void) {
    int64_t a = insert_run("restarted", false, T0 + 50);
    start_run(a, T0 + 51);
    store_op r = {.kind = OP_RUN_RESTART, .run_id = a, .t = T0 + 600};
    r.u.restart.attempt = 1;
    r.u.restart.reason = xstrdup("node n2 was lost");
    CHECK(submit(&r) == 1, "a running run is queued again to restart");
    CHECK_ROWS("queued|NULL|NULL|NULL|NULL|NULL",
               "SELECT status, devices, pid, pid_start_time, secret, slurm_job_id FROM runs WHERE id = %lld",
               (long long)a);
    r = (store_op){.kind = OP_RUN_RESTART, .run_id = a, .t = T0 + 601};
    r.u.restart.attempt = 2;
    CHECK(submit(&r) == 0, "a queued run is not restarted");
    r = (store_op){.kind = OP_RUN_RESTART, .run_id = a, .t = T0 + 600};
    r.u.restart.attempt = 1;
    r.u.restart.reason = "node n2 was lost";
    check_sse(&r, 1, xasprintf("{\"run\":%lld,\"status\":\"queued\",\"t\":1700000000600,\"restarting\":{\"attempt\":1,"
                               "\"reason\":\"node n2 was lost\"}}",
                               (long long)a));

    store_op u = {.kind = OP_USAGE, .t = T0 + 700};
    u.u.usage.owner = xstrdup("alice");
    u.u.usage.device_seconds = 12.5;
    CHECK(submit(&u) == 1, "alice's usage is kept");
    u = (store_op){.kind = OP_USAGE, .t = T0 + 701};
    u.u.usage.device_seconds = 3.0;
    CHECK(submit(&u) == 1, "the usage of nobody in particular is kept");
    u = (store_op){.kind = OP_USAGE, .t = T0 + 702};
    u.u.usage.owner = xstrdup("alice");
    u.u.usage.device_seconds = 20.25;
    CHECK(submit(&u) == 1, "alice's newer usage replaces her older");
    CHECK_ROWS("|3.0|1700000000701; alice|20.25|1700000000702",
               "SELECT owner, device_seconds, as_of FROM usage ORDER BY owner");

    int64_t s = insert_run("trial", false, T0 + 60);
    CHECK(finish(s, "stopped", "median stopping: below the median", NO_INT, T0 + 800) == 1, "the trial is stopped");
    store_op why = {.kind = OP_RUN_REASON, .run_id = s, .t = T0 + 810};
    why.u.finish.reason = xstrdup("median stopping: stopped for good");
    CHECK(submit(&why) == 1, "a stopped run's reason is rewritten");
    why = (store_op){.kind = OP_RUN_REASON, .run_id = a, .t = T0 + 811};
    why.u.finish.reason = xstrdup("not stopped");
    CHECK(submit(&why) == 0, "a queued run's reason is not");
    CHECK_ROWS("stopped|median stopping: stopped for good; queued|NULL",
               "SELECT status, reason FROM runs WHERE id IN (%lld, %lld) ORDER BY id DESC", (long long)s, (long long)a);
    why = (store_op){.kind = OP_RUN_REASON, .run_id = s, .t = T0 + 810};
    why.u.finish.reason = "median stopping: stopped for good";
    check_sse(&why, 1, xasprintf("{\"run\":%lld,\"status\":\"stopped\",\"t\":1700000000810,\"reason\":"
                                 "\"median stopping: stopped for good\"}",
                                 (long long)s));
}

int main(void) {
    char *dir = scratch_dir_make("run-ops");
    REQUIRE(dir, "mkdtemp: %s", strerror(errno));
    state_layout_init(dir);
    char err[512];
    REQUIRE(store_open(layout_db_path(), NULL, NULL, err, sizeof err) == 0, "store_open: %s", err);
    REQUIRE(sqlite3_open_v2(layout_db_path(), &DB, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK, "open the database");

    test_resume();
    test_preempt();
    test_restart_usage_reason();

    sqlite3_close(DB);
    store_close();
    state_layout_free();
    scratch_dir_remove(dir);
    free(dir);
    return test_done("run_ops");
}
