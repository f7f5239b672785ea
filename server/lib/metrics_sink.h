/* The numbers ddpd observes as they happen, pushed here by their owners: HTTP
 * requests by route, method and status code, with a duration histogram per route and
 * method (routes are the router's patterns, "/runs/{id}", so the number of series
 * stays bounded; a path no route matches counts as "unmatched"), and the store
 * writer's batches (how long each transaction took from BEGIN to COMMIT, how many
 * ops it applied). The /metrics collector (api/metrics.c) renders them beside the
 * snapshots it reads from the scheduler, ingest, the feed and the store. */
#ifndef DDPD_SERVER_LIB_METRICS_SINK_H
#define DDPD_SERVER_LIB_METRICS_SINK_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/* One answered request. `route` is the matched route's pattern, or NULL. */
void metrics_observe_request(const char *route, const char *method, int status, double seconds);
/* One transaction of the store's writer: its duration, how many ops, whether it committed. */
void metrics_observe_store_batch(double seconds, size_t ops, bool ok);

/* The families observed here, appended to `out` in the exposition format. */
void metrics_sink_render(buf_t *out);

#endif
