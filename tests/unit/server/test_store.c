/* Unit tests of the run store (server/store/store.c, store_read.c) on a real SQLite
 * file in a fresh temporary state directory: a run's life (created, starting,
 * running, finished) and what its trainer reports (hello, steps, heartbeats, rank
 * status, epochs, checkpoints) go in through the writer's queue (store_submit,
 * store_submit_now, store_submit_wait, store_sync) and come back through the reads
 * as the API's JSON: statuses, progress, series, epochs, ranks, checkpoints, times
 * in order, exit codes and reasons. Ops on a run that does not exist (or is in the
 * wrong state) change nothing; an op the database refuses loses nothing else; a
 * trainer's events for a finished or deleted run change nothing (a connection that
 * outlived its run); a store opened again after closing keeps everything and never
 * reuses an id. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "scratch_dir.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"

#define T0 1700000000000LL /* unix ms: 2023-11-14T22:13:20.000Z */

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }
static int64_t jint(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? json_integer_value(v) : NO_INT;
}
static double jreal(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}
static bool jnull(const json_t *o, const char *k) { return json_is_null(json_object_get(o, k)); }
static bool str_is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }
static const char *or_none(const char *s) { return s ? s : "(none)"; }

static int64_t insert_run(const char *name, const char *config, int world_size, const char *device_kind, int64_t t) {
    store_op op = {.kind = OP_RUN_INSERT, .t = t};
    op.u.insert.name = xstrdup(name);
    op.u.insert.config = xstrdup(config);
    op.u.insert.world_size = world_size;
    op.u.insert.device_kind = device_kind;
    return store_submit_wait(&op);
}

static int64_t by_id(store_op_kind kind, int64_t id, int64_t t) {
    store_op op = {.kind = kind, .run_id = id, .t = t};
    return store_submit_wait(&op);
}

static int64_t finish(int64_t id, const char *status, const char *reason, int64_t code, int64_t sig, int64_t t) {
    store_op op = {.kind = OP_RUN_FINISH, .run_id = id, .t = t};
    op.u.finish.status = status;
    op.u.finish.reason = xstrdup(reason);
    op.u.finish.exit_code = code;
    op.u.finish.exit_signal = sig;
    return store_submit_wait(&op);
}

static int64_t starting(int64_t id, const char *devices, int64_t pid, int64_t t) {
    store_op op = {.kind = OP_RUN_STARTING, .run_id = id, .t = t};
    op.u.starting.devices = xstrdup(devices);
    op.u.starting.pid = pid;
    return store_submit_wait(&op);
}

/* GET /runs/{id} as the API writes it: the row's JSON with its raw members. */
static json_t *run_doc(int64_t id) {
    char *raw = NULL;
    json_t *o = store_run_json(id, &raw);
    if (!o) return NULL;
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    char *whole = xasprintf("%.*s,%s}", (int)strlen(text) - 1, text, raw);
    json_error_t jerr;
    json_t *doc = json_loads(whole, 0, &jerr);
    if (!doc) fprintf(stderr, "run %lld: not JSON (%s): %s\n", (long long)id, jerr.text, whole);
    free(text);
    free(raw);
    free(whole);
    return doc;
}

static int count_runs(void) {
    int64_t counts[RUN_STATUS_COUNT];
    if (store_count_by_status(counts) != 0) return -1;
    int64_t n = 0;
    for (int i = 0; i < RUN_STATUS_COUNT; i++) n += counts[i];
    return (int)n;
}

static void iso(int64_t ms, char out[32]) { format_iso8601(ms, out); }

/* A run's life and what its trainer reports, written and read back. */
static int64_t test_life(void) {
    int64_t a = insert_run("alpha", "{\"model\":\"mlp\",\"epochs\":2}", 2, "cpu", T0);
    CHECK(a > 0, "insert returns the new run's id, got %lld", (long long)a);
    int64_t b = insert_run("beta", "{}", 1, "cpu", T0 + 10);
    CHECK(b == a + 1, "ids follow submission order: %lld then %lld", (long long)a, (long long)b);

    run_brief br;
    CHECK(store_get_brief(a, &br) == 1, "run %lld is there", (long long)a);
    CHECK(br.id == a && br.status == RUN_QUEUED && br.world_size == 2 && str_is(br.device_kind, "cpu") &&
              br.pid == NO_INT,
          "a new run is queued, world 2 on cpu, no pid: status %d world %d kind %s", br.status, br.world_size,
          br.device_kind);

    json_t *doc = run_doc(a);
    REQUIRE(doc, "GET /runs/%lld has a document", (long long)a);
    char t0[32];
    iso(T0, t0);
    CHECK(str_is(t0, "2023-11-14T22:13:20.000Z"), "times are ISO 8601 UTC with milliseconds: %s", t0);
    CHECK(str_is(jstr(doc, "status"), "queued") && str_is(jstr(doc, "name"), "alpha"), "queued run alpha: %s %s",
          jstr(doc, "status"), jstr(doc, "name"));
    CHECK(str_is(jstr(doc, "created_at"), t0), "created_at %s", jstr(doc, "created_at"));
    CHECK(jnull(doc, "started_at") && jnull(doc, "finished_at") && jnull(doc, "pid") && jnull(doc, "reason"),
          "a queued run has no start, end, pid or reason");
    CHECK(json_array_size(json_object_get(doc, "devices")) == 0, "no devices before it starts");
    CHECK(jint(json_object_get(doc, "config"), "epochs") == 2 &&
              str_is(jstr(json_object_get(doc, "config"), "model"), "mlp"),
          "the config comes back as submitted");
    CHECK(json_is_array(json_object_get(doc, "checkpoints")) && json_array_size(json_object_get(doc, "checkpoints")) == 0,
          "no checkpoints yet");
    json_decref(doc);

    /* starting (never blocks: the scheduler's way), then running */
    store_op st = {.kind = OP_RUN_STARTING, .run_id = a, .t = T0 + 1000};
    st.u.starting.devices = xstrdup("[\"cpu:0\",\"cpu:1\"]");
    st.u.starting.pid = 4242;
    store_submit_now(&st);
    store_sync();
    CHECK(store_get_brief(a, &br) == 1 && br.status == RUN_STARTING && br.pid == 4242,
          "after sync the run is starting with its pid: status %d pid %lld", br.status, (long long)br.pid);
    CHECK(by_id(OP_RUN_RUNNING, a, T0 + 1100) == 1, "starting -> running changes the run");
    CHECK(by_id(OP_RUN_RUNNING, a, T0 + 1200) == 0, "running again changes nothing");
    CHECK(starting(a, "[\"cpu:5\"]", 1, T0 + 1300) == 0, "a running run cannot be started again");

    /* what the trainer reports, queued in one batch as ingest does */
    store_op ev[32];
    size_t n = 0;
    for (int rank = 0; rank < 2; rank++) {
        store_op h = {.kind = OP_HELLO, .run_id = a, .rank = rank, .t = T0 + 1500 + rank};
        h.u.hello.pid = 5000 + rank;
        h.u.hello.host = xstrdup("node-a");
        h.u.hello.device = xasprintf("cpu:%d", rank);
        h.u.hello.total_steps = 10;
        h.u.hello.epochs = 2;
        h.u.hello.steps_per_epoch = 5;
        ev[n++] = h;
    }
    for (int gs = 1; gs <= 10; gs++) {
        store_op s = {.kind = OP_STEP, .run_id = a, .rank = 0, .t = T0 + 2000 + 100 * gs};
        s.u.step.global_step = gs;
        s.u.step.epoch = (gs - 1) / 5;
        s.u.step.step = (gs - 1) % 5;
        s.u.step.loss = 1.0 / gs;
        s.u.step.lr = 0.1;
        s.u.step.samples_per_s = 100.0 + gs;
        ev[n++] = s;
    }
    store_op hb = {.kind = OP_HEARTBEAT, .run_id = a, .rank = 1, .t = T0 + 3100};
    hb.u.heartbeat.global_step = 10;
    hb.u.heartbeat.step_ms = 12.5;
    hb.u.heartbeat.gpu_mem_used = NO_INT;
    hb.u.heartbeat.gpu_mem_total = NO_INT;
    ev[n++] = hb;
    store_op rs = {.kind = OP_STATUS, .run_id = a, .rank = 1, .t = T0 + 3200};
    rs.u.status.state = xstrdup("training");
    rs.u.status.detail = xstrdup("epoch 1");
    ev[n++] = rs;
    for (int e = 0; e < 2; e++) {
        store_op ep = {.kind = OP_EPOCH, .run_id = a, .rank = 0, .t = T0 + 2600 + 500 * e};
        ep.u.epoch.epoch = e;
        ep.u.epoch.lr = 0.1;
        ep.u.epoch.train_loss = 0.5 - 0.1 * e;
        ep.u.epoch.test_loss = 0.6 - 0.1 * e;
        ep.u.epoch.test_acc = 0.8 + 0.05 * e;
        ep.u.epoch.seconds = 1.5;
        ep.u.epoch.samples_per_s = NAN; /* unknown: stored as NULL */
        ev[n++] = ep;
    }
    store_op ck = {.kind = OP_CHECKPOINT, .run_id = a, .rank = 0, .t = T0 + 2700};
    ck.u.checkpoint.epoch = 0;
    ck.u.checkpoint.global_step = 5;
    ck.u.checkpoint.bytes = 1234;
    ck.u.checkpoint.path = xstrdup("checkpoints/step-5.safetensors");
    ev[n++] = ck;
    store_submit(ev, n);
    store_sync();

    doc = run_doc(a);
    REQUIRE(doc, "GET /runs/%lld has a document", (long long)a);
    json_t *p = json_object_get(doc, "progress");
    CHECK(str_is(jstr(doc, "status"), "running"), "status %s", jstr(doc, "status"));
    CHECK(jint(doc, "pid") == 4242, "pid %lld", (long long)jint(doc, "pid"));
    json_t *devices = json_object_get(doc, "devices");
    CHECK(json_array_size(devices) == 2 && str_is(json_string_value(json_array_get(devices, 0)), "cpu:0") &&
              str_is(json_string_value(json_array_get(devices, 1)), "cpu:1"),
          "the devices it was given");
    CHECK(jint(p, "global_step") == 10 && jint(p, "total_steps") == 10 && jint(p, "epochs") == 2 &&
              jint(p, "epoch") == 1 && jint(p, "step") == 4,
          "progress from the hello and the newest step: gs %lld of %lld, epoch %lld step %lld",
          (long long)jint(p, "global_step"), (long long)jint(p, "total_steps"), (long long)jint(p, "epoch"),
          (long long)jint(p, "step"));
    CHECK_NEAR(jreal(p, "fraction"), 1.0, 0, 1e-12, "fraction: 10 of 10 steps");
    CHECK_NEAR(jreal(p, "loss"), 0.1, 1e-12, 0, "the newest step's loss");
    CHECK_NEAR(jreal(p, "samples_per_s"), 110.0, 1e-12, 0, "the newest step's samples/s");
    json_t *ckpts = json_object_get(doc, "checkpoints");
    CHECK(json_array_size(ckpts) == 1, "one checkpoint, got %zu", json_array_size(ckpts));
    json_t *c0 = json_array_get(ckpts, 0);
    char when[32];
    iso(T0 + 2700, when);
    CHECK(jint(c0, "global_step") == 5 && jint(c0, "epoch") == 0 && jint(c0, "bytes") == 1234 &&
              str_is(jstr(c0, "path"), "checkpoints/step-5.safetensors") && str_is(jstr(c0, "created_at"), when),
          "the checkpoint as reported: gs %lld path %s at %s", (long long)jint(c0, "global_step"), jstr(c0, "path"),
          jstr(c0, "created_at"));
    json_decref(doc);

    int64_t first = 0, last = 0;
    CHECK(store_series_range(a, NULL, NO_INT, &first, &last) == 1 && first == 1 && last == 10,
          "the series holds steps 1..10: %lld..%lld", (long long)first, (long long)last);
    CHECK(store_series_range(a, NULL, 7, &first, &last) == 1 && first == 8 && last == 10,
          "after step 7: %lld..%lld", (long long)first, (long long)last);
    CHECK(store_series_range(a, NULL, 10, &first, &last) == 0, "nothing after the last step");
    downsampler d;
    ds_init(&d, 1, 10, 0);
    CHECK(store_series_scan(a, METRIC_LOSS, NULL, NO_INT, &d) == 0, "the loss series reads");
    ds_finish(&d);
    bool in_order = d.n_out == 10;
    for (size_t i = 0; in_order && i < d.n_out; i++)
        in_order = d.out[i].step == (int64_t)i + 1 && fabs(d.out[i].value - 1.0 / (double)(i + 1)) < 1e-12 &&
                   d.out[i].t == T0 + 2000 + 100 * ((int64_t)i + 1);
    CHECK(in_order, "every step's loss and time, in step order (%zu points)", d.n_out);
    ds_free(&d);
    ds_init(&d, 1, 10, 0);
    store_series_scan(a, METRIC_SAMPLES_PER_S, NULL, 5, &d);
    ds_finish(&d);
    CHECK(d.n_out == 5 && d.out[0].step == 6 && fabs(d.out[0].value - 106.0) < 1e-12,
          "samples/s after step 5: %zu points, first step %lld", d.n_out, d.n_out ? (long long)d.out[0].step : -1LL);
    ds_free(&d);

    json_t *epochs = store_epochs_json(a);
    CHECK(json_array_size(epochs) == 2, "two epochs, got %zu", json_array_size(epochs));
    for (size_t e = 0; e < json_array_size(epochs); e++) {
        json_t *x = json_array_get(epochs, e);
        iso(T0 + 2600 + 500 * (int64_t)e, when);
        CHECK(jint(x, "epoch") == (int64_t)e, "epochs in order: %lld at %zu", (long long)jint(x, "epoch"), e);
        CHECK_NEAR(jreal(x, "test_acc"), 0.8 + 0.05 * (double)e, 1e-12, 0, "an epoch's test_acc");
        CHECK_NEAR(jreal(x, "train_loss"), 0.5 - 0.1 * (double)e, 1e-12, 0, "an epoch's train_loss");
        CHECK(jnull(x, "samples_per_s"), "an unknown value is null");
        CHECK(str_is(jstr(x, "finished_at"), when), "epoch %zu finished_at %s", e, jstr(x, "finished_at"));
    }
    json_decref(epochs);

    json_t *ranks = store_ranks_json(a);
    CHECK(json_array_size(ranks) == 2, "two ranks, got %zu", json_array_size(ranks));
    json_t *r0 = json_array_get(ranks, 0), *r1 = json_array_get(ranks, 1);
    CHECK(jint(r0, "rank") == 0 && jint(r0, "pid") == 5000 && str_is(jstr(r0, "host"), "node-a") &&
              str_is(jstr(r0, "device"), "cpu:0") && str_is(jstr(r0, "state"), "init"),
          "rank 0 from its hello: pid %lld host %s device %s state %s", (long long)jint(r0, "pid"), jstr(r0, "host"),
          jstr(r0, "device"), jstr(r0, "state"));
    CHECK(jnull(r0, "gpu"), "a CPU rank has no GPU");
    CHECK(jint(r1, "rank") == 1 && str_is(jstr(r1, "state"), "training") && str_is(jstr(r1, "detail"), "epoch 1") &&
              jint(r1, "global_step") == 10,
          "rank 1 from its status and heartbeat: state %s detail %s gs %lld", jstr(r1, "state"), jstr(r1, "detail"),
          (long long)jint(r1, "global_step"));
    CHECK_NEAR(jreal(r1, "step_ms"), 12.5, 1e-12, 0, "rank 1's step_ms");
    iso(T0 + 3200, when);
    CHECK(str_is(jstr(r1, "last_seen"), when), "rank 1 last seen at its newest event: %s", jstr(r1, "last_seen"));
    json_decref(ranks);

    /* finishing */
    CHECK(by_id(OP_RUN_DELETE, a, T0 + 4000) == 0, "a running run is not deleted");
    CHECK(finish(a, "succeeded", NULL, 0, NO_INT, T0 + 9000) == 1, "running -> succeeded");
    CHECK(finish(a, "failed", "too late", 1, NO_INT, T0 + 9500) == 0, "a finished run's status never changes");
    CHECK(by_id(OP_RUN_CANCELING, a, T0 + 9600) == 0, "a finished run cannot be canceling");
    doc = run_doc(a);
    REQUIRE(doc, "GET /runs/%lld has a document", (long long)a);
    char t_start[32], t_end[32];
    iso(T0 + 1000, t_start);
    iso(T0 + 9000, t_end);
    const char *c_at = jstr(doc, "created_at"), *s_at = jstr(doc, "started_at"), *f_at = jstr(doc, "finished_at");
    CHECK(str_is(jstr(doc, "status"), "succeeded") && jint(doc, "exit_code") == 0 && jnull(doc, "exit_signal") &&
              jnull(doc, "reason"),
          "succeeded, exit code 0, no signal, no reason: %s", jstr(doc, "status"));
    CHECK(str_is(s_at, t_start) && str_is(f_at, t_end), "started_at %s, finished_at %s", or_none(s_at), or_none(f_at));
    CHECK(c_at && s_at && f_at && strcmp(c_at, s_at) < 0 && strcmp(s_at, f_at) < 0,
          "created < started < finished: %s %s %s", or_none(c_at), or_none(s_at), or_none(f_at));
    p = json_object_get(doc, "progress");
    CHECK_NEAR(jreal(p, "fraction"), 1.0, 0, 1e-12, "a succeeded run is done");
    CHECK_NEAR(jreal(p, "eta_s"), 0.0, 0, 1e-12, "a succeeded run has nothing left");
    json_decref(doc);

    /* a queued run canceled: its reason is kept */
    CHECK(finish(b, "canceled", "canceled before it started", NO_INT, NO_INT, T0 + 9100) == 1, "queued -> canceled");
    CHECK(starting(b, "[\"cpu:0\"]", 77, T0 + 9200) == 0, "a canceled run is never started");
    doc = run_doc(b);
    REQUIRE(doc, "GET /runs/%lld has a document", (long long)b);
    CHECK(str_is(jstr(doc, "status"), "canceled") && str_is(jstr(doc, "reason"), "canceled before it started") &&
              jnull(doc, "exit_code") && jnull(doc, "started_at") && jnull(doc, "pid"),
          "canceled with its reason, never started: %s (%s)", jstr(doc, "status"), jstr(doc, "reason"));
    json_decref(doc);

    /* an op the database refuses (no such device kind) fails alone */
    CHECK(insert_run("bad", "{}", 1, "tpu", T0 + 9300) == -1, "an insert the schema refuses returns -1");
    CHECK(count_runs() == 2, "nothing was added by it: %d runs", count_runs());
    return a;
}

/* Ops on a run that does not exist change nothing, and the writer goes on. */
static void test_unknown_run(int64_t known) {
    int64_t ghost = known + 1000;
    CHECK(starting(ghost, "[\"cpu:0\"]", 99, T0) == 0, "starting an unknown run changes nothing");
    CHECK(by_id(OP_RUN_RUNNING, ghost, T0) == 0, "running: nothing");
    CHECK(by_id(OP_RUN_CANCELING, ghost, T0) == 0, "canceling: nothing");
    CHECK(finish(ghost, "failed", "no such run", 1, NO_INT, T0) == 0, "finishing: nothing");
    CHECK(by_id(OP_RUN_DELETE, ghost, T0) == 0, "deleting: nothing");
    run_brief br;
    CHECK(store_get_brief(ghost, &br) == 0, "still no run %lld", (long long)ghost);
    char *raw = NULL;
    CHECK(store_run_json(ghost, &raw) == NULL && raw == NULL, "GET of an unknown run: none");
    json_t *e = store_epochs_json(ghost);
    CHECK(e && json_array_size(e) == 0, "an unknown run has no epochs");
    json_decref(e);
    int64_t f, l;
    CHECK(store_series_range(ghost, NULL, NO_INT, &f, &l) == 0, "an unknown run has no steps");
    CHECK(count_runs() == 2, "no run appeared: %d", count_runs());
    CHECK(store_get_brief(known, &br) == 1 && br.status == RUN_SUCCEEDED, "the known run is untouched");
}

/* Lists, pages and counts over the runs there are. */
static int64_t test_lists(int64_t a) {
    int64_t b = a + 1;
    int64_t counts[RUN_STATUS_COUNT];
    CHECK(store_count_by_status(counts) == 0, "counts read");
    CHECK(counts[RUN_SUCCEEDED] == 1 && counts[RUN_CANCELED] == 1 && counts[RUN_QUEUED] == 0 &&
              counts[RUN_RUNNING] == 0 && counts[RUN_FAILED] == 0,
          "one succeeded, one canceled: %lld %lld", (long long)counts[RUN_SUCCEEDED], (long long)counts[RUN_CANCELED]);

    int64_t next = -1;
    run_filter all;
    run_filter_init(&all);
    json_t *pg = store_runs_page(&all, 10, &next);
    json_t *runs = json_object_get(pg, "runs");
    CHECK(json_array_size(runs) == 2 && jint(json_array_get(runs, 0), "id") == b &&
              jint(json_array_get(runs, 1), "id") == a && next == 0,
          "all runs, newest first, one page: %zu runs, next %lld", json_array_size(runs), (long long)next);
    json_decref(pg);
    pg = store_runs_page(&all, 1, &next);
    CHECK(json_array_size(json_object_get(pg, "runs")) == 1 && next == b, "a page of one: next before %lld",
          (long long)next);
    json_decref(pg);
    all.before = next;
    pg = store_runs_page(&all, 1, &next);
    runs = json_object_get(pg, "runs");
    CHECK(json_array_size(runs) == 1 && jint(json_array_get(runs, 0), "id") == a && next == 0,
          "the second page is the last: next %lld", (long long)next);
    json_decref(pg);
    run_filter done_ones;
    run_filter_init(&done_ones);
    done_ones.statuses[done_ones.n_statuses++] = "succeeded";
    done_ones.statuses[done_ones.n_statuses++] = "failed";
    pg = store_runs_page(&done_ones, 10, &next);
    runs = json_object_get(pg, "runs");
    CHECK(json_array_size(runs) == 1 && jint(json_array_get(runs, 0), "id") == a, "filtered by status: %zu runs",
          json_array_size(runs));
    json_decref(pg);

    run_brief *un = NULL;
    CHECK(store_list_unfinished(&un) == 0, "no unfinished runs");
    free(un);
    int64_t c = insert_run("gamma", "{}", 1, "gpu", T0 + 20000);
    CHECK(c == b + 1, "the next id: %lld", (long long)c);
    un = NULL;
    int n = store_list_unfinished(&un);
    CHECK(n == 1 && un[0].id == c && un[0].status == RUN_QUEUED && str_is(un[0].device_kind, "gpu"),
          "the queued gpu run is unfinished: %d", n);
    free(un);

    /* deleting a finished run takes everything recorded of it */
    CHECK(by_id(OP_RUN_DELETE, b, T0 + 21000) == 1, "a canceled run is deleted");
    run_brief br;
    CHECK(store_get_brief(b, &br) == 0, "run %lld is gone", (long long)b);
    CHECK(count_runs() == 2, "two runs left: %d", count_runs());
    return c;
}

/* One of each event a trainer sends, for run `id` at global step `g`; their results. */
static void trainer_events(int64_t id, int64_t g, int64_t results[6]) {
    store_op ops[6] = {
        {.kind = OP_HELLO, .run_id = id, .rank = 0, .t = T0 + 40000 + g},
        {.kind = OP_STATUS, .run_id = id, .rank = 0, .t = T0 + 40001 + g},
        {.kind = OP_STEP, .run_id = id, .rank = 0, .t = T0 + 40002 + g},
        {.kind = OP_HEARTBEAT, .run_id = id, .rank = 1, .t = T0 + 40003 + g},
        {.kind = OP_EPOCH, .run_id = id, .rank = 0, .t = T0 + 40004 + g},
        {.kind = OP_CHECKPOINT, .run_id = id, .rank = 0, .t = T0 + 40005 + g},
    };
    ops[0].u.hello = (__typeof__(ops[0].u.hello)){.pid = 7, .total_steps = 100 * g, .epochs = NO_INT,
                                              .steps_per_epoch = NO_INT, .host = xstrdup("h"), .device = xstrdup("cpu")};
    ops[1].u.status.state = xstrdup("training");
    ops[2].u.step = (__typeof__(ops[2].u.step)){.epoch = 0, .step = g - 1, .global_step = g, .loss = 0.5, .lr = 0.1,
                                            .samples_per_s = 10, .series = json_pack("{s:f}", "grad_norm", 1.5)};
    ops[3].u.heartbeat = (__typeof__(ops[3].u.heartbeat)){.global_step = g, .step_ms = 2.0, .gpu_mem_used = NO_INT,
                                                      .gpu_mem_total = NO_INT};
    ops[4].u.epoch = (__typeof__(ops[4].u.epoch)){.epoch = g, .lr = 0.1, .train_loss = 0.4, .test_loss = 0.5,
                                              .test_acc = 0.8, .seconds = 1, .samples_per_s = 10};
    ops[5].u.checkpoint = (__typeof__(ops[5].u.checkpoint)){.epoch = g, .global_step = g, .bytes = 10,
                                                        .path = xasprintf("checkpoints/ckpt-%lld.safetensors", (long long)g)};
    for (int i = 0; i < 6; i++) results[i] = store_submit_wait(&ops[i]);
}

/* Rows anything holds of run `id` (ranks, steps, series, epochs, checkpoints, events),
 * through a connection of its own. */
static int64_t rows_of(int64_t id) {
    sqlite3 *db = NULL;
    int64_t n = -1;
    if (sqlite3_open_v2(layout_db_path(), &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        const char *sql = "SELECT (SELECT count(*) FROM ranks WHERE run_id = ?1) + (SELECT count(*) FROM steps WHERE"
                          " run_id = ?1) + (SELECT count(*) FROM series WHERE run_id = ?1) + (SELECT count(*) FROM"
                          " epochs WHERE run_id = ?1) + (SELECT count(*) FROM checkpoints WHERE run_id = ?1) +"
                          " (SELECT count(*) FROM events WHERE run_id = ?1)";
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, id);
            if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int64(st, 0);
        }
        if (!st) fprintf(stderr, "rows_of: %s\n", sqlite3_errmsg(db));
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return n;
}

/* A trainer's events change a run that exists and is not finished only: those of a
 * connection that outlived its run are refused, and none recreates a deleted run's
 * rows. Returns the run's id (the newest). */
static int64_t test_events_of_ended_runs(void) {
    int64_t e = insert_run("epsilon", "{}", 2, "cpu", T0 + 39000);
    CHECK(starting(e, "[\"cpu:0\",\"cpu:1\"]", 31, T0 + 39001) == 1 && by_id(OP_RUN_RUNNING, e, T0 + 39002) == 1,
          "run %lld is running", (long long)e);
    int64_t res[6];
    trainer_events(e, 1, res);
    CHECK(res[0] == 1 && res[1] == 1 && res[2] == 1 && res[3] == 1 && res[4] == 1 && res[5] == 1,
          "a running run takes each of a trainer's events: %lld %lld %lld %lld %lld %lld", (long long)res[0],
          (long long)res[1], (long long)res[2], (long long)res[3], (long long)res[4], (long long)res[5]);
    int64_t live_rows = rows_of(e);
    CHECK(live_rows == 6, "its two ranks, step, series point, epoch and checkpoint are stored: %lld rows",
          (long long)live_rows);
    CHECK(finish(e, "failed", "rank 1 died", 1, NO_INT, T0 + 39500) == 1, "the run fails");
    int64_t after_finish = rows_of(e);
    trainer_events(e, 2, res);
    CHECK(res[0] == 0 && res[1] == 0 && res[2] == 0 && res[3] == 0 && res[4] == 0 && res[5] == 0,
          "a finished run's events are refused: %lld %lld %lld %lld %lld %lld", (long long)res[0], (long long)res[1],
          (long long)res[2], (long long)res[3], (long long)res[4], (long long)res[5]);
    CHECK(rows_of(e) == after_finish, "and add nothing: %lld rows, %lld before", (long long)rows_of(e),
          (long long)after_finish);
    json_t *doc = run_doc(e);
    CHECK(doc && jint(json_object_get(doc, "progress"), "total_steps") == 100 &&
              jint(json_object_get(doc, "progress"), "global_step") == 1,
          "the finished run's sizes and progress are as its live trainer left them");
    json_decref(doc);
    CHECK(by_id(OP_RUN_DELETE, e, T0 + 39600) == 1 && rows_of(e) == 0, "deleted: no rows left (%lld)",
          (long long)rows_of(e));
    trainer_events(e, 3, res);
    CHECK(res[0] == 0 && res[1] == 0 && res[2] == 0 && res[3] == 0 && res[4] == 0 && res[5] == 0,
          "a deleted run's events are refused: %lld %lld %lld %lld %lld %lld", (long long)res[0], (long long)res[1],
          (long long)res[2], (long long)res[3], (long long)res[4], (long long)res[5]);
    run_brief br;
    CHECK(rows_of(e) == 0 && store_get_brief(e, &br) == 0, "and recreate nothing of it: %lld rows",
          (long long)rows_of(e));
    return e;
}

/* In a process of its own (the store is opened once per process): opens the closed
 * store again and finds what the first process left. */
static int reopened(int64_t a, int64_t c, int64_t newest) {
    char err[512];
    int rc = store_open(layout_db_path(), NULL, NULL, err, sizeof err);
    REQUIRE(rc == 0, "reopening the store: %s", err);
    run_brief br;
    CHECK(store_get_brief(a, &br) == 1 && br.status == RUN_SUCCEEDED && br.pid == 4242,
          "the succeeded run is kept, with its pid");
    CHECK(store_get_brief(a + 1, &br) == 0, "the deleted run stays deleted");
    json_t *e = store_epochs_json(a);
    CHECK(json_array_size(e) == 2, "its epochs are kept: %zu", json_array_size(e));
    json_decref(e);
    int64_t f = 0, l = 0;
    CHECK(store_series_range(a, NULL, NO_INT, &f, &l) == 1 && f == 1 && l == 10, "its steps are kept: %lld..%lld",
          (long long)f, (long long)l);
    run_brief *un = NULL;
    CHECK(store_list_unfinished(&un) == 1 && un[0].id == c, "the queued run is still queued");
    free(un);
    int64_t d = insert_run("delta", "{}", 1, "cpu", T0 + 30000);
    CHECK(d == newest + 1, "ids go on after the newest, never reused: %lld after %lld", (long long)d,
          (long long)newest);
    CHECK(by_id(OP_RUN_DELETE, d, T0 + 30001) == 0, "a queued run is not deleted");
    store_read_release();
    store_close();
    return test_done("test_store (reopened)");
}

int main(void) {
    char *dir = scratch_dir_make("store");
    REQUIRE(dir, "mkdtemp: %s", strerror(errno));
    state_layout_init(dir);

    /* The process that reopens the store, forked before any thread exists; it
     * waits for the ids of the runs to look for. */
    int go[2];
    REQUIRE(pipe(go) == 0, "pipe: %s", strerror(errno));
    pid_t child = fork();
    REQUIRE(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        close(go[1]);
        int64_t ids[3];
        if (read(go[0], ids, sizeof ids) != (ssize_t)sizeof ids) _exit(3);
        int code = reopened(ids[0], ids[1], ids[2]);
        fflush(stdout);
        _exit(code);
    }
    close(go[0]);

    char err[512];
    int rc = store_open(layout_db_path(), NULL, NULL, err, sizeof err);
    if (rc != 0) kill(child, SIGKILL);
    REQUIRE(rc == 0, "store_open: %s", err);
    int64_t a = test_life();
    test_unknown_run(a);
    int64_t c = test_lists(a);
    int64_t newest = test_events_of_ended_runs();
    store_read_release();
    store_close();

    int64_t ids[3] = {a, c, newest};
    CHECK(write(go[1], ids, sizeof ids) == (ssize_t)sizeof ids, "telling the reopening process");
    close(go[1]);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the reopened store has everything (its process's status %#x)", status);

    state_layout_free();
    scratch_dir_remove(dir);
    free(dir);
    return test_done("test_store");
}
