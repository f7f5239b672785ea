/* GET /metrics: ddpd's own numbers in Prometheus' text format (version 0.0.4), for a
 * Prometheus server to scrape: what the parts observed as it happened (requests,
 * store batches: lib/metrics_sink.h) and what they hold now, read as typed snapshots
 * when scraped (runs by status from the store, the queue and devices from the
 * scheduler, ingest's counters, the open event streams from the feed). Every family
 * has its HELP and TYPE lines. */
#ifndef DDPD_SERVER_API_METRICS_H
#define DDPD_SERVER_API_METRICS_H

#include "buf.h"
#include "http.h"
#include "metrics_sink.h"

/* The whole exposition, appended to `out`. */
void metrics_render(buf_t *out);

/* The GET /metrics handler. */
void metrics_handle(request *rq, response *rs);

#endif
