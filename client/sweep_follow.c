/* Following a sweep live: see sweep_follow.h. */
#include "sweep_follow.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_http.h"
#include "format.h"
#include "monotonic.h"
#include "sse_reader.h"

#define IDLE_S 60L /* ddpd sends a heartbeat comment every 15 s */

typedef struct {
    int64_t id;
    char metric[64];
    int64_t last_event_id;
    bool heard;
    int result; /* -1: not ended */
    int64_t *runs; /* the trials' runs, by trial number (0: none yet) */
    int n_runs;
    int best_trial;   /* the best as last said, -1: none */
    double best_metric;
} follower;

static void remember_run(follower *f, int trial, int64_t run) {
    if (trial < 0 || run <= 0) return;
    if (trial >= f->n_runs) {
        int64_t *more = realloc(f->runs, (size_t)(trial + 1) * sizeof *more);
        if (!more) return;
        for (int i = f->n_runs; i <= trial; i++) more[i] = 0;
        f->runs = more;
        f->n_runs = trial + 1;
    }
    f->runs[trial] = run;
}

static int trial_of_run(const follower *f, int64_t run) {
    for (int i = 0; i < f->n_runs; i++)
        if (f->runs[i] == run) return i;
    return -1;
}

static void stamp(char *out, size_t n) {
    time_t now = time(NULL);
    strftime(out, n, "%H:%M:%S", localtime(&now));
}

/* The best as the server names it now: a line when it changed. */
static void say_best(follower *f) {
    char path[64];
    snprintf(path, sizeof path, "/sweeps/%lld", (long long)f->id);
    int ec = 0;
    json_t *s = get_json(path, &ec);
    json_t *best = json_object_get(s, "best");
    if (json_is_object(best)) {
        int trial = (int)json_integer_value(json_object_get(best, "trial"));
        json_t *m = json_object_get(best, "metric");
        double v = json_is_number(m) ? json_number_value(m) : NAN;
        if (trial != f->best_trial || (v != f->best_metric && !(isnan(v) && isnan(f->best_metric)))) {
            f->best_trial = trial;
            f->best_metric = v;
            char cell[32], t[16], *params = json_dumps(json_object_get(best, "params"), JSON_COMPACT | JSON_REAL_PRECISION(15));
            fmt_num(m, cell, sizeof cell);
            stamp(t, sizeof t);
            printf("%s  best: trial %d (run %lld), %s %s%s, %s\n", t, trial,
                   (long long)json_integer_value(json_object_get(best, "run_id")), f->metric, cell,
                   json_is_true(json_object_get(best, "last_reported")) ? " (its last reported value)" : "",
                   params ? params : "{}");
            free(params);
        }
    }
    json_decref(s);
}

static int sweep_result(const char *action) {
    if (!strcmp(action, "succeeded")) return EXIT_OK;
    if (!strcmp(action, "failed")) return EXIT_RUN_FAILED;
    if (!strcmp(action, "canceled")) return EXIT_RUN_CANCELED;
    return -1;
}

static void on_sweep(follower *f, const json_t *d) {
    if (json_integer_value(json_object_get(d, "sweep")) != f->id) return;
    const char *action = json_string_value(json_object_get(d, "action"));
    const char *detail = json_string_value(json_object_get(d, "detail"));
    json_t *trial = json_object_get(d, "trial");
    int64_t run = json_integer_value(json_object_get(d, "run"));
    char t[16];
    stamp(t, sizeof t);
    if (!action) return;
    if (json_is_integer(trial)) {
        remember_run(f, (int)json_integer_value(trial), run);
        char on[48] = "";
        if (run > 0) snprintf(on, sizeof on, " (run %lld)", (long long)run);
        printf("%s  trial %lld%s %s%s%s\n", t, (long long)json_integer_value(trial), on, action, detail ? ": " : "",
               detail ? detail : "");
        fflush(stdout);
        if (strcmp(action, "made") && strcmp(action, "started") && strcmp(action, "found")) say_best(f);
        return;
    }
    printf("%s  sweep %lld %s%s%s\n", t, (long long)f->id, action, detail ? ": " : "", detail ? detail : "");
    fflush(stdout);
    int r = sweep_result(action);
    if (r >= 0) {
        say_best(f);
        f->result = r;
    }
}

/* A trial's run reported an epoch: its value of the sweep's metric when the epoch has it. */
static void on_epoch(follower *f, const json_t *d) {
    int64_t run = json_integer_value(json_object_get(d, "run"));
    int trial = trial_of_run(f, run);
    if (trial < 0) return;
    long long epoch = json_integer_value(json_object_get(d, "epoch"));
    json_t *v = json_incref(json_object_get(d, f->metric)), *series = NULL;
    if (!v) { /* a name beyond the epoch table's: its per-epoch series, the point at this epoch */
        char path[160];
        int ec = 0;
        snprintf(path, sizeof path, "/runs/%lld/metrics?key=epoch:%s", (long long)run, f->metric);
        series = get_json(path, &ec);
        size_t i;
        json_t *pt;
        json_array_foreach(json_object_get(series, "points"), i, pt)
            if (json_integer_value(json_array_get(pt, 0)) == epoch) v = json_incref(json_array_get(pt, 1));
        json_decref(series);
    }
    char t[16], cell[32];
    stamp(t, sizeof t);
    if (json_is_number(v)) {
        fmt_num(v, cell, sizeof cell);
        printf("%s  trial %d (run %lld) epoch %lld: %s %s\n", t, trial, (long long)run, epoch, f->metric, cell);
    } else {
        printf("%s  trial %d (run %lld) epoch %lld reported\n", t, trial, (long long)run, epoch);
    }
    json_decref(v);
    fflush(stdout);
    say_best(f);
}

static int on_event(void *cls, const char *event, const char *id, const char *data) {
    follower *f = cls;
    f->heard = true;
    if (id) f->last_event_id = atoll(id);
    json_t *d = json_loads(data, 0, NULL);
    if (!d) return 0;
    if (!strcmp(event, "sweep")) on_sweep(f, d);
    else if (!strcmp(event, "epoch")) on_epoch(f, d);
    json_decref(d);
    return f->result >= 0;
}

int sweep_follow(int64_t id) {
    char path[96], err[1024];
    snprintf(path, sizeof path, "/sweeps/%lld", (long long)id);
    int ec = 0;
    json_t *s = get_json(path, &ec);
    if (!s) return ec;
    follower f = {.id = id, .result = -1, .best_trial = -1, .best_metric = NAN};
    const char *key = json_string_value(json_object_get(json_object_get(s, "metric"), "key"));
    snprintf(f.metric, sizeof f.metric, "%s", key ? key : "metric");
    const char *status = json_string_value(json_object_get(s, "status")), *name = json_string_value(json_object_get(s, "name"));
    printf("following sweep %lld %s (%s, judged by %s; %lld trials)\n", (long long)id, name ? name : "",
           status ? status : "?", f.metric, (long long)json_integer_value(json_object_get(s, "n_trials")));
    int ended = status ? sweep_result(status) : -1;
    if (ended >= 0) { /* nothing left to follow: how it ended, and its best */
        const char *reason = json_string_value(json_object_get(s, "reason"));
        printf("sweep %lld has already %s%s%s\n", (long long)id, status, reason ? ": " : "", reason ? reason : "");
        say_best(&f);
    }
    fflush(stdout);
    json_decref(s);
    if (ended >= 0) return ended;
    sse_retry retry = {0};
    snprintf(path, sizeof path, "/events");
    for (;;) {
        long st = 0;
        f.heard = false;
        int rc = sse_read(path, f.last_event_id, IDLE_S, on_event, &f, &st, err, sizeof err);
        if (f.result >= 0) break;
        if (client_interrupted()) {
            fprintf(stderr, "\nddpctl: stopped following; sweep %lld goes on (ddpctl sweep cancel %lld stops it)\n",
                    (long long)id, (long long)id);
            free(f.runs);
            return EXIT_INTERRUPTED;
        }
        int verdict = sse_retry_after(&retry, rc, st, f.heard, err); /* as a run's follow does */
        if (verdict != SSE_RETRY) {
            free(f.runs);
            return verdict == SSE_GIVE_UP_REFUSED ? EXIT_REFUSED : EXIT_UNREACHABLE;
        }
    }
    free(f.runs);
    return f.result;
}
