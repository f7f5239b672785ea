/* The CPU cost of the event kinds (server/store/event_kinds.h), in-process, without
 * the socket: each socket kind's parse of a typical event (the JSON already decoded,
 * as ingest hands it over), and the store's apply of step events, the hot path of
 * ingest (the writer's batches into a real SQLite file: binding, SQLite's work, the
 * run's progress). Times are CPU times (the thread's for parsing, the process's for
 * the store, whose writer is a thread of its own), so that other load on a shared
 * machine moves them less than it moves wall-clock figures; each is the best of
 * several rounds.
 *
 * Usage: bench_event_kinds [N]   (N step events to apply a round; default 200000) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "event_kinds.h"
#include "scratch_dir.h"
#include "state_layout.h"
#include "store.h"

#define ROUNDS 5
#define PARSES 200000
#define BATCH 256

static double cpu_s(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const struct {
    const char *what, *line;
    int rank;
} EVENTS[] = {
    {"step", "{\"type\":\"step\",\"epoch\":3,\"step\":117,\"global_step\":1523,\"loss\":0.4321,\"lr\":0.05,"
             "\"samples_per_s\":51234.5}", 0},
    {"metric (a step)", "{\"type\":\"metric\",\"global_step\":1523,\"values\":{\"loss\":0.4321,\"lr\":0.05,\"acc\":0.91}}",
     0},
    {"heartbeat", "{\"type\":\"heartbeat\",\"global_step\":1523,\"step_ms\":12.5,\"gpu_mem_used_bytes\":1048576,"
                  "\"gpu_mem_total_bytes\":4194304}", 1},
    {"epoch", "{\"type\":\"epoch\",\"epoch\":3,\"lr\":0.05,\"train_loss\":0.41,\"test_loss\":0.45,\"test_acc\":0.87,"
              "\"seconds\":12.25,\"samples_per_s\":4900}", 0},
    {"status", "{\"type\":\"status\",\"state\":\"training\",\"detail\":\"epoch 3\"}", 0},
};

static void bench_parse(void) {
    for (size_t e = 0; e < sizeof EVENTS / sizeof *EVENTS; e++) {
        json_t *ev = json_loads(EVENTS[e].line, 0, NULL);
        const op_kind_desc *d = op_kind_for_event(json_string_value(json_object_get(ev, "type")));
        if (!d) {
            fprintf(stderr, "bench_event_kinds: no kind for %s\n", EVENTS[e].line);
            exit(1);
        }
        double best = 1e9;
        for (int r = 0; r < ROUNDS; r++) {
            double t0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
            for (int i = 0; i < PARSES; i++) {
                store_op op = {.kind = d->kind, .run_id = 1, .rank = EVENTS[e].rank, .t = 1};
                if (d->parse(ev, &op)) exit(1);
                store_op_free(&op);
            }
            double per = (cpu_s(CLOCK_THREAD_CPUTIME_ID) - t0) / PARSES;
            if (per < best) best = per;
        }
        printf("  parse %-16s %7.1f ns/event (CPU, best of %d rounds of %d)\n", EVENTS[e].what, best * 1e9, ROUNDS,
               PARSES);
        json_decref(ev);
    }
}

static int64_t live_run(void) {
    store_op ins = {.kind = OP_RUN_INSERT, .t = now_ms()};
    ins.u.insert.name = xstrdup("bench");
    ins.u.insert.config = xstrdup("{}");
    ins.u.insert.world_size = 1;
    ins.u.insert.device_kind = "cpu";
    int64_t run = store_submit_wait(&ins);
    store_op starting = {.kind = OP_RUN_STARTING, .run_id = run, .t = now_ms()};
    starting.u.starting.pid = NO_INT;
    starting.u.starting.pid_start_time = NO_INT;
    store_submit_wait(&starting);
    store_op running = {.kind = OP_RUN_RUNNING, .run_id = run, .t = now_ms()};
    store_submit_wait(&running);
    return run;
}

static void bench_apply(int n) {
    json_t *ev = json_loads(EVENTS[0].line, 0, NULL);
    const op_kind_desc *d = op_kind_for_event("step");
    store_op *batch = xmalloc(BATCH * sizeof *batch);
    double best = 1e9;
    for (int r = 0; r < ROUNDS; r++) {
        int64_t run = live_run();
        double t0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        for (int i = 0; i < n;) {
            int k = 0;
            for (; k < BATCH && i < n; k++, i++) {
                batch[k] = (store_op){.kind = d->kind, .run_id = run, .rank = 0, .t = 1700000000000LL + i};
                d->parse(ev, &batch[k]);
                batch[k].u.step.global_step = i + 1;
            }
            store_submit(batch, (size_t)k);
        }
        store_sync();
        double per = (cpu_s(CLOCK_PROCESS_CPUTIME_ID) - t0) / n;
        if (per < best) best = per;
    }
    printf("  apply step               %7.2f µs/event (CPU of the process: parse, queue, the writer; best of %d rounds"
           " of %d)\n", best * 1e6, ROUNDS, n);
    free(batch);
    json_decref(ev);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200000;
    if (n < 1) {
        fprintf(stderr, "usage: bench_event_kinds [N step events a round]\n");
        return 2;
    }
    char *dir = scratch_dir_make("bench-kinds");
    if (!dir) {
        fprintf(stderr, "bench_event_kinds: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    state_layout_init(dir);
    char err[512];
    if (store_open(layout_db_path(), NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "bench_event_kinds: %s\n", err);
        return 1;
    }
    printf("event kinds: CPU per event\n");
    bench_parse();
    bench_apply(n);
    store_close();
    state_layout_free();
    scratch_dir_remove(dir);
    free(dir);
    return 0;
}
