/* Observed numbers, kept for /metrics: see metrics_sink.h. */
#include "metrics_sink.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "prom.h"

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
    char *route;
    const char *method;
    int code;
    uint64_t n;
} request_count;

typedef struct {
    char *route;
    const char *method;
    prom_histogram h;
} request_durations;

static struct {
    pthread_mutex_t mu;
    request_count *counts;
    size_t n_counts, cap_counts;
    request_durations *durations;
    size_t n_durations, cap_durations;
    uint64_t dropped_series;
    prom_histogram batch_seconds, batch_ops;
    uint64_t store_ops, store_failures;
} M = {.mu = PTHREAD_MUTEX_INITIALIZER};

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
    if (i != SIZE_MAX) prom_observe(&M.durations[i].h, HTTP_BOUNDS, HTTP_NB, seconds);
    pthread_mutex_unlock(&M.mu);
}

void metrics_observe_store_batch(double seconds, size_t ops, bool ok) {
    pthread_mutex_lock(&M.mu);
    prom_observe(&M.batch_seconds, BATCH_BOUNDS, BATCH_NB, seconds);
    prom_observe(&M.batch_ops, OPS_BOUNDS, OPS_NB, (double)ops);
    M.store_ops += ops;
    if (!ok) M.store_failures++;
    pthread_mutex_unlock(&M.mu);
}

void metrics_sink_render(buf_t *b) {
    pthread_mutex_lock(&M.mu);
    prom_family(b, "ddpd_http_requests_total", "counter",
           "HTTP requests answered, by route (the router's pattern; unmatched: no route), method and status code.");
    for (size_t i = 0; i < M.n_counts; i++) {
        char code[16];
        snprintf(code, sizeof code, "%d", M.counts[i].code);
        prom_sample_u(b, "ddpd_http_requests_total",
                 (const char *[]){"route", M.counts[i].route, "method", M.counts[i].method, "code", code, NULL},
                 M.counts[i].n);
    }
    prom_family(b, "ddpd_http_request_duration_seconds", "histogram",
           "Time from a request's headers to its answer's last byte, by route and method.");
    for (size_t i = 0; i < M.n_durations; i++) {
        const char *labels[7] = {"route", M.durations[i].route, "method", M.durations[i].method, NULL};
        prom_histogram_lines(b, "ddpd_http_request_duration_seconds", labels, 4, &M.durations[i].h, HTTP_BOUNDS, HTTP_NB);
    }
    prom_family(b, "ddpd_metrics_dropped_series_total", "counter",
           "Observations not recorded because their family already had the most series this server keeps.");
    prom_sample_u(b, "ddpd_metrics_dropped_series_total", NULL, M.dropped_series);

    const char *none[3] = {NULL};
    prom_family(b, "ddpd_store_write_batch_seconds", "histogram",
           "Time the store's writer took to apply one batch of writes in one SQLite transaction, BEGIN to COMMIT.");
    prom_histogram_lines(b, "ddpd_store_write_batch_seconds", none, 0, &M.batch_seconds, BATCH_BOUNDS, BATCH_NB);
    prom_family(b, "ddpd_store_write_batch_ops", "histogram", "Writes (events, run changes) applied per batch.");
    prom_histogram_lines(b, "ddpd_store_write_batch_ops", none, 0, &M.batch_ops, OPS_BOUNDS, OPS_NB);
    prom_family(b, "ddpd_store_write_ops_total", "counter", "Writes the store's writer has applied.");
    prom_sample_u(b, "ddpd_store_write_ops_total", NULL, M.store_ops);
    prom_family(b, "ddpd_store_write_failures_total", "counter", "Write batches whose transaction failed and was rolled back.");
    prom_sample_u(b, "ddpd_store_write_failures_total", NULL, M.store_failures);
    pthread_mutex_unlock(&M.mu);
}
