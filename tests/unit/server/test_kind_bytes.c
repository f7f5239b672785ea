/* What each event kind becomes, byte for byte: a scripted run's trainer events
 * (every socket kind, and a reporter's metric as each kind it turns into) are parsed
 * as ingest parses them and applied by a real store on a SQLite file with the live
 * feed behind it; then the SSE frames the feed has for them, the API's JSON of the
 * run, its epochs and its ranks (store_read.h), the rows the tables hold, and the
 * reason every kind of malformed event is skipped with are written out as text and
 * compared with tests/unit/server/kind_bytes.golden. Other tests parse that JSON and
 * check values; this one holds the order of members, the number formats and the
 * nulls, so that a change to how kinds are described (event_kinds.h) that moves a
 * byte of what clients see, or of what is stored, fails here. When the difference
 * is meant (a contract changed), the text it got is in the file it names: review it
 * and copy it over the golden one. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "base.h"
#include "check.h"
#include "feed.h"
#include "scratch_dir.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"

#define T0 1700000000000LL /* unix ms: every op's time is fixed, so that the text is */

static buf_t OUT;

/* ---- the scripted run ---- */

static int64_t submit(store_op *op) { return store_submit_wait(op); }

static int64_t make_run(void) {
    store_op ins = {.kind = OP_RUN_INSERT, .t = T0};
    ins.u.insert.name = xstrdup("bytes");
    ins.u.insert.config = xstrdup("{\"name\":\"bytes\",\"train\":{\"epochs\":2}}");
    ins.u.insert.world_size = 2;
    ins.u.insert.device_kind = "cpu";
    ins.u.insert.memory_bytes = 1LL << 30; /* resources.memory_gb 1 */
    int64_t run = submit(&ins);
    store_op starting = {.kind = OP_RUN_STARTING, .run_id = run, .t = T0 + 1};
    starting.u.starting.devices = xstrdup("[\"cpu:0\",\"cpu:1\"]");
    starting.u.starting.pid = 4242;
    starting.u.starting.pid_start_time = 99;
    starting.u.starting.secret = xstrdup("0123456789abcdef");
    submit(&starting);
    store_op running = {.kind = OP_RUN_RUNNING, .run_id = run, .t = T0 + 2};
    submit(&running);
    store_op disk = {.kind = OP_RUN_DISK, .run_id = run, .t = T0 + 3}; /* its directory measured (disk_use.h) */
    disk.u.disk.bytes = 12288;
    submit(&disk);
    return run;
}

/* A run on Slurm (serve --executor slurm): queued with its job's id while the job
 * waits in Slurm's queue, then starting on the nodes Slurm gave it, no pid here. */
static int64_t make_slurm_run(void) {
    store_op ins = {.kind = OP_RUN_INSERT, .t = T0 + 100};
    ins.u.insert.name = xstrdup("on-slurm");
    ins.u.insert.config = xstrdup("{\"name\":\"on-slurm\",\"distributed\":{\"world_size\":2,\"nodes\":2}}");
    ins.u.insert.world_size = 2;
    ins.u.insert.device_kind = "cpu";
    int64_t run = submit(&ins);
    store_op submitted = {.kind = OP_RUN_SUBMITTED, .run_id = run, .t = T0 + 101};
    submitted.u.submitted.job = xstrdup("4242");
    submitted.u.submitted.secret = xstrdup("fedcba9876543210");
    submit(&submitted);
    store_op starting = {.kind = OP_RUN_STARTING, .run_id = run, .t = T0 + 102};
    starting.u.starting.devices = xstrdup("[\"n1/cpu:0\",\"n2/cpu:0\"]");
    starting.u.starting.pid = NO_INT;
    starting.u.starting.pid_start_time = NO_INT;
    starting.u.starting.secret = xstrdup("fedcba9876543210");
    starting.u.starting.job = xstrdup("4242");
    submit(&starting);
    return run;
}

/* One event line as ingest takes it (the kind's parse, the op's rank and time from
 * the event), applied; a line its kind refuses is a failed check. */
static void event(int64_t run, const char *line) {
    json_error_t jerr;
    json_t *ev = json_loads(line, 0, &jerr);
    REQUIRE(ev, "bad test JSON (%s): %s", jerr.text, line);
    const op_kind_desc *d = op_kind_for_event(json_string_value(json_object_get(ev, "type")));
    REQUIRE(d, "no kind for %s", line);
    store_op op = {.kind = d->kind, .run_id = run, .rank = (int)event_int(ev, "rank"), .t = event_int(ev, "t")};
    const char *why = d->parse(ev, &op);
    CHECK(!why, "%s: refused: %s", line, why ? why : "");
    if (why) store_op_free(&op);
    else submit(&op);
    json_decref(ev);
}

static void report_events(int64_t run) {
    event(run, "{\"type\":\"hello\",\"rank\":-1,\"t\":1700000000010,\"pid\":4242,\"host\":\"node-a\",\"device\":null,"
               "\"world_size\":2,\"secret\":\"x\",\"epochs\":2,\"steps_per_epoch\":2,\"total_steps\":4}");
    event(run, "{\"type\":\"hello\",\"rank\":0,\"t\":1700000000011,\"pid\":5000,\"host\":\"node-a\",\"device\":\"cpu\"}");
    event(run, "{\"type\":\"hello\",\"rank\":1,\"t\":1700000000012,\"pid\":5001,\"host\":\"node-b\","
               "\"device\":\"cuda:1 NVIDIA H200\"}");
    event(run, "{\"type\":\"status\",\"rank\":0,\"t\":1700000000013,\"state\":\"training\",\"detail\":\"epoch 0\"}");
    event(run, "{\"type\":\"status\",\"rank\":1,\"t\":1700000000014,\"state\":\"loading\"}");
    event(run, "{\"type\":\"status\",\"rank\":0,\"t\":1700000000015,\"state\":\"training\",\"detail\":\"epoch 0\"}");
    event(run, "{\"type\":\"step\",\"rank\":0,\"t\":1700000000020,\"epoch\":0,\"step\":0,\"global_step\":1,"
               "\"loss\":2.5,\"lr\":0.1,\"samples_per_s\":1000.25}");
    event(run, "{\"type\":\"step\",\"rank\":0,\"t\":1700000000021,\"epoch\":0,\"step\":1,\"global_step\":2,"
               "\"loss\":2.25,\"lr\":null,\"samples_per_s\":1100}");
    event(run, "{\"type\":\"heartbeat\",\"rank\":1,\"t\":1700000000022,\"global_step\":2,\"step_ms\":12.5,"
               "\"gpu_mem_used_bytes\":1048576,\"gpu_mem_total_bytes\":4194304}");
    event(run, "{\"type\":\"heartbeat\",\"rank\":0,\"t\":1700000000023,\"global_step\":2,\"step_ms\":12.75}");
    event(run, "{\"type\":\"heartbeat\",\"rank\":-1,\"t\":1700000000023,\"global_step\":2}");
    event(run, "{\"type\":\"epoch\",\"rank\":0,\"t\":1700000000030,\"epoch\":0,\"lr\":0.1,\"train_loss\":0.5,"
               "\"test_loss\":0.625,\"test_acc\":0.875,\"seconds\":1.5,\"samples_per_s\":null}");
    event(run, "{\"type\":\"epoch\",\"rank\":0,\"t\":1700000000031,\"epoch\":0,\"lr\":0.1,\"train_loss\":0.5,"
               "\"test_loss\":0.625,\"test_acc\":0.875,\"seconds\":1.5}");
    event(run, "{\"type\":\"checkpoint\",\"rank\":0,\"t\":1700000000032,\"epoch\":0,\"global_step\":2,"
               "\"path\":\"ckpt/step-2.safetensors\",\"bytes\":8192,\"removed\":[]}");
    event(run, "{\"type\":\"metric\",\"rank\":0,\"t\":1700000000040,\"global_step\":3,"
               "\"values\":{\"loss\":2.0,\"acc\":0.5,\"lr\":0.1,\"samples_per_s\":null,\"step\":7}}");
    event(run, "{\"type\":\"metric\",\"rank\":1,\"t\":1700000000041,\"global_step\":3,\"values\":{\"loss\":1.0}}");
    event(run, "{\"type\":\"heartbeat\",\"rank\":1,\"t\":1700000000042,\"global_step\":3,\"step_ms\":13}");
    event(run, "{\"type\":\"metric\",\"rank\":0,\"t\":1700000000043,\"epoch\":1,"
               "\"values\":{\"train_loss\":0.25,\"test_acc\":0.9,\"epoch\":5}}");
    event(run, "{\"type\":\"checkpoint\",\"rank\":0,\"t\":1700000000044,\"epoch\":1,\"global_step\":4,"
               "\"path\":\"ckpt/step-4.safetensors\",\"bytes\":9000,\"removed\":[\"ckpt/step-2.safetensors\"]}");
    event(run, "{\"type\":\"status\",\"rank\":1,\"t\":1700000000045,\"state\":\"done\",\"detail\":\"\"}");
    /* the launcher's attempts: the first fails and restarts; two parts start the second
     * (their ranks' offsets merged); the same start again changes nothing; the server's
     * own word ends it (a lost node: no rank blamed) */
    event(run, "{\"type\":\"attempt\",\"rank\":-1,\"t\":1700000000050,\"attempt\":0,\"phase\":\"started\","
               "\"max_restarts\":2,\"master_port\":29601,\"log_offsets\":{\"0\":0,\"1\":0}}");
    event(run, "{\"type\":\"attempt\",\"rank\":-1,\"t\":1700000000051,\"attempt\":0,\"phase\":\"ended\","
               "\"status\":\"failed\",\"reason\":\"rank 1 exited with status 3: boom\",\"failing_rank\":1,"
               "\"exit_code\":3,\"signal\":null,\"last_line\":\"boom\",\"restarting\":true,\"backoff_s\":1.5}");
    event(run, "{\"type\":\"attempt\",\"rank\":-1,\"t\":1700000000052,\"attempt\":1,\"phase\":\"started\","
               "\"max_restarts\":2,\"master_port\":29602,\"log_offsets\":{\"0\":184}}");
    event(run, "{\"type\":\"attempt\",\"rank\":-1,\"t\":1700000000053,\"attempt\":1,\"phase\":\"started\","
               "\"max_restarts\":2,\"master_port\":29602,\"log_offsets\":{\"1\":236}}");
    event(run, "{\"type\":\"attempt\",\"rank\":-1,\"t\":1700000000054,\"attempt\":1,\"phase\":\"started\","
               "\"max_restarts\":2,\"master_port\":29602,\"log_offsets\":{\"1\":236}}");
    event(run, "{\"type\":\"attempt\",\"rank\":-1,\"t\":1700000000055,\"attempt\":1,\"phase\":\"ended\","
               "\"status\":\"failed\",\"reason\":\"node b (ranks 1 to 1) stopped heartbeating\",\"failing_rank\":null,"
               "\"exit_code\":null,\"signal\":null,\"last_line\":\"\",\"restarting\":false}");
    event(run, "{\"type\":\"attempt\",\"rank\":-1,\"t\":1700000000056,\"attempt\":2,\"phase\":\"started\","
               "\"max_restarts\":2,\"checkpoint\":\"ckpt/step-4.safetensors\"}");
}

/* ---- what came of it ---- */

typedef struct {
    feed_sub s;
} quiet_sub;

static void no_op(feed_sub *s) { (void)s; }

/* Every durable event since the start, then the newest progress per run and rank:
 * the feed's frames as a stream gets them (its keep-alive comments left out). */
static void write_feed(void) {
    quiet_sub q = {.s = {.run_id = 0, .park = no_op, .wake = no_op}};
    feed_subscribe(&q.s, 0);
    buf_t b = {0};
    for (int i = 0; i < 1000 && feed_read(&q.s, &b, 1u << 20) == FEED_DATA; i++) {
    }
    feed_unsubscribe(&q.s);
    buf_printf(&OUT, "== the feed ==\n");
    for (const char *p = b.data ? b.data : ""; *p;) {
        const char *end = strstr(p, "\n\n");
        size_t len = end ? (size_t)(end - p) + 2 : strlen(p);
        if (p[0] != ':') buf_append(&OUT, p, len);
        p += len;
    }
    buf_free(&b);
}

static void write_json(const char *title, json_t *v, const char *raw) {
    char *text = v ? json_dumps(v, JSON_FLAGS) : NULL;
    buf_printf(&OUT, "== %s ==\n%s\n", title, text ? text : "(none)");
    if (raw) buf_printf(&OUT, "%s\n", raw);
    free(text);
    json_decref(v);
}

static void write_api(int64_t run) {
    char *raw = NULL;
    json_t *one = store_run_json(run, &raw);
    write_json("GET /runs/{id}", one, raw);
    free(raw);
    int64_t next = 0;
    run_filter all;
    run_filter_init(&all);
    write_json("GET /runs", store_runs_page(&all, 10, &next), NULL);
    write_json("GET /runs/{id}/epochs", store_epochs_json(run), NULL);
    write_json("GET /runs/{id}/ranks", store_ranks_json(run), NULL);
    write_json("series keys", store_series_keys(run, false), NULL);
}

/* The rows as stored, every column, each value as SQL writes it (quote()). */
static void write_table(sqlite3 *db, const char *table, const char *order) {
    char *sql = xasprintf("SELECT * FROM %s ORDER BY %s", table, order);
    sqlite3_stmt *st = NULL;
    REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
    buf_printf(&OUT, "== table %s ==\n", table);
    while (sqlite3_step(st) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(st); i++) {
            const char *v = (const char *)sqlite3_column_text(st, i);
            int type = sqlite3_column_type(st, i);
            if (type == SQLITE_NULL) buf_printf(&OUT, "%s%s=NULL", i ? " " : "", sqlite3_column_name(st, i));
            else if (type == SQLITE_TEXT) buf_printf(&OUT, "%s%s='%s'", i ? " " : "", sqlite3_column_name(st, i), v);
            else buf_printf(&OUT, "%s%s=%s", i ? " " : "", sqlite3_column_name(st, i), v);
        }
        buf_printf(&OUT, "\n");
    }
    sqlite3_finalize(st);
    free(sql);
}

static void write_tables(void) {
    sqlite3 *db = NULL;
    REQUIRE(sqlite3_open_v2(layout_db_path(), &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK, "open the database");
    write_table(db, "runs", "id");
    write_table(db, "ranks", "run_id, rank");
    write_table(db, "steps", "run_id, global_step");
    write_table(db, "series", "run_id, key, global_step");
    write_table(db, "epochs", "run_id, epoch");
    write_table(db, "checkpoints", "run_id, global_step");
    write_table(db, "run_attempts", "run_id, attempt");
    sqlite3_close(db);
}

/* Every reason a kind's parse gives, for lines that are each wrong in one way. */
static void write_refusals(void) {
    static const char *const lines[] = {
        "{\"type\":\"status\"}",
        "{\"type\":\"status\",\"state\":3,\"detail\":\"x\"}",
        "{\"type\":\"step\",\"loss\":1.0}",
        "{\"type\":\"step\",\"global_step\":12.5}",
        "{\"type\":\"epoch\",\"test_acc\":0.9}",
        "{\"type\":\"epoch\",\"epoch\":\"1\"}",
        "{\"type\":\"checkpoint\",\"path\":\"x\"}",
        "{\"type\":\"checkpoint\",\"global_step\":4,\"path\":\"x\",\"removed\":\"y\"}",
        "{\"type\":\"checkpoint\",\"global_step\":4,\"path\":\"x\",\"removed\":[\"a\",3]}",
        "{\"type\":\"metric\",\"global_step\":1}",
        "{\"type\":\"metric\",\"global_step\":1,\"values\":{\"loss\":\"1\"}}",
        "{\"type\":\"metric\",\"global_step\":1,\"values\":{\"\":1}}",
        "{\"type\":\"metric\",\"values\":{\"loss\":1}}",
        "{\"type\":\"metric\",\"global_step\":1,\"epoch\":1,\"values\":{}}",
        "{\"type\":\"metric\",\"global_step\":0,\"values\":{}}",
        "{\"type\":\"attempt\",\"attempt\":0}",
        "{\"type\":\"attempt\",\"attempt\":0,\"phase\":\"begun\"}",
        "{\"type\":\"attempt\",\"phase\":\"started\"}",
        "{\"type\":\"attempt\",\"attempt\":-1,\"phase\":\"started\"}",
        "{\"type\":\"attempt\",\"attempt\":0,\"phase\":\"started\",\"log_offsets\":[0]}",
        "{\"type\":\"attempt\",\"attempt\":0,\"phase\":\"started\",\"log_offsets\":{\"x\":0}}",
        "{\"type\":\"attempt\",\"attempt\":0,\"phase\":\"started\",\"log_offsets\":{\"0\":-5}}",
        "{\"type\":\"attempt\",\"attempt\":0,\"phase\":\"ended\"}",
        "{\"type\":\"attempt\",\"attempt\":0,\"phase\":\"ended\",\"status\":\"running\"}",
    };
    buf_printf(&OUT, "== refused ==\n");
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        json_t *ev = json_loads(lines[i], 0, NULL);
        const op_kind_desc *d = op_kind_for_event(json_string_value(json_object_get(ev, "type")));
        store_op op = {.kind = d ? d->kind : OP_SYNC, .rank = 0};
        const char *why = d ? d->parse(ev, &op) : "no kind";
        buf_printf(&OUT, "%s -> %s\n", lines[i], why ? why : "(taken)");
        store_op_free(&op);
        json_decref(ev);
    }
}

/* ---- the comparison ---- */

static void compare(const char *dir) {
    const char *src = getenv("DDPD_SOURCE_DIR");
    REQUIRE(src && *src, "DDPD_SOURCE_DIR names the source tree (ctest sets it)");
    char *golden_path = xasprintf("%s/tests/unit/server/kind_bytes.golden", src);
    char *golden = scratch_read_file(golden_path);
    CHECK(golden, "%s: %s", golden_path, strerror(errno));
    const char *got = OUT.data ? OUT.data : "";
    if (golden && strcmp(golden, got) == 0) {
        CHECK(1, "the same bytes");
    } else {
        /* the first line that differs, and the whole text kept for review */
        size_t line = 1, at = 0;
        while (golden && golden[at] && golden[at] == got[at]) line += got[at++] == '\n';
        char *kept = xasprintf("%s.got", dir);
        FILE *f = fopen(kept, "wb");
        if (f) {
            fputs(got, f);
            fclose(f);
        }
        const char *g = golden ? golden + at : "", *o = got + at;
        while (at && got[at - 1] != '\n') at--, g--, o--;
        CHECK(0, "line %zu of %s differs:\n  golden: %.*s\n  got:    %.*s\nthe whole text is in %s", line, golden_path,
              (int)strcspn(g, "\n"), g, (int)strcspn(o, "\n"), o, kept);
        free(kept);
    }
    free(golden);
    free(golden_path);
}

int main(void) {
    char *dir = scratch_dir_make("kind-bytes");
    REQUIRE(dir, "mkdtemp: %s", strerror(errno));
    state_layout_init(dir);
    char err[512];
    feed_init();
    static const store_observer feed_observes_store = {feed_attach, feed_detach, feed_record, feed_commit};
    REQUIRE(store_open(layout_db_path(), &feed_observes_store, NULL, err, sizeof err) == 0, "store_open: %s", err);

    int64_t run = make_run();
    REQUIRE(run == 1, "the first run is 1, got %lld", (long long)run);
    report_events(run);
    int64_t on_slurm = make_slurm_run();
    REQUIRE(on_slurm == 2, "the second run is 2, got %lld", (long long)on_slurm);
    store_sync();
    write_feed();
    write_api(run);
    char *raw = NULL;
    json_t *slurm_run = store_run_json(on_slurm, &raw);
    write_json("GET /runs/{id} of a run on Slurm", slurm_run, raw);
    free(raw);
    write_tables();
    write_refusals();
    compare(dir);

    buf_free(&OUT);
    feed_stop();
    store_read_release();
    store_close();
    state_layout_free();
    scratch_dir_remove(dir);
    free(dir);
    return test_done("test_kind_bytes");
}
