/* Prometheus exposition of ddpd's numbers: see metrics.h. */
#include "metrics.h"

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ddpd_build_config.h"
#include "events_feed.h"
#include "ingest.h"
#include "scheduler.h"
#include "server_log.h"
#include "store.h"

/* Past this many series of one family, new ones are dropped (and counted): a bound
 * on memory whatever clients send. Routes x methods x codes stays far below it. */
#define MAX_SERIES 1024

/* Request durations: from half a millisecond (a cached read) to 10 s (a large
 * series, a slow disk). */
static const double HTTP_BOUNDS[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define HTTP_NB (sizeof HTTP_BOUNDS / sizeof *HTTP_BOUNDS)
/* A write batch: from 100 us (a few ops, page cache) to seconds (fsync on a busy disk). */
static const double BATCH_BOUNDS[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                      0.5, 1, 2.5};
#define BATCH_NB (sizeof BATCH_BOUNDS / sizeof *BATCH_BOUNDS)
static const double OPS_BOUNDS[] = {1, 10, 100, 1000, 10000, 100000};
#define OPS_NB (sizeof OPS_BOUNDS / sizeof *OPS_BOUNDS)

typedef struct {
    uint64_t counts[16]; /* per bound, not cumulative; [nb] is above the last bound */
    double sum;
    uint64_t count;
} histogram;

typedef struct {
    char *route;
    const char *method;
    int code;
    uint64_t n;
} request_count;

typedef struct {
    char *route;
    const char *method;
    histogram h;
} request_durations;

static struct {
    pthread_mutex_t mu;
    request_count *counts;
    size_t n_counts, cap_counts;
    request_durations *durations;
    size_t n_durations, cap_durations;
    uint64_t dropped_series;
    histogram batch_seconds, batch_ops;
    uint64_t store_ops, store_failures;
    pthread_mutex_t db_mu; /* the scrape's own read connection */
    sqlite3 *db;
} M = {.mu = PTHREAD_MUTEX_INITIALIZER, .db_mu = PTHREAD_MUTEX_INITIALIZER};

static double start_time_s;

__attribute__((constructor)) static void note_start_time(void) { start_time_s = (double)now_ms() / 1000.0; }

double metrics_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void observe(histogram *h, const double *bounds, size_t nb, double v) {
    size_t i = 0;
    while (i < nb && v > bounds[i]) i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

/* Methods as a fixed set: a client inventing methods cannot make new series. */
static const char *method_label(const char *m) {
    static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (m && strcmp(m, known[i]) == 0) return known[i];
    return "other";
}

void metrics_observe_request(const char *route, const char *method, int status, double seconds) {
    if (!route) route = "unmatched";
    const char *m = method_label(method);
    pthread_mutex_lock(&M.mu);
    size_t i;
    for (i = 0; i < M.n_counts; i++)
        if (M.counts[i].code == status && M.counts[i].method == m && strcmp(M.counts[i].route, route) == 0) break;
    if (i == M.n_counts) {
        if (M.n_counts == MAX_SERIES) {
            M.dropped_series++;
            i = SIZE_MAX;
        } else {
            if (M.n_counts == M.cap_counts)
                M.counts = xrealloc(M.counts, (M.cap_counts = M.cap_counts ? 2 * M.cap_counts : 32) * sizeof *M.counts);
            M.counts[i] = (request_count){.route = xstrdup(route), .method = m, .code = status};
            M.n_counts++;
        }
    }
    if (i != SIZE_MAX) M.counts[i].n++;
    for (i = 0; i < M.n_durations; i++)
        if (M.durations[i].method == m && strcmp(M.durations[i].route, route) == 0) break;
    if (i == M.n_durations) {
        if (M.n_durations == MAX_SERIES) {
            M.dropped_series++;
            i = SIZE_MAX;
        } else {
            if (M.n_durations == M.cap_durations)
                M.durations = xrealloc(M.durations, (M.cap_durations = M.cap_durations ? 2 * M.cap_durations : 32) *
                                                        sizeof *M.durations);
            M.durations[i] = (request_durations){.route = xstrdup(route), .method = m};
            M.n_durations++;
        }
    }
    if (i != SIZE_MAX) observe(&M.durations[i].h, HTTP_BOUNDS, HTTP_NB, seconds);
    pthread_mutex_unlock(&M.mu);
}

void metrics_observe_store_batch(double seconds, size_t ops, bool ok) {
    pthread_mutex_lock(&M.mu);
    observe(&M.batch_seconds, BATCH_BOUNDS, BATCH_NB, seconds);
    observe(&M.batch_ops, OPS_BOUNDS, OPS_NB, (double)ops);
    M.store_ops += ops;
    if (!ok) M.store_failures++;
    pthread_mutex_unlock(&M.mu);
}

/* ---- writing the exposition ---- */

void metrics_escape_label(buf_t *out, const char *v) {
    for (const char *p = v ? v : ""; *p; p++) {
        if (*p == '\\') buf_append(out, "\\\\", 2);
        else if (*p == '"') buf_append(out, "\\\"", 2);
        else if (*p == '\n') buf_append(out, "\\n", 2);
        else buf_append(out, p, 1);
    }
}

static void family(buf_t *b, const char *name, const char *type, const char *help) {
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{k1="v1",k2="v2"} with escaped values; pairs end with a NULL key. */
static void series(buf_t *b, const char *name, const char *suffix, const char *const *labels) {
    buf_printf(b, "%s%s", name, suffix ? suffix : "");
    if (labels && labels[0]) {
        buf_append(b, "{", 1);
        for (size_t i = 0; labels[i]; i += 2) {
            buf_printf(b, "%s%s=\"", i ? "," : "", labels[i]);
            metrics_escape_label(b, labels[i + 1]);
            buf_append(b, "\"", 1);
        }
        buf_append(b, "}", 1);
    }
}

static void sample_u(buf_t *b, const char *name, const char *const *labels, uint64_t v) {
    series(b, name, NULL, labels);
    buf_printf(b, " %llu\n", (unsigned long long)v);
}

static void sample_d(buf_t *b, const char *name, const char *const *labels, double v) {
    series(b, name, NULL, labels);
    buf_printf(b, " %.17g\n", v);
}

/* The _bucket (cumulative, ending with +Inf), _sum and _count lines of one histogram.
 * `labels` has room for two more entries (the le pair) before its NULL. */
static void histogram_lines(buf_t *b, const char *name, const char **labels, size_t n_labels, const histogram *h,
                            const double *bounds, size_t nb) {
    uint64_t cum = 0;
    char le[32];
    labels[n_labels] = "le";
    labels[n_labels + 1] = le;
    labels[n_labels + 2] = NULL;
    for (size_t i = 0; i <= nb; i++) {
        cum += h->counts[i];
        if (i < nb) snprintf(le, sizeof le, "%g", bounds[i]);
        else snprintf(le, sizeof le, "+Inf");
        series(b, name, "_bucket", labels);
        buf_printf(b, " %llu\n", (unsigned long long)cum);
    }
    labels[n_labels] = NULL;
    series(b, name, "_sum", labels);
    buf_printf(b, " %.17g\n", h->sum);
    series(b, name, "_count", labels);
    buf_printf(b, " %llu\n", (unsigned long long)h->count);
}

/* ---- numbers read at scrape time ---- */

static const char *const STATUSES[] = {"queued", "starting", "running", "canceling", "succeeded", "failed", "canceled"};
#define N_STATUSES (sizeof STATUSES / sizeof *STATUSES)

/* Runs per status, from the store, through this file's own connection (a scrape
 * thread is any of MHD's; one connection behind a mutex is plenty). 0 or -1. */
static int runs_by_status(int64_t counts[N_STATUSES]) {
    memset(counts, 0, N_STATUSES * sizeof *counts);
    pthread_mutex_lock(&M.db_mu);
    if (!M.db) {
        const char *path = store_path();
        if (!path || sqlite3_open_v2(path, &M.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
            if (M.db) sqlite3_close(M.db);
            M.db = NULL;
            pthread_mutex_unlock(&M.db_mu);
            return -1;
        }
        sqlite3_busy_timeout(M.db, 2000);
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(M.db, "SELECT status, count(*) FROM runs GROUP BY status", -1, &st, NULL);
    if (rc == SQLITE_OK) {
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const char *s = (const char *)sqlite3_column_text(st, 0);
            for (size_t i = 0; s && i < N_STATUSES; i++)
                if (strcmp(s, STATUSES[i]) == 0) counts[i] = sqlite3_column_int64(st, 1);
        }
    }
    sqlite3_finalize(st);
    pthread_mutex_unlock(&M.db_mu);
    return rc == SQLITE_DONE ? 0 : -1;
}

static uint64_t json_u(const json_t *o, const char *k1, const char *k2) {
    const json_t *v = json_object_get(o, k1);
    if (k2) v = json_object_get(v, k2);
    json_int_t n = json_integer_value(v);
    return n > 0 ? (uint64_t)n : 0;
}

void metrics_render(buf_t *b) {
    family(b, "ddpd_build_info", "gauge", "Always 1: the version of ddpd and whether it was built with the CUDA backend.");
    sample_u(b, "ddpd_build_info",
             (const char *[]){"version", DDPD_VERSION, "cuda", DDPD_HAVE_CUDA ? "yes" : "no", NULL}, 1);
    family(b, "ddpd_start_time_seconds", "gauge", "When this ddpd process started, in unix seconds.");
    sample_d(b, "ddpd_start_time_seconds", NULL, start_time_s);

    int64_t runs[N_STATUSES];
    if (runs_by_status(runs) == 0) {
        family(b, "ddpd_runs", "gauge", "Runs in the store, by status.");
        for (size_t i = 0; i < N_STATUSES; i++)
            sample_u(b, "ddpd_runs", (const char *[]){"status", STATUSES[i], NULL}, (uint64_t)runs[i]);
    } else {
        log_warn("metrics: the store could not be read for ddpd_runs");
    }

    json_t *sched = scheduler_stats();
    family(b, "ddpd_queue_length", "gauge", "Runs queued, waiting for devices.");
    sample_u(b, "ddpd_queue_length", NULL, json_u(sched, "queued", NULL));
    family(b, "ddpd_active_runs", "gauge", "Runs given devices and not finished (starting, running, canceling).");
    sample_u(b, "ddpd_active_runs", NULL, json_u(sched, "active", NULL));
    family(b, "ddpd_devices", "gauge", "Devices this server manages, by kind (cpu: CPU slots, gpu: GPUs) and state.");
    uint64_t cpu_total = json_u(sched, "cpu", "slots"), cpu_free = json_u(sched, "cpu", "free");
    uint64_t gpu_total = json_u(sched, "gpu", "count"), gpu_free = json_u(sched, "gpu", "free");
    sample_u(b, "ddpd_devices", (const char *[]){"kind", "cpu", "state", "in_use", NULL}, cpu_total - cpu_free);
    sample_u(b, "ddpd_devices", (const char *[]){"kind", "cpu", "state", "free", NULL}, cpu_free);
    sample_u(b, "ddpd_devices", (const char *[]){"kind", "gpu", "state", "in_use", NULL}, gpu_total - gpu_free);
    sample_u(b, "ddpd_devices", (const char *[]){"kind", "gpu", "state", "free", NULL}, gpu_free);
    json_decref(sched);

    json_t *ing = ingest_stats();
    family(b, "ddpd_ingest_events_total", "counter", "Events ingested from trainers over the event socket.");
    sample_u(b, "ddpd_ingest_events_total", NULL, json_u(ing, "events", NULL));
    family(b, "ddpd_ingest_lines_total", "counter", "Lines read from the event socket (a line holds one event or an array).");
    sample_u(b, "ddpd_ingest_lines_total", NULL, json_u(ing, "lines", NULL));
    family(b, "ddpd_ingest_malformed_lines_total", "counter", "Event lines skipped because they were not valid events.");
    sample_u(b, "ddpd_ingest_malformed_lines_total", NULL, json_u(ing, "malformed", NULL));
    family(b, "ddpd_ingest_dropped_connections_total", "counter",
           "Event connections dropped (no hello, or the wrong secret).");
    sample_u(b, "ddpd_ingest_dropped_connections_total", NULL, json_u(ing, "dropped_connections", NULL));
    family(b, "ddpd_ingest_connections", "gauge", "Trainer processes connected to the event socket now.");
    sample_u(b, "ddpd_ingest_connections", NULL, json_u(ing, "connections", NULL));
    json_decref(ing);
    family(b, "ddpd_event_streams", "gauge", "Server-sent event streams open now (GET /events, /runs/{id}/events).");
    sample_u(b, "ddpd_event_streams", NULL, (uint64_t)feed_subscribers());

    pthread_mutex_lock(&M.mu);
    family(b, "ddpd_http_requests_total", "counter",
           "HTTP requests answered, by route (the router's pattern; unmatched: no route), method and status code.");
    for (size_t i = 0; i < M.n_counts; i++) {
        char code[16];
        snprintf(code, sizeof code, "%d", M.counts[i].code);
        sample_u(b, "ddpd_http_requests_total",
                 (const char *[]){"route", M.counts[i].route, "method", M.counts[i].method, "code", code, NULL},
                 M.counts[i].n);
    }
    family(b, "ddpd_http_request_duration_seconds", "histogram",
           "Time from a request's headers to its answer's last byte, by route and method.");
    for (size_t i = 0; i < M.n_durations; i++) {
        const char *labels[7] = {"route", M.durations[i].route, "method", M.durations[i].method, NULL};
        histogram_lines(b, "ddpd_http_request_duration_seconds", labels, 4, &M.durations[i].h, HTTP_BOUNDS, HTTP_NB);
    }
    family(b, "ddpd_metrics_dropped_series_total", "counter",
           "Observations not recorded because their family already had the most series this server keeps.");
    sample_u(b, "ddpd_metrics_dropped_series_total", NULL, M.dropped_series);

    const char *none[3] = {NULL};
    family(b, "ddpd_store_write_batch_seconds", "histogram",
           "Time the store's writer took to apply one batch of writes in one SQLite transaction, BEGIN to COMMIT.");
    histogram_lines(b, "ddpd_store_write_batch_seconds", none, 0, &M.batch_seconds, BATCH_BOUNDS, BATCH_NB);
    family(b, "ddpd_store_write_batch_ops", "histogram", "Writes (events, run changes) applied per batch.");
    histogram_lines(b, "ddpd_store_write_batch_ops", none, 0, &M.batch_ops, OPS_BOUNDS, OPS_NB);
    family(b, "ddpd_store_write_ops_total", "counter", "Writes the store's writer has applied.");
    sample_u(b, "ddpd_store_write_ops_total", NULL, M.store_ops);
    family(b, "ddpd_store_write_failures_total", "counter", "Write batches whose transaction failed and was rolled back.");
    sample_u(b, "ddpd_store_write_failures_total", NULL, M.store_failures);
    pthread_mutex_unlock(&M.mu);
}

void metrics_handle(request *rq, response *rs) {
    (void)rq;
    buf_t b = {0};
    metrics_render(&b);
    reply_text(rs, 200, b.data, b.len, "text/plain; version=0.0.4; charset=utf-8");
}
