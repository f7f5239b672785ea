/* Unit tests of the scheduler (server/sched/include/scheduler.h) wired as main.c wires it:
 * the real supervisor starts its trainers (a shell script standing in for
 * ddp-trainer, waiting in its run directory until the test tells it how to exit)
 * and reports their starts and exits through its hooks; run states go to a real
 * store on a SQLite file in a fresh temporary directory. With 2 CPU slots: three
 * 1-rank runs, two start and one waits; finishing one starts the next; a 2-rank run
 * at the head of the queue is not overtaken by a 1-rank run behind it; canceling a
 * queued run finishes it as canceled without starting anything; canceling a started
 * one sends SIGTERM to its group, then SIGKILL after the grace period; a trainer's
 * exit status and last log line become the failure's reason; a trainer that cannot
 * be started fails its run and frees its slot; a hello needs the run's secret; the
 * snapshot's counts match at every step. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "scratch_dir.h"
#include "scheduler.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"
#include "supervisor.h"

#define GRACE_MS 3000

/* Waits for a condition the test cannot be told about (a child process's doing);
 * the deadline only keeps a broken build from hanging: nothing here is timed. */
#define WAIT_UNTIL(cond, ...)                                        \
    do {                                                             \
        int64_t until_ = mono_ms() + 60000;                          \
        bool ok_;                                                    \
        while (!(ok_ = (cond)) && mono_ms() < until_) usleep(10000); \
        CHECK(ok_, __VA_ARGS__);                                     \
    } while (0)

static const char *FAKE_TRAINER =
    "#!/bin/sh\n"
    "# Stands in for ddp-trainer: says hello in its log, notes its arguments and secret\n"
    "# (the secret last: once it is there, the rest is), then waits in its run\n"
    "# directory (./ready says so) until the test writes the exit status it is to end\n"
    "# with into ./stop.\n"
    "echo \"fake trainer: run $DDPD_RUN_ID\"\n"
    "printf '%s\\n' \"$@\" > args\n"
    "printf '%s' \"$DDPD_RUN_SECRET\" > secret.tmp && mv secret.tmp secret\n"
    "if [ -e ignore-sigterm ]; then trap 'echo \"fake trainer: SIGTERM ignored\"' TERM; fi\n"
    ": > ready\n"
    "while [ ! -s stop ]; do sleep 0.02; done\n"
    "code=$(cat stop)\n"
    "echo \"fake trainer: told to exit $code\"\n"
    "exit \"$code\"\n";


static bool write_file(const char *path, const char *text) {
    char *tmp = xasprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    bool ok = f && fputs(text, f) >= 0;
    if (f) ok = fclose(f) == 0 && ok;
    ok = ok && rename(tmp, path) == 0;
    free(tmp);
    return ok;
}

static char *run_dir_file(int64_t id, const char *name) {
    char *dir = layout_run_dir(id);
    char *p = xasprintf("%s/%s", dir, name);
    free(dir);
    return p;
}

static bool run_has_file(int64_t id, const char *name) {
    char *p = run_dir_file(id, name);
    bool there = access(p, F_OK) == 0;
    free(p);
    return there;
}

/* A run in the store, queued, with its directory (as runs_submit leaves it). */
static int64_t new_run(int world_size, bool make_dir, bool ignores_sigterm) {
    store_op op = {.kind = OP_RUN_INSERT, .t = now_ms()};
    op.u.insert.name = xstrdup("sched");
    op.u.insert.config = xstrdup("{}");
    op.u.insert.world_size = world_size;
    op.u.insert.device_kind = "cpu";
    int64_t id = store_submit_wait(&op);
    if (id > 0 && make_dir) {
        char *dir = layout_run_dir(id);
        if (mkdir(dir, 0755) != 0) fprintf(stderr, "mkdir %s: %s\n", dir, strerror(errno));
        free(dir);
        if (ignores_sigterm) {
            char *p = run_dir_file(id, "ignore-sigterm");
            write_file(p, "yes\n");
            free(p);
        }
    }
    return id;
}

static run_brief brief(int64_t id) {
    store_sync();
    run_brief b = {.id = 0, .status = RUN_STATUS_COUNT, .pid = NO_INT};
    store_get_brief(id, &b);
    return b;
}
static run_status status_of(int64_t id) { return brief(id).status; }
static bool started(int64_t id) { return brief(id).pid != NO_INT; }

static void tell_exit(int64_t id, int code) {
    char *p = run_dir_file(id, "stop");
    char text[16];
    snprintf(text, sizeof text, "%d\n", code);
    CHECK(write_file(p, text), "telling run %lld's trainer to exit", (long long)id);
    free(p);
}

static json_t *run_json(int64_t id) {
    store_sync();
    char *raw = NULL;
    json_t *o = store_run_json(id, &raw);
    free(raw);
    return o;
}

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }
static int64_t jint(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? json_integer_value(v) : NO_INT;
}
static bool str_is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }
static const char *or_none(const char *s) { return s ? s : "(none)"; }

static int cpu_free(void) {
    scheduler_snapshot s;
    scheduler_take_snapshot(&s);
    return s.cpu_free;
}

static void check_snapshot(int cpu_free, int active, int queued, const char *when) {
    scheduler_snapshot s;
    scheduler_take_snapshot(&s);
    CHECK(s.cpu_slots == 2 && s.gpus == 0 && s.gpu_free == 0, "%s: 2 CPU slots, no GPUs (%d, %d)", when, s.cpu_slots,
          s.gpus);
    CHECK(s.cpu_free == cpu_free && s.active == active && s.queued == queued,
          "%s: %d free, %d active, %d queued; got %d, %d, %d", when, cpu_free, active, queued, s.cpu_free, s.active,
          s.queued);
}

static void test_scheduling(const char *trainer, const char *data_root) {
    CHECK(scheduler_capacity(POOL_CPU) == 2 && scheduler_capacity(POOL_GPU) == 0, "capacity: 2 CPU slots, no GPUs");
    CHECK(str_is(pool_name(POOL_CPU), "cpu") && str_is(pool_unit(POOL_GPU), "GPUs"), "pool names");
    check_snapshot(2, 0, 0, "at first");

    /* three 1-rank runs on 2 slots: two start, one waits */
    int64_t a = new_run(1, true, false), b = new_run(1, true, false), c = new_run(1, true, true);
    REQUIRE(a > 0 && b == a + 1 && c == b + 1, "three runs in the store");
    scheduler_submit(&(run_needs){.id = a, .world_size = 1, .pool = POOL_CPU});
    scheduler_submit(&(run_needs){.id = b, .world_size = 1, .pool = POOL_CPU});
    scheduler_submit(&(run_needs){.id = c, .world_size = 1, .pool = POOL_CPU});
    check_snapshot(0, 2, 1, "three 1-rank runs submitted");
    CHECK(scheduler_queue_position(a) == 0 && scheduler_queue_position(b) == 0 && scheduler_queue_position(c) == 1,
          "a and b are not queued, c is first in the queue: %d %d %d", scheduler_queue_position(a),
          scheduler_queue_position(b), scheduler_queue_position(c));
    WAIT_UNTIL(started(a) && started(b), "runs %lld and %lld started", (long long)a, (long long)b);
    CHECK(status_of(a) == RUN_STARTING && status_of(b) == RUN_STARTING, "started runs are starting until a hello");
    CHECK(status_of(c) == RUN_QUEUED && !started(c) && !run_has_file(c, "trainer.log"),
          "run %lld waits: queued, no pid, no trainer started", (long long)c);
    json_t *ja = run_json(a), *jb = run_json(b);
    CHECK(str_is(json_string_value(json_array_get(json_object_get(ja, "devices"), 0)), "cpu:0") &&
              str_is(json_string_value(json_array_get(json_object_get(jb, "devices"), 0)), "cpu:1"),
          "no slot given twice: a on cpu:0, b on cpu:1");
    json_decref(ja);
    json_decref(jb);

    /* how the trainer was started */
    WAIT_UNTIL(run_has_file(a, "secret") && run_has_file(a, "args"), "run %lld's trainer is up", (long long)a);
    char *args_path = run_dir_file(a, "args"), *args = scratch_read_file(args_path);
    char *config = layout_run_path(a, RUN_FILE_CONFIG), *dir = layout_run_dir(a);
    char *want = xasprintf("--config\n%s\n--run-dir\n%s\n--events\n%s\n--data-root\n%s\n", config, dir,
                           layout_socket_path(), data_root);
    CHECK(str_is(args, want), "the trainer's arguments:\n%s\nwanted:\n%s", or_none(args), want);
    free(args_path);
    free(args);
    free(config);
    free(dir);
    free(want);
    char *log_path = layout_run_path(a, RUN_FILE_LOG), *log = scratch_read_file(log_path);
    char *banner = xasprintf("ddpd: starting %s for run %lld on cpu:0", trainer, (long long)a);
    CHECK(log && strstr(log, banner) && strstr(log, "fake trainer: run "), "the run's log has the banner and the trainer's output: %s",
          or_none(log));
    free(banner);
    free(log);
    free(log_path);

    /* a hello needs the run's secret */
    char *secret_path = run_dir_file(a, "secret"), *secret = scratch_read_file(secret_path);
    free(secret_path);
    CHECK(secret && strlen(secret) == 64, "the trainer got a 64-hex-digit secret: %s", or_none(secret));
    CHECK(!scheduler_hello(a, "not-the-secret", 0, -1), "a wrong secret is refused");
    CHECK(!scheduler_hello(a, NULL, 0, -1), "no secret is refused");
    CHECK(!scheduler_hello(c, secret, 0, -1), "a queued run takes no hello");
    CHECK(!scheduler_hello(c + 1000, secret, 0, -1), "an unknown run takes no hello");
    CHECK(status_of(a) == RUN_STARTING, "still starting after the refused hellos");
    CHECK(scheduler_hello(a, secret, -1, -1), "the launcher's hello with the secret");
    CHECK(status_of(a) == RUN_STARTING, "the launcher's hello does not make it running");
    CHECK(scheduler_hello(a, secret, 0, -1), "rank 0's hello with the secret");
    CHECK(status_of(a) == RUN_RUNNING, "running once a rank said hello");

    /* a launcher's word counts from a connection of the run's start now only: one that
     * said hello with an earlier start's secret (a start before a resize or a restart)
     * is refused even from the launcher's own pid (a pid the kernel gave again) */
    long launcher = (long)brief(a).pid;
    store_op late = {.kind = OP_ATTEMPT_ENDED, .run_id = a};
    late.u.attempt.attempt = 0;
    late.u.attempt.status = xstrdup("failed");
    late.u.attempt.failing_rank = late.u.attempt.exit_code = late.u.attempt.signal = NO_INT;
    char earlier[65];
    snprintf(earlier, sizeof earlier, "%s", secret);
    earlier[0] = earlier[0] == 'a' ? 'b' : 'a'; /* another start's secret */
    CHECK(launcher > 0 && !scheduler_attempt(&late, launcher, earlier),
          "an attempt's end from the launcher's pid on an earlier start's connection is refused");
    store_op_free(&late);
    store_op now_op = {.kind = OP_ATTEMPT_STARTED, .run_id = a};
    now_op.u.attempt.attempt = 0;
    now_op.u.attempt.master_port = NO_INT;
    CHECK(scheduler_attempt(&now_op, launcher, secret), "the launcher's word on this start's connection is taken");
    CHECK(scheduler_attempt(&now_op, 0, NULL), "the journal's word (no connection) is taken");
    CHECK(!scheduler_attempt(&now_op, launcher + 100000, secret), "another process of this start is not its launcher");
    store_op_free(&now_op);
    free(secret);

    /* a 2-rank run and a 1-rank run behind it; cancel the 1-rank one while queued */
    int64_t d = new_run(2, true, false), e = new_run(1, true, false);
    scheduler_submit(&(run_needs){.id = d, .world_size = 2, .pool = POOL_CPU});
    scheduler_submit(&(run_needs){.id = e, .world_size = 1, .pool = POOL_CPU});
    check_snapshot(0, 2, 3, "d (2 ranks) and e queued");
    CHECK(scheduler_queue_position(c) == 1 && scheduler_queue_position(d) == 2 && scheduler_queue_position(e) == 3,
          "the queue: c, d, e");
    CHECK(scheduler_cancel(e, "canceled while queued") == CANCEL_DONE, "canceling a queued run is done at once");
    CHECK(status_of(e) == RUN_CANCELED, "run %lld is canceled", (long long)e);
    json_t *je = run_json(e);
    CHECK(str_is(jstr(je, "reason"), "canceled while queued") && json_is_null(json_object_get(je, "pid")) &&
              json_is_null(json_object_get(je, "started_at")),
          "with its reason, never started: %s", or_none(jstr(je, "reason")));
    json_decref(je);
    CHECK(!run_has_file(e, "trainer.log"), "no trainer was started for it");
    CHECK(scheduler_cancel(e, "again") == CANCEL_NOT_LIVE, "a finished run is not live");
    check_snapshot(0, 2, 2, "e canceled");

    /* a finishes: the queued c starts on its slot */
    tell_exit(a, 0);
    WAIT_UNTIL(status_of(a) == RUN_SUCCEEDED, "run %lld succeeded", (long long)a);
    json_t *j = run_json(a);
    CHECK(jint(j, "exit_code") == 0 && json_is_null(json_object_get(j, "reason")), "exit code 0, no reason");
    json_decref(j);
    WAIT_UNTIL(started(c), "run %lld started when a slot was free", (long long)c);
    j = run_json(c);
    CHECK(str_is(json_string_value(json_array_get(json_object_get(j, "devices"), 0)), "cpu:0"), "on a's slot");
    json_decref(j);
    check_snapshot(0, 2, 1, "a finished, c started");

    /* b fails: one slot is free, but d needs two and f behind it does not overtake */
    int64_t f = new_run(1, true, false);
    scheduler_submit(&(run_needs){.id = f, .world_size = 1, .pool = POOL_CPU});
    tell_exit(b, 3);
    WAIT_UNTIL(status_of(b) == RUN_FAILED, "run %lld failed", (long long)b);
    j = run_json(b);
    const char *reason = jstr(j, "reason");
    CHECK(reason && strstr(reason, "exited with status 3") && strstr(reason, "fake trainer: told to exit 3") &&
              jint(j, "exit_code") == 3,
          "the reason says how it ended and its last log line: %s", or_none(reason));
    json_decref(j);
    check_snapshot(1, 1, 2, "b failed: d waits for 2 slots, f behind it");
    CHECK(scheduler_queue_position(d) == 1 && scheduler_queue_position(f) == 2, "the queue: d, f");
    CHECK(!started(f), "f did not overtake d");

    /* cancel the started c: SIGTERM (which its trainer ignores), then SIGKILL */
    WAIT_UNTIL(run_has_file(c, "ready"), "run %lld's trainer is set to ignore SIGTERM", (long long)c);
    CHECK(scheduler_cancel(c, "canceled by the test") == CANCEL_SIGNALED, "canceling a started run signals it");
    CHECK(scheduler_cancel(c, "twice") == CANCEL_ALREADY, "a second cancel: already canceling");
    CHECK(status_of(c) == RUN_CANCELING, "run %lld is canceling", (long long)c);
    WAIT_UNTIL(status_of(c) == RUN_CANCELED, "run %lld canceled", (long long)c);
    j = run_json(c);
    CHECK(str_is(jstr(j, "reason"), "canceled by the test") && jint(j, "exit_signal") == SIGKILL &&
              json_is_null(json_object_get(j, "exit_code")),
          "canceled with its reason, killed by SIGKILL after the grace period: %s, signal %lld",
          or_none(jstr(j, "reason")), (long long)jint(j, "exit_signal"));
    json_decref(j);
    log_path = layout_run_path(c, RUN_FILE_LOG);
    log = scratch_read_file(log_path);
    CHECK(log && strstr(log, "fake trainer: SIGTERM ignored"), "its trainer got SIGTERM first: %s", or_none(log));
    free(log);
    free(log_path);

    /* both slots free: d starts on them; f still waits */
    WAIT_UNTIL(started(d), "run %lld (2 ranks) started", (long long)d);
    j = run_json(d);
    json_t *dv = json_object_get(j, "devices");
    CHECK(json_array_size(dv) == 2 && str_is(json_string_value(json_array_get(dv, 0)), "cpu:0") &&
              str_is(json_string_value(json_array_get(dv, 1)), "cpu:1"),
          "d has both slots");
    json_decref(j);
    check_snapshot(0, 1, 1, "d started");
    tell_exit(d, 0);
    WAIT_UNTIL(status_of(d) == RUN_SUCCEEDED, "run %lld succeeded", (long long)d);
    WAIT_UNTIL(started(f), "run %lld started after d", (long long)f);
    check_snapshot(1, 1, 0, "f started");
    tell_exit(f, 0);
    WAIT_UNTIL(status_of(f) == RUN_SUCCEEDED, "run %lld succeeded", (long long)f);

    /* a trainer that cannot be started: its run fails, its slot comes back */
    int64_t g = new_run(1, false, false);
    scheduler_submit(&(run_needs){.id = g, .world_size = 1, .pool = POOL_CPU});
    WAIT_UNTIL(status_of(g) == RUN_FAILED, "run %lld failed to start", (long long)g);
    j = run_json(g);
    CHECK(jstr(j, "reason") && strstr(jstr(j, "reason"), "cannot open the run's directory"),
          "the reason says why it could not start: %s", or_none(jstr(j, "reason")));
    json_decref(j);
    WAIT_UNTIL(cpu_free() == 2, "the slot came back");
    check_snapshot(2, 0, 0, "at the end");
    CHECK(scheduler_cancel(g, "late") == CANCEL_NOT_LIVE, "nothing left to cancel");

    int64_t counts[RUN_STATUS_COUNT];
    store_sync();
    CHECK(store_count_by_status(counts) == 0 && counts[RUN_SUCCEEDED] == 3 && counts[RUN_FAILED] == 2 &&
              counts[RUN_CANCELED] == 2 && counts[RUN_QUEUED] == 0 && counts[RUN_RUNNING] == 0,
          "the store agrees: 3 succeeded, 2 failed, 2 canceled (%lld, %lld, %lld)", (long long)counts[RUN_SUCCEEDED],
          (long long)counts[RUN_FAILED], (long long)counts[RUN_CANCELED]);
}

int main(void) {
    /* as main.c does before any thread: SIGCHLD goes to the supervisor's signalfd */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    char *dir = scratch_dir_make("scheduler");
    REQUIRE(dir, "mkdtemp: %s", strerror(errno));
    state_layout_init(dir);
    REQUIRE(mkdir(layout_runs_dir(), 0755) == 0, "mkdir %s: %s", layout_runs_dir(), strerror(errno));
    char *trainer = xasprintf("%s/fake-trainer.sh", dir);
    REQUIRE(write_file(trainer, FAKE_TRAINER) && chmod(trainer, 0755) == 0, "writing %s", trainer);
    char *data_root = xasprintf("%s/data", dir);
    REQUIRE(mkdir(data_root, 0755) == 0, "mkdir %s", data_root);

    char err[512];
    REQUIRE(store_open(layout_db_path(), NULL, NULL, err, sizeof err) == 0, "store_open: %s", err);
    const char *roots[] = {data_root};
    scheduler_config sc = {.trainer = trainer, .data_roots = roots, .n_data_roots = 1, .gpus = NULL, .n_gpus = 0,
                           .slots = 2, .cancel_grace_ms = GRACE_MS};
    scheduler_init(&sc);
    static const supervisor_hooks supervisor_reports = {scheduler_spawned, scheduler_child_exited, scheduler_tick};
    REQUIRE(supervisor_start(&supervisor_reports) == 0, "supervisor_start");

    test_scheduling(trainer, data_root);

    scheduler_shutdown();
    supervisor_stop();
    store_read_release();
    store_close();
    state_layout_free();
    scratch_dir_remove(dir);
    free(dir);
    free(trainer);
    free(data_root);
    return test_done("test_scheduler");
}
