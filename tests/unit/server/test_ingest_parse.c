/* Unit tests of how trainer events are read: the event-kind table
 * (server/store/event_kinds.h: each socket event type's entry and its parse, the
 * event_int/event_real/event_str readers) and ingest's line handling on a real Unix
 * socket (server/feed/ingest.h) with a real store behind it. Valid lines of every
 * kind, one event or an array, land in the store with the right fields; malformed
 * lines (not JSON, not an object, no type, a required field missing or of the wrong
 * type, another run's event, a line over 16 MiB) are skipped with a log line that
 * says what is wrong and shows the line, and the lines after them still count; a
 * type this server does not know is taken and ignored; a connection that does not
 * open with a valid hello (first event not a hello, wrong secret, no rank) is
 * dropped, saying why. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "event_kinds.h"
#include "ingest.h"
#include "scratch_dir.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"

static bool str_is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }
static const char *or_none(const char *s) { return s ? s : "(none)"; }

/* ---- the event-kind table and each kind's parse ---- */

static json_t *ev(const char *text) {
    json_error_t jerr;
    json_t *v = json_loads(text, 0, &jerr);
    if (!v) fprintf(stderr, "bad test JSON (%s): %s\n", jerr.text, text);
    return v;
}

/* Parses `text` as an event of its "type": NULL when accepted (*op filled), else
 * the kind's reason. */
static const char *parse(const char *text, store_op *op) {
    json_t *v = ev(text);
    const op_kind_desc *d = op_kind_for_event(json_string_value(json_object_get(v, "type")));
    memset(op, 0, sizeof *op);
    const char *why = "no such kind";
    if (d) {
        op->kind = d->kind;
        why = d->parse(v, op);
    }
    json_decref(v);
    return why;
}

static void test_table(void) {
    static const struct {
        const char *event;
        store_op_kind kind;
    } socket_kinds[] = {{"hello", OP_HELLO}, {"status", OP_STATUS}, {"step", OP_STEP},
                        {"heartbeat", OP_HEARTBEAT}, {"epoch", OP_EPOCH}, {"checkpoint", OP_CHECKPOINT},
                        {"metric", OP_METRIC}};
    for (size_t i = 0; i < sizeof socket_kinds / sizeof *socket_kinds; i++) {
        const op_kind_desc *d = op_kind_for_event(socket_kinds[i].event);
        CHECK(d && d->kind == socket_kinds[i].kind && d == &OP_KINDS[socket_kinds[i].kind],
              "\"%s\" is the entry of its kind", socket_kinds[i].event);
        CHECK(d && d->parse && (d->apply || d->kind == OP_METRIC) && str_is(d->event, socket_kinds[i].event),
              "\"%s\" parses and applies",
              socket_kinds[i].event);
    }
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        CHECK(OP_KINDS[k].kind == (store_op_kind)k, "entry %d is for kind %d", k, OP_KINDS[k].kind);
        CHECK(OP_KINDS[k].apply || k == OP_METRIC, "kind %d applies (a metric is handed to another kind)", k);
        bool run_life = k >= OP_RUN_INSERT;
        CHECK(run_life == (OP_KINDS[k].event == NULL), "kind %d: only trainer events have a socket type", k);
    }
    const char *not_kinds[] = {"end", "log", "Step", "steps", "", "run"};
    for (size_t i = 0; i < sizeof not_kinds / sizeof *not_kinds; i++)
        CHECK(op_kind_for_event(not_kinds[i]) == NULL, "\"%s\" is no event kind of the store", not_kinds[i]);
    CHECK(op_kind_for_event(NULL) == NULL, "no type, no kind");
}

static void test_readers(void) {
    json_t *o = ev("{\"i\": 7, \"whole\": 3.0, \"half\": 2.5, \"s\": \"x\", \"big\": 1e30, \"n\": null, \"b\": true}");
    CHECK(event_int(o, "i") == 7, "an integer");
    CHECK(event_int(o, "whole") == 3, "a whole real counts as an integer");
    CHECK(event_int(o, "half") == NO_INT, "2.5 is no integer");
    CHECK(event_int(o, "big") == NO_INT, "1e30 does not fit");
    CHECK(event_int(o, "s") == NO_INT && event_int(o, "n") == NO_INT && event_int(o, "b") == NO_INT &&
              event_int(o, "missing") == NO_INT,
          "a string, null, a boolean or nothing: no integer");
    CHECK(event_real(o, "half") == 2.5 && event_real(o, "i") == 7.0, "numbers are reals");
    CHECK(isnan(event_real(o, "s")) && isnan(event_real(o, "n")) && isnan(event_real(o, "missing")),
          "no number: NaN");
    char *s = event_str(o, "s");
    CHECK(str_is(s, "x"), "a string, copied");
    free(s);
    CHECK(event_str(o, "i") == NULL && event_str(o, "missing") == NULL, "no string: NULL");
    json_decref(o);
}

static void test_parse_valid(void) {
    store_op op;
    const char *why;

    why = parse("{\"type\":\"hello\",\"pid\":321,\"host\":\"node-a\",\"device\":\"cuda:0 H200\","
                "\"total_steps\":1000,\"epochs\":4,\"steps_per_epoch\":250}", &op);
    CHECK(!why && op.u.hello.pid == 321 && str_is(op.u.hello.host, "node-a") &&
              str_is(op.u.hello.device, "cuda:0 H200") && op.u.hello.total_steps == 1000 && op.u.hello.epochs == 4 &&
              op.u.hello.steps_per_epoch == 250,
          "hello: %s", or_none(why));
    store_op_free(&op);
    why = parse("{\"type\":\"hello\"}", &op);
    CHECK(!why && op.u.hello.pid == NO_INT && !op.u.hello.host && op.u.hello.total_steps == NO_INT,
          "a launcher's bare hello is fine: its fields are unknown");
    store_op_free(&op);

    why = parse("{\"type\":\"status\",\"state\":\"training\",\"detail\":\"epoch 2\"}", &op);
    CHECK(!why && str_is(op.u.status.state, "training") && str_is(op.u.status.detail, "epoch 2"), "status: %s",
          or_none(why));
    store_op_free(&op);

    why = parse("{\"type\":\"step\",\"epoch\":1,\"step\":7,\"global_step\":257,\"loss\":0.25,\"lr\":0.01,"
                "\"samples_per_s\":5120.5}", &op);
    CHECK(!why && op.kind == OP_STEP && op.u.step.epoch == 1 && op.u.step.step == 7 && op.u.step.global_step == 257 &&
              op.u.step.loss == 0.25 && op.u.step.lr == 0.01 && op.u.step.samples_per_s == 5120.5,
          "step: %s", or_none(why));
    why = parse("{\"type\":\"step\",\"global_step\":3,\"loss\":\"nan\"}", &op);
    CHECK(!why && op.u.step.global_step == 3 && isnan(op.u.step.loss) && op.u.step.epoch == NO_INT,
          "a step's optional fields of another type are unknown, not refused");

    why = parse("{\"type\":\"heartbeat\",\"global_step\":40,\"step_ms\":12.5,\"gpu_mem_used_bytes\":1048576,"
                "\"gpu_mem_total_bytes\":4194304}", &op);
    CHECK(!why && op.u.heartbeat.global_step == 40 && op.u.heartbeat.step_ms == 12.5 &&
              op.u.heartbeat.gpu_mem_used == 1048576 && op.u.heartbeat.gpu_mem_total == 4194304,
          "heartbeat: %s", or_none(why));
    why = parse("{\"type\":\"heartbeat\"}", &op);
    CHECK(!why && op.u.heartbeat.global_step == NO_INT && isnan(op.u.heartbeat.step_ms) &&
              op.u.heartbeat.gpu_mem_used == NO_INT,
          "a CPU rank's heartbeat has no GPU memory");

    why = parse("{\"type\":\"epoch\",\"epoch\":2,\"lr\":0.05,\"train_loss\":0.4,\"test_loss\":0.45,\"test_acc\":0.87,"
                "\"seconds\":12.25,\"samples_per_s\":4900}", &op);
    CHECK(!why && op.u.epoch.epoch == 2 && op.u.epoch.lr == 0.05 && op.u.epoch.train_loss == 0.4 &&
              op.u.epoch.test_loss == 0.45 && op.u.epoch.test_acc == 0.87 && op.u.epoch.seconds == 12.25 &&
              op.u.epoch.samples_per_s == 4900.0,
          "epoch: %s", or_none(why));

    why = parse("{\"type\":\"checkpoint\",\"epoch\":2,\"global_step\":750,\"bytes\":81920,"
                "\"path\":\"checkpoints/step-750.safetensors\"}", &op);
    CHECK(!why && op.u.checkpoint.epoch == 2 && op.u.checkpoint.global_step == 750 && op.u.checkpoint.bytes == 81920 &&
              str_is(op.u.checkpoint.path, "checkpoints/step-750.safetensors"),
          "checkpoint: %s", or_none(why));
    store_op_free(&op);
}

static void test_parse_refused(void) {
    static const struct {
        const char *line, *why;
    } cases[] = {
        {"{\"type\":\"status\"}", "a status event without a state"},
        {"{\"type\":\"status\",\"state\":3}", "a status event without a state"},
        {"{\"type\":\"step\",\"loss\":1.0}", "a step event without an integer global_step"},
        {"{\"type\":\"step\",\"global_step\":\"12\"}", "a step event without an integer global_step"},
        {"{\"type\":\"step\",\"global_step\":12.5}", "a step event without an integer global_step"},
        /* a step is stored under run << 32 | global_step: one past would be the next run's */
        {"{\"type\":\"step\",\"global_step\":4294967301,\"loss\":9.0}",
         "a step event's global_step outside 0 .. 4294967295 (2^32 - 1), the steps a run can store"},
        {"{\"type\":\"step\",\"global_step\":-1}",
         "a step event's global_step outside 0 .. 4294967295 (2^32 - 1), the steps a run can store"},
        {"{\"type\":\"epoch\",\"test_acc\":0.9}", "an epoch event without an integer epoch"},
        {"{\"type\":\"epoch\",\"epoch\":null}", "an epoch event without an integer epoch"},
        {"{\"type\":\"checkpoint\",\"path\":\"x\"}", "a checkpoint event without an integer global_step"},
        {"{\"type\":\"checkpoint\",\"global_step\":[1]}", "a checkpoint event without an integer global_step"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        store_op op;
        const char *why = parse(cases[i].line, &op);
        CHECK(str_is(why, cases[i].why), "%s: refused with \"%s\", got \"%s\"", cases[i].line, cases[i].why,
              or_none(why));
        store_op_free(&op);
    }
}

/* ---- lines on the real socket ---- */

#define RUN_SECRET "0123456789abcdef0123456789abcdef"

static struct {
    int64_t run_id;
    int hellos;
    char end_status[32], end_reason[64], end_launch[80];
    int ends;
    long hello_uid, end_pid; /* the peer the socket saw (SO_PEERCRED) */
} H;

static bool hook_hello(int64_t run_id, const char *secret, int rank, long peer_uid) {
    H.hellos++;
    H.hello_uid = peer_uid;
    (void)rank;
    return run_id == H.run_id && secret && strcmp(secret, RUN_SECRET) == 0;
}

static void hook_end(int64_t run_id, const char *status, const char *reason, long peer_pid, const char *launch) {
    if (run_id != H.run_id) return;
    H.ends++;
    H.end_pid = peer_pid;
    snprintf(H.end_launch, sizeof H.end_launch, "%s", launch ? launch : "(none)");
    snprintf(H.end_status, sizeof H.end_status, "%s", status);
    snprintf(H.end_reason, sizeof H.end_reason, "%s", reason ? reason : "");
}

static int connect_socket(void) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", layout_socket_path());
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        fprintf(stderr, "connect %s: %s\n", layout_socket_path(), strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

static bool send_all(int fd, const char *data, size_t n) {
    while (n) {
        ssize_t w = write(fd, data, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        data += w;
        n -= (size_t)w;
    }
    return true;
}

static bool send_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool send_line(int fd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    bool ok = n >= 0 && send_all(fd, line, (size_t)n) && send_all(fd, "\n", 1);
    free(line);
    return ok;
}

/* After ingest_sync: has ingest closed its end of the connection? */
static bool closed_by_server(int fd) {
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}


static void test_socket(const char *log_path) {
    char err[512];
    store_op ins = {.kind = OP_RUN_INSERT, .t = now_ms()};
    ins.u.insert.name = xstrdup("ingest");
    ins.u.insert.config = xstrdup("{}");
    ins.u.insert.world_size = 1;
    ins.u.insert.device_kind = "cpu";
    int64_t run = store_submit_wait(&ins);
    REQUIRE(run > 0, "a run to report for");
    H.run_id = run;
    ingest_hooks hooks = {.hello = hook_hello, .end = hook_end};
    REQUIRE(ingest_start(layout_socket_path(), &hooks, err, sizeof err) == 0, "ingest_start: %s", err);
    ingest_counters before;
    ingest_take_counters(&before);

    /* one rank's connection: a good stream with bad lines in it */
    int fd = connect_socket();
    REQUIRE(fd >= 0, "connecting to the event socket");
    bool sent = send_line(fd, "{\"type\":\"hello\",\"run\":\"%lld\",\"rank\":0,\"secret\":\"" RUN_SECRET "\","
                              "\"pid\":4321,\"host\":\"node-a\",\"device\":\"cpu:0\",\"total_steps\":6,\"epochs\":2,"
                              "\"steps_per_epoch\":3,\"t\":1000}", (long long)run);
    sent &= send_line(fd, "{\"type\":\"status\",\"state\":\"training\",\"detail\":\"epoch 0\",\"t\":1001}");
    sent &= send_line(fd, "{\"type\":\"step\",\"run\":\"%lld\",\"epoch\":0,\"step\":0,\"global_step\":1,\"loss\":2.5,"
                          "\"lr\":0.1,\"samples_per_s\":100,\"t\":1002}", (long long)run);
    sent &= send_line(fd, "{\"type\":\"step\",\"global_step\":\"2\",\"t\":1003}");          /* wrong type */
    sent &= send_line(fd, "{\"type\":\"step\",\"epoch\":0,\"global_step\":2,\"loss\":2.0"); /* not JSON */
    sent &= send_line(fd, "[{\"type\":\"step\",\"epoch\":0,\"step\":1,\"global_step\":2,\"loss\":2.0,\"t\":1004},"
                          " {\"type\":\"step\",\"epoch\":0,\"step\":2,\"global_step\":3,\"loss\":1.5,\"t\":1005}]");
    sent &= send_line(fd, "42");                                                          /* not a document */
    sent &= send_line(fd, "[7]");                                                         /* not an object */
    sent &= send_line(fd, "{\"run\":\"%lld\",\"global_step\":4}", (long long)run);       /* no type */
    sent &= send_line(fd, "{\"type\":\"status\",\"detail\":\"no state\"}");               /* missing field */
    sent &= send_line(fd, "{\"type\":\"step\",\"run\":\"%lld\",\"global_step\":4}", (long long)run + 1); /* another run */
    sent &= send_line(fd, "{\"type\":\"epoch\",\"epoch\":\"zero\",\"test_acc\":0.5}");    /* wrong type */
    sent &= send_line(fd, "{\"type\":\"gpu_temperature\",\"celsius\":71}");               /* unknown: ignored */
    sent &= send_line(fd, "{\"type\":\"log\",\"message\":\"hello there\"}");              /* taken, ignored */
    sent &= send_line(fd, "   ");                                                         /* blank: nothing */
    sent &= send_line(fd, "{\"type\":\"epoch\",\"epoch\":0,\"lr\":0.1,\"train_loss\":2.0,\"test_loss\":2.1,"
                          "\"test_acc\":0.4,\"seconds\":1.5,\"samples_per_s\":99,\"t\":1006}\r");
    sent &= send_line(fd, "{\"type\":\"heartbeat\",\"global_step\":3,\"step_ms\":7.5,\"t\":1007}");
    sent &= send_line(fd, "{\"type\":\"checkpoint\",\"epoch\":0,\"global_step\":3,\"bytes\":2048,"
                          "\"path\":\"checkpoints/step-3.safetensors\",\"t\":1008}");
    sent &= send_line(fd, "{\"type\":\"end\",\"status\":\"failed\",\"reason\":\"rank 1 lost\"}");
    CHECK(sent, "writing the first connection's lines");

    /* another connection of the run: an over-long line, then a good one */
    int fd2 = connect_socket();
    REQUIRE(fd2 >= 0, "connecting to the event socket");
    sent = send_line(fd2, "{\"type\":\"hello\",\"run\":%lld,\"rank\":-1,\"secret\":\"" RUN_SECRET "\"}",
                     (long long)run);
    /* Well past the limit: ingest checks it between reads, and a read takes at most
     * what the socket buffers (a few hundred KiB), so the line cannot slip through. */
    size_t big = 20u << 20;
    char *huge = xmalloc(big);
    memset(huge, 'x', big);
    const char *head = "{\"type\":\"step\",\"global_step\":99,\"pad\":\"";
    memcpy(huge, head, strlen(head));
    sent &= send_all(fd2, huge, big) && send_all(fd2, "\"}\n", 3);
    free(huge);
    sent &= send_line(fd2, "{\"type\":\"step\",\"epoch\":1,\"step\":0,\"global_step\":4,\"loss\":1.25,\"t\":1009}");
    CHECK(sent, "writing the second connection's lines");

    /* connections that never open properly */
    int no_hello = connect_socket(), bad_secret = connect_socket(), no_rank = connect_socket();
    REQUIRE(no_hello >= 0 && bad_secret >= 0 && no_rank >= 0, "connecting to the event socket");
    send_line(no_hello, "{\"type\":\"step\",\"run\":\"%lld\",\"global_step\":50}", (long long)run);
    send_line(bad_secret, "{\"type\":\"hello\",\"run\":\"%lld\",\"rank\":0,\"secret\":\"guess\"}", (long long)run);
    send_line(no_rank, "{\"type\":\"hello\",\"run\":\"%lld\",\"secret\":\"" RUN_SECRET "\"}", (long long)run);

    ingest_sync();
    store_sync();

    /* what reached the store */
    int64_t first = 0, last = 0;
    CHECK(store_series_range(run, NULL, NO_INT, &first, &last) == 1 && first == 1 && last == 4,
          "steps 1..4 were stored (single and array lines, and after the over-long one): %lld..%lld",
          (long long)first, (long long)last);
    downsampler d;
    ds_init(&d, 1, 4, 0);
    store_series_scan(run, METRIC_LOSS, NULL, NO_INT, &d);
    ds_finish(&d);
    CHECK(d.n_out == 4 && d.out[0].value == 2.5 && d.out[1].value == 2.0 && d.out[2].value == 1.5 &&
              d.out[3].value == 1.25 && d.out[0].t == 1002 && d.out[3].t == 1009,
          "each step's loss and time as sent (%zu points)", d.n_out);
    ds_free(&d);
    json_t *epochs = store_epochs_json(run);
    json_t *e0 = json_array_get(epochs, 0);
    CHECK(json_array_size(epochs) == 1 && json_integer_value(json_object_get(e0, "epoch")) == 0 &&
              json_real_value(json_object_get(e0, "test_acc")) == 0.4,
          "the good epoch line (ending in \\r) was stored, the bad one not: %zu epochs", json_array_size(epochs));
    json_decref(epochs);
    json_t *ranks = store_ranks_json(run);
    json_t *r0 = json_array_get(ranks, 0);
    CHECK(json_array_size(ranks) == 1 && json_integer_value(json_object_get(r0, "rank")) == 0 &&
              json_integer_value(json_object_get(r0, "pid")) == 4321 &&
              str_is(json_string_value(json_object_get(r0, "host")), "node-a") &&
              str_is(json_string_value(json_object_get(r0, "state")), "training") &&
              json_integer_value(json_object_get(r0, "global_step")) == 3 &&
              json_real_value(json_object_get(r0, "step_ms")) == 7.5,
          "rank 0 from its hello, status and heartbeat (%zu ranks: the launcher's rank -1 has none)",
          json_array_size(ranks));
    json_decref(ranks);
    char *raw = NULL;
    json_t *doc = store_run_json(run, &raw);
    json_t *p = json_object_get(doc, "progress");
    CHECK(json_integer_value(json_object_get(p, "total_steps")) == 6 &&
              json_integer_value(json_object_get(p, "epochs")) == 2 &&
              json_integer_value(json_object_get(p, "global_step")) == 4,
          "the run's sizes from the hello, its progress from the newest step");
    CHECK(raw && strstr(raw, "\"path\":\"checkpoints/step-3.safetensors\"") && strstr(raw, "\"bytes\":2048"),
          "the checkpoint was stored: %s", or_none(raw));
    json_decref(doc);
    free(raw);

    /* the hooks */
    CHECK(H.ends == 1 && str_is(H.end_status, "failed") && str_is(H.end_reason, "rank 1 lost"),
          "the launcher's end reached its hook: %d, %s: %s", H.ends, H.end_status, H.end_reason);
    CHECK(H.hello_uid == (long)getuid() && H.end_pid == (long)getpid(),
          "the hooks are told who sent it (SO_PEERCRED): uid %ld (this is %d), pid %ld (this is %d)", H.hello_uid,
          (int)getuid(), H.end_pid, (int)getpid());
    CHECK(str_is(H.end_launch, RUN_SECRET), "the end's hook is told which start it is of: the secret its connection "
          "said hello with: %s", H.end_launch);
    CHECK(H.hellos == 3, "hellos asked of the hook: the two good ones and the wrong secret, not the bad rank: %d",
          H.hellos);

    /* who was dropped */
    CHECK(!closed_by_server(fd) && !closed_by_server(fd2), "connections with bad lines stay open");
    CHECK(closed_by_server(no_hello), "a connection whose first event is not a hello is dropped");
    CHECK(closed_by_server(bad_secret), "a hello with the wrong secret is dropped");
    CHECK(closed_by_server(no_rank), "a hello without a rank is dropped");

    ingest_counters after;
    ingest_take_counters(&after);
    CHECK(after.malformed - before.malformed == 9, "9 malformed lines counted, got %llu",
          (unsigned long long)(after.malformed - before.malformed));
    CHECK(after.dropped_connections - before.dropped_connections == 3, "3 connections dropped, got %llu",
          (unsigned long long)(after.dropped_connections - before.dropped_connections));
    CHECK(after.connections == 2, "the two good connections are open: %llu", (unsigned long long)after.connections);

    /* what the log says about each bad line */
    char *log = scratch_read_file(log_path);
    REQUIRE(log, "reading the log %s", log_path);
    char who[160];
    snprintf(who, sizeof who, "run %lld rank 0: ", (long long)run);
    const char *said[] = {
        "a step event without an integer global_step; line skipped: {\"type\":\"step\",\"global_step\":\"2\"",
        "not JSON (",
        "not JSON ('[' or '{' expected near '42'); line skipped: 42",
        "an event must be a JSON object; line skipped: [7]",
        "an event without a \"type\"; line skipped: {\"run\":",
        "a status event without a state; line skipped: {\"type\":\"status\",\"detail\":\"no state\"}",
        "an event for another run than the connection's hello; line skipped:",
        "an epoch event without an integer epoch; line skipped: {\"type\":\"epoch\",\"epoch\":\"zero\"",
    };
    for (size_t i = 0; i < sizeof said / sizeof *said; i++) {
        char *want = xasprintf("%s%s", who, said[i]);
        CHECK(strstr(log, want), "the log says: %s", want);
        free(want);
    }
    snprintf(who, sizeof who, "run %lld rank -1: a line longer than 16 MiB; line skipped: ", (long long)run);
    CHECK(strstr(log, who), "the log says the over-long line was skipped: %s", who);
    CHECK(strstr(log, "the first event of a connection must be a hello, not \"step\"; connection dropped"),
          "the log says why the connection without a hello was dropped");
    char *bad = xasprintf("hello for run %lld rank 0 from uid %d with the wrong secret, from another account than the "
                          "run's, or the run is not active; connection dropped", (long long)run, (int)getuid());
    CHECK(strstr(log, bad), "the log says: %s", bad);
    free(bad);
    CHECK(strstr(log, "a hello without a valid run and rank; connection dropped"),
          "the log says why the hello without a rank was dropped");
    CHECK(!strstr(log, "gpu_temperature") && !strstr(log, "hello there"),
          "an unknown event type and a log event are not malformed");
    free(log);

    close(fd);
    close(fd2);
    close(no_hello);
    close(bad_secret);
    close(no_rank);
    ingest_stop();
}

/* A reporter's metric (reporter/README.md) becomes the op of the kind that stores it. */
static void test_parse_metric(void) {
    const op_kind_desc *d = op_kind_for_event("metric");
    REQUIRE(d, "metric is an event kind");
    json_t *e = ev("{\"global_step\": 7, \"values\": {\"loss\": 0.5, \"lr\": 0.001, \"acc\": 0.75, \"gap\": null}}");
    store_op op = {.kind = d->kind, .rank = 0};
    CHECK(d->parse(e, &op) == NULL && op.kind == OP_STEP, "rank 0's step metric is a step");
    CHECK(op.u.step.global_step == 7 && op.u.step.loss == 0.5 && op.u.step.lr == 0.001 &&
              op.u.step.epoch == NO_INT && isnan(op.u.step.samples_per_s),
          "with its loss and lr");
    CHECK(json_object_size(op.u.step.series) == 2 &&
              json_number_value(json_object_get(op.u.step.series, "acc")) == 0.75 &&
              json_is_null(json_object_get(op.u.step.series, "gap")),
          "and its other values as named series");
    store_op_free(&op);
    op = (store_op){.kind = d->kind, .rank = 1};
    CHECK(d->parse(e, &op) == NULL && op.kind == OP_HEARTBEAT && op.u.heartbeat.global_step == 7,
          "another rank's step metric is its progress");
    store_op_free(&op);
    json_decref(e);
    e = ev("{\"epoch\": 2, \"values\": {\"lr\": 0.01, \"train_loss\": 0.4, \"test_acc\": 0.9}}");
    op = (store_op){.kind = d->kind, .rank = 0};
    CHECK(d->parse(e, &op) == NULL && op.kind == OP_EPOCH && op.u.epoch.epoch == 2 && op.u.epoch.lr == 0.01 &&
              op.u.epoch.train_loss == 0.4 && op.u.epoch.test_acc == 0.9 && isnan(op.u.epoch.test_loss),
          "an epoch metric is an epoch");
    store_op_free(&op);
    json_decref(e);
    const char *bad[][2] = {
        {"{\"global_step\": 1}", "a metric event without a values object"},
        {"{\"global_step\": 1, \"values\": {\"loss\": \"low\"}}", "a metric value that is not a number or null"},
        {"{\"values\": {\"loss\": 1}}", "a metric event needs exactly one of an integer global_step and an integer epoch"},
        {"{\"epoch\": 0, \"global_step\": 3, \"values\": {}}",
         "a metric event needs exactly one of an integer global_step and an integer epoch"},
        {"{\"global_step\": 0, \"values\": {}}", "a metric event's global_step counts steps done: from 1"},
        {"{\"global_step\": 4294967297, \"values\": {\"loss\": 1}}",
         "a metric event's global_step above 4294967295 (2^32 - 1), the steps a run can store"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        e = ev(bad[i][0]);
        op = (store_op){.kind = d->kind, .rank = 0};
        const char *why = d->parse(e, &op);
        CHECK(why && !strcmp(why, bad[i][1]), "%s is refused: %s", bad[i][0], why ? why : "(taken)");
        store_op_free(&op);
        json_decref(e);
    }
}

int main(void) {
    test_table();
    test_parse_metric();
    test_readers();
    test_parse_valid();
    test_parse_refused();

    char *dir = scratch_dir_make("ingest");
    REQUIRE(dir, "mkdtemp: %s", strerror(errno));
    state_layout_init(dir);
    char *log_path = xasprintf("%s/ddpd.log", dir);
    server_log_config lc;
    char err[512];
    REQUIRE(server_log_parse_config("info", log_path, "0", "0", &lc, err, sizeof err) == 0 &&
                server_log_setup(&lc, err, sizeof err) == 0,
            "logging to %s: %s", log_path, err);
    REQUIRE(store_open(layout_db_path(), NULL, NULL, err, sizeof err) == 0, "store_open: %s", err);
    test_socket(log_path);
    store_read_release();
    store_close();
    server_log_shutdown();
    free(log_path);
    state_layout_free();
    scratch_dir_remove(dir);
    free(dir);
    return test_done("test_ingest_parse");
}
