/* Unit tests of the live feed (server/feed/feed.h) as main.c wires it: the observer
 * of a real store on a SQLite file in a fresh temporary directory. Subscribers get
 * the durable events of the ops the store applies (run status changes, rank states,
 * epochs, checkpoints, deletions) as SSE frames, in order, with ids that increase
 * by one; a parked subscriber is woken once when there is something for it; a
 * subscriber that resumes from an id gets only what came after it, and one for a
 * run only that run's; progress (steps, heartbeats) is coalesced to the newest and
 * goes when its run ends; past FEED_RING events the ring drops the oldest, and a
 * subscriber behind it is served from the table, so nothing is lost while the table
 * holds it; closing wakes every stream to end. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "check.h"
#include "feed.h"
#include "scratch_dir.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"

static bool str_is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* ---- a subscriber that counts its parks and wake-ups ---- */

typedef struct {
    feed_sub s; /* first: the feed hands back &s */
    int parks, wakes;
} test_sub;

static void on_park(feed_sub *s) { ((test_sub *)s)->parks++; }
static void on_wake(feed_sub *s) { ((test_sub *)s)->wakes++; }

static int64_t subscribe(test_sub *t, int64_t run_id, int64_t last_event_id) {
    memset(t, 0, sizeof *t);
    t->s.run_id = run_id;
    t->s.park = on_park;
    t->s.wake = on_wake;
    return feed_subscribe(&t->s, last_event_id);
}

/* ---- SSE frames ---- */

typedef struct {
    int64_t id; /* 0: none (progress) */
    char type[32];
    json_t *data;
} frame;

typedef struct {
    frame *v;
    size_t n, cap;
} frames;

static void frames_free(frames *f) {
    for (size_t i = 0; i < f->n; i++) json_decref(f->v[i].data);
    free(f->v);
    memset(f, 0, sizeof *f);
}

/* Splits SSE text into frames; false when it is not well formed. */
static bool parse_frames(const char *text, frames *out) {
    frame cur = {0};
    bool any = false;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        if (!nl) return false; /* every line ends */
        size_t len = (size_t)(nl - line);
        if (len == 0) {
            if (any) {
                if (!cur.type[0] || !cur.data) return false;
                if (out->n == out->cap) {
                    out->cap = out->cap ? 2 * out->cap : 64;
                    out->v = xrealloc(out->v, out->cap * sizeof *out->v);
                }
                out->v[out->n++] = cur;
            }
            memset(&cur, 0, sizeof cur);
            any = false;
        } else if (line[0] == ':') {
            /* a comment (the heartbeat) */
        } else if (len > 4 && strncmp(line, "id: ", 4) == 0) {
            cur.id = strtoll(line + 4, NULL, 10);
            any = true;
        } else if (len > 7 && strncmp(line, "event: ", 7) == 0) {
            snprintf(cur.type, sizeof cur.type, "%.*s", (int)(len - 7), line + 7);
            any = true;
        } else if (len > 6 && strncmp(line, "data: ", 6) == 0) {
            json_decref(cur.data);
            cur.data = json_loadb(line + 6, len - 6, 0, NULL);
            if (!cur.data) return false;
            any = true;
        } else {
            return false;
        }
        line = nl + 1;
    }
    json_decref(cur.data);
    return !any; /* the last frame ended with its blank line */
}

/* Reads what the feed has for `t` until it parks (or the feed closes). */
static feed_result read_all(test_sub *t, frames *out) {
    buf_t b = {0};
    feed_result r;
    int rounds = 0;
    while ((r = feed_read(&t->s, &b, 1u << 20)) == FEED_DATA && rounds++ < 100000) {
    }
    bool ok = parse_frames(b.data ? b.data : "", out);
    CHECK(ok, "the feed writes well-formed SSE frames: %.200s", b.data ? b.data : "");
    buf_free(&b);
    return r;
}

static int64_t data_int(const frame *f, const char *k) {
    json_t *v = json_object_get(f->data, k);
    return json_is_integer(v) ? json_integer_value(v) : NO_INT;
}
static const char *data_str(const frame *f, const char *k) { return json_string_value(json_object_get(f->data, k)); }

/* ---- ops ---- */

static int64_t insert_run(const char *name) {
    store_op op = {.kind = OP_RUN_INSERT, .t = now_ms()};
    op.u.insert.name = xstrdup(name);
    op.u.insert.config = xstrdup("{}");
    op.u.insert.world_size = 1;
    op.u.insert.device_kind = "cpu";
    return store_submit_wait(&op);
}

static void run_op(store_op_kind kind, int64_t id) {
    store_op op = {.kind = kind, .run_id = id, .t = now_ms()};
    store_submit_wait(&op);
}

static void start_run(int64_t id, int64_t pid) {
    store_op op = {.kind = OP_RUN_STARTING, .run_id = id, .t = now_ms()};
    op.u.starting.devices = xstrdup("[\"cpu:0\"]");
    op.u.starting.pid = pid;
    store_submit_wait(&op);
}

static void finish_run(int64_t id, const char *status) {
    store_op op = {.kind = OP_RUN_FINISH, .run_id = id, .t = now_ms()};
    op.u.finish.status = status;
    op.u.finish.exit_code = 0;
    op.u.finish.exit_signal = NO_INT;
    store_submit_wait(&op);
}

static store_op step_op(int64_t id, int64_t gs) {
    store_op op = {.kind = OP_STEP, .run_id = id, .rank = 0, .t = now_ms()};
    op.u.step.global_step = gs;
    op.u.step.epoch = 0;
    op.u.step.step = gs;
    op.u.step.loss = 1.0 / (double)gs;
    op.u.step.lr = 0.1;
    op.u.step.samples_per_s = 50;
    return op;
}

static store_op epoch_op(int64_t id, int64_t epoch) {
    store_op op = {.kind = OP_EPOCH, .run_id = id, .rank = 0, .t = now_ms()};
    op.u.epoch.epoch = epoch;
    op.u.epoch.lr = 0.1;
    op.u.epoch.train_loss = op.u.epoch.test_loss = 0.5;
    op.u.epoch.test_acc = 0.9;
    op.u.epoch.seconds = 1;
    op.u.epoch.samples_per_s = 10;
    return op;
}

/* ---- the tests ---- */

static bool contiguous(const frames *f) {
    for (size_t i = 1; i < f->n; i++)
        if (f->v[i].id != f->v[i - 1].id + 1) return false;
    return true;
}

static void test_order_and_resume(void) {
    test_sub all;
    int64_t newest = subscribe(&all, 0, -1);
    CHECK(newest == 0, "a new store's feed starts at 0, got %lld", (long long)newest);
    CHECK(feed_subscribers() == 1, "one subscriber");
    frames f = {0};
    CHECK(read_all(&all, &f) == FEED_PARKED && f.n == 0 && all.parks == 1, "nothing yet: parked (%zu frames)", f.n);
    frames_free(&f);

    int64_t r1 = insert_run("one");
    CHECK(all.wakes == 1, "the parked subscriber was woken by the commit: %d", all.wakes);
    int64_t r2 = insert_run("two");
    CHECK(all.wakes == 1, "woken once per park, not per event: %d", all.wakes);
    start_run(r1, 777);
    run_op(OP_RUN_RUNNING, r1);
    store_op hello = {.kind = OP_HELLO, .run_id = r1, .rank = 0, .t = now_ms()};
    hello.u.hello.pid = 778;
    hello.u.hello.host = xstrdup("node-a");
    hello.u.hello.device = xstrdup("cpu:0");
    hello.u.hello.total_steps = hello.u.hello.epochs = hello.u.hello.steps_per_epoch = NO_INT;
    store_op ep = epoch_op(r1, 0);
    store_op ck = {.kind = OP_CHECKPOINT, .run_id = r1, .rank = 0, .t = now_ms()};
    ck.u.checkpoint.epoch = 0;
    ck.u.checkpoint.global_step = 10;
    ck.u.checkpoint.bytes = 100;
    ck.u.checkpoint.path = xstrdup("checkpoints/step-10.safetensors");
    store_op batch[3] = {hello, ep, ck};
    store_submit(batch, 3);
    store_sync();
    finish_run(r1, "succeeded");

    CHECK(read_all(&all, &f) == FEED_PARKED, "read to the end, then parked");
    static const char *const types[] = {"run", "run", "run", "run", "rank", "epoch", "checkpoint", "run"};
    CHECK(f.n == 8, "eight durable events, got %zu", f.n);
    for (size_t i = 0; i < f.n && i < 8; i++)
        CHECK(str_is(f.v[i].type, types[i]), "event %zu is a %s, got %s", i, types[i], f.v[i].type);
    CHECK(f.n && f.v[0].id == 1 && contiguous(&f), "ids 1, 2, 3, ... in order");
    if (f.n == 8) {
        CHECK(data_int(&f.v[0], "run") == r1 && str_is(data_str(&f.v[0], "status"), "queued") &&
                  str_is(data_str(&f.v[0], "name"), "one"),
              "run %lld queued", (long long)r1);
        CHECK(data_int(&f.v[1], "run") == r2 && str_is(data_str(&f.v[1], "status"), "queued"), "run %lld queued",
              (long long)r2);
        CHECK(str_is(data_str(&f.v[2], "status"), "starting") && data_int(&f.v[2], "pid") == 777 &&
                  json_array_size(json_object_get(f.v[2].data, "devices")) == 1,
              "starting, with its pid and devices");
        CHECK(str_is(data_str(&f.v[3], "status"), "running"), "running");
        CHECK(data_int(&f.v[4], "rank") == 0 && str_is(data_str(&f.v[4], "state"), "init") &&
                  str_is(data_str(&f.v[4], "host"), "node-a") && data_int(&f.v[4], "pid") == 778,
              "rank 0 said hello");
        CHECK(data_int(&f.v[5], "epoch") == 0, "epoch 0's results");
        CHECK(data_int(&f.v[6], "global_step") == 10 &&
                  str_is(data_str(&f.v[6], "path"), "checkpoints/step-10.safetensors"),
              "the checkpoint");
        CHECK(str_is(data_str(&f.v[7], "status"), "succeeded") && data_int(&f.v[7], "exit_code") == 0,
              "succeeded, exit code 0");
    }
    int64_t id_starting = f.n > 2 ? f.v[2].id : 3, last = f.n ? f.v[f.n - 1].id : 8;
    frames_free(&f);

    /* resuming from an id: only what came after it */
    test_sub later;
    CHECK(subscribe(&later, 0, id_starting) == last, "subscribing tells the newest id");
    CHECK(read_all(&later, &f) == FEED_PARKED && f.n == (size_t)(last - id_starting) &&
              f.v[0].id == id_starting + 1 && contiguous(&f),
          "resumed after id %lld: %zu events from %lld", (long long)id_starting, f.n, f.n ? (long long)f.v[0].id : -1LL);
    frames_free(&f);
    feed_unsubscribe(&later.s);
    subscribe(&later, 0, last);
    CHECK(read_all(&later, &f) == FEED_PARKED && f.n == 0, "resumed at the newest: nothing");
    frames_free(&f);
    feed_unsubscribe(&later.s);
    subscribe(&later, 0, last + 1000);
    CHECK(read_all(&later, &f) == FEED_PARKED && f.n == 0, "an id from the future counts as the newest");
    frames_free(&f);
    feed_unsubscribe(&later.s);

    /* one run's stream */
    test_sub two;
    subscribe(&two, r2, 0);
    CHECK(read_all(&two, &f) == FEED_PARKED && f.n == 1 && data_int(&f.v[0], "run") == r2 && f.v[0].id == 2,
          "run %lld's stream has only its own event: %zu", (long long)r2, f.n);
    frames_free(&f);
    int wakes = two.wakes;
    start_run(r1 + 100, 1); /* no such run: no event */
    store_op s1 = step_op(r2, 1); /* progress: no durable event */
    store_submit(&s1, 1);
    store_sync();
    CHECK(two.wakes == wakes, "events of no concern do not wake it");

    /* progress: the newest step per run and heartbeat per rank, without an id */
    start_run(r2, 888);
    run_op(OP_RUN_RUNNING, r2);
    store_op prog[5] = {step_op(r2, 1), step_op(r2, 2), step_op(r2, 3)};
    for (int rank = 0; rank < 2; rank++) {
        store_op hb = {.kind = OP_HEARTBEAT, .run_id = r2, .rank = rank, .t = now_ms()};
        hb.u.heartbeat.global_step = 3;
        hb.u.heartbeat.step_ms = 20.0 + rank;
        hb.u.heartbeat.gpu_mem_used = hb.u.heartbeat.gpu_mem_total = NO_INT;
        prog[3 + rank] = hb;
    }
    store_submit(prog, 5);
    store_sync();
    CHECK(two.wakes == wakes + 1, "run %lld's stream was woken for its status", (long long)r2);
    test_sub fresh;
    subscribe(&fresh, r2, -1);
    read_all(&fresh, &f);
    int steps = 0, hbs = 0;
    for (size_t i = 0; i < f.n; i++) {
        if (str_is(f.v[i].type, "step")) {
            steps++;
            CHECK(f.v[i].id == 0 && data_int(&f.v[i], "global_step") == 3 && data_int(&f.v[i], "run") == r2,
                  "progress is the newest step (gs %lld), without an id", (long long)data_int(&f.v[i], "global_step"));
        } else if (str_is(f.v[i].type, "heartbeat")) {
            hbs++;
            CHECK(f.v[i].id == 0 && data_int(&f.v[i], "global_step") == 3, "a heartbeat, without an id");
        } else {
            CHECK(0, "a live subscriber gets no old durable event: %s", f.v[i].type);
        }
    }
    CHECK(steps == 1 && hbs == 2, "one step (of three) and one heartbeat per rank: %d, %d", steps, hbs);
    frames_free(&f);
    feed_unsubscribe(&fresh.s);

    read_all(&two, &f);
    size_t runs = 0;
    for (size_t i = 0; i < f.n; i++) runs += str_is(f.v[i].type, "run") && data_int(&f.v[i], "run") == r2;
    CHECK(runs == 2, "run %lld's stream: starting and running (%zu run events of %zu)", (long long)r2, runs, f.n);
    frames_free(&f);

    finish_run(r2, "failed");
    subscribe(&fresh, 0, -1);
    read_all(&fresh, &f);
    CHECK(f.n == 0, "a finished run's progress is gone: %zu frames", f.n);
    frames_free(&f);
    feed_unsubscribe(&fresh.s);
    feed_unsubscribe(&two.s);

    read_all(&all, &f);
    CHECK(f.n == 3 && f.v[0].id == last + 1 && contiguous(&f) && str_is(data_str(&f.v[2], "status"), "failed"),
          "the first subscriber goes on where it was: run %lld starting, running, failed (%zu events)", (long long)r2,
          f.n);
    frames_free(&f);
    feed_unsubscribe(&all.s);
    CHECK(feed_subscribers() == 0, "all unsubscribed");
}

/* More than FEED_RING events: the ring keeps the newest, the table the rest. */
static void test_ring_bound(void) {
    int64_t r = insert_run("many");
    const size_t extra = 100, n_epochs = FEED_RING + extra;
    store_op *ops = xmalloc(n_epochs * sizeof *ops);
    for (size_t i = 0; i < n_epochs; i++) ops[i] = epoch_op(r, (int64_t)i);
    store_submit(ops, n_epochs);
    free(ops);
    store_sync();

    test_sub s;
    subscribe(&s, r, 0);
    frames f = {0};
    read_all(&s, &f);
    bool epochs_in_order = f.n == n_epochs + 1;
    for (size_t i = 1; epochs_in_order && i < f.n; i++)
        epochs_in_order = str_is(f.v[i].type, "epoch") && data_int(&f.v[i], "epoch") == (int64_t)i - 1;
    CHECK(epochs_in_order && contiguous(&f) && str_is(data_str(&f.v[0], "status"), "queued"),
          "from 0, all %zu events of the run, in order, none lost (%zu read): the oldest from the table",
          n_epochs + 1, f.n);
    frames_free(&f);
    feed_unsubscribe(&s.s);

    /* Deleting the run takes its events from the table: what a subscriber from 0
     * gets now is what the ring holds, the newest FEED_RING. */
    finish_run(r, "succeeded");
    run_op(OP_RUN_DELETE, r);
    test_sub after;
    int64_t newest = subscribe(&after, r, 0);
    read_all(&after, &f);
    CHECK(f.n == FEED_RING, "the ring holds %d events, got %zu", FEED_RING, f.n);
    CHECK(f.n && f.v[0].id == newest - FEED_RING + 1 && f.v[f.n - 1].id == newest && contiguous(&f),
          "the newest: ids %lld..%lld", f.n ? (long long)f.v[0].id : -1LL, (long long)newest);
    /* the run's events were: queued, epochs 0..n_epochs-1, succeeded, deleted */
    int64_t oldest_kept = (int64_t)(n_epochs + 3 - FEED_RING) - 1;
    CHECK(f.n && str_is(f.v[0].type, "epoch") && data_int(&f.v[0], "epoch") == oldest_kept,
          "the oldest were dropped: the first kept is epoch %lld, got %s %lld", (long long)oldest_kept,
          f.n ? f.v[0].type : "", f.n ? (long long)data_int(&f.v[0], "epoch") : -1LL);
    CHECK(f.n >= 2 && str_is(f.v[f.n - 2].type, "run") && str_is(data_str(&f.v[f.n - 2], "status"), "succeeded") &&
              str_is(f.v[f.n - 1].type, "deleted") && data_int(&f.v[f.n - 1], "run") == r,
          "the last: succeeded, then deleted (%s)", f.n ? f.v[f.n - 1].type : "");
    frames_free(&f);
    feed_unsubscribe(&after.s);
}

static void test_close(void) {
    test_sub s;
    subscribe(&s, 0, -1);
    frames f = {0};
    CHECK(read_all(&s, &f) == FEED_PARKED, "parked before closing");
    frames_free(&f);
    CHECK(!feed_closing(), "not closing yet");
    feed_close_all();
    CHECK(s.wakes == 1 && feed_closing(), "closing wakes the parked stream");
    buf_t b = {0};
    CHECK(feed_read(&s.s, &b, 4096) == FEED_CLOSED && b.len == 0, "and its next read ends it");
    buf_free(&b);
    feed_unsubscribe(&s.s);
}

int main(void) {
    char *dir = scratch_dir_make("feed");
    REQUIRE(dir, "mkdtemp: %s", strerror(errno));
    state_layout_init(dir);
    char err[512];
    feed_init();
    static const store_observer feed_observes_store = {feed_attach, feed_detach, feed_record, feed_commit};
    REQUIRE(store_open(layout_db_path(), &feed_observes_store, NULL, err, sizeof err) == 0, "store_open: %s", err);

    test_order_and_resume();
    test_ring_bound();
    test_close();

    feed_stop();
    store_read_release();
    store_close();
    state_layout_free();
    scratch_dir_remove(dir);
    free(dir);
    return test_done("test_feed");
}
