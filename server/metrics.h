/* GET /metrics: ddpd's own numbers in Prometheus' text format (version 0.0.4), for
 * a Prometheus server to scrape. Two kinds of numbers:
 *
 *  - observed as they happen, kept here: HTTP requests by route, method and status
 *    code, with a duration histogram per route and method (routes are the router's
 *    patterns, "/runs/{id}", so the number of series stays bounded; a path no route
 *    matches counts as "unmatched"), and the store writer's batches (how long each
 *    transaction took from BEGIN to COMMIT, how many ops it applied);
 *  - read when scraped, from their owners: runs by status (the store), the queue and
 *    the devices in use and free (the scheduler), ingest's counters, the open event
 *    streams (the live feed).
 *
 * Every family has its HELP and TYPE lines; label values are escaped as the format
 * says (backslash, double quote, newline). */
#ifndef DDPD_METRICS_H
#define DDPD_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "http.h"
#include "util.h"

/* Monotonic seconds, for durations. */
double metrics_now(void);

/* One answered request. `route` is the matched route's pattern, or NULL. */
void metrics_observe_request(const char *route, const char *method, int status, double seconds);
/* One transaction of the store's writer: its duration, how many ops, whether it committed. */
void metrics_observe_store_batch(double seconds, size_t ops, bool ok);

/* The whole exposition, appended to `out`. */
void metrics_render(buf_t *out);
/* A label value, escaped, appended to `out`. */
void metrics_escape_label(buf_t *out, const char *value);

/* The GET /metrics handler. */
void metrics_handle(request *rq, response *rs);

#endif
