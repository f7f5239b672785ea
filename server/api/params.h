/* Reading a request's parameters, the same way in every route: the {id} of a path
 * (404 when it names no run id or no run), and integer query arguments within
 * bounds (400 naming the argument). Each answers the problem itself and returns
 * false, so a handler just returns. */
#ifndef DDPD_SERVER_API_PARAMS_H
#define DDPD_SERVER_API_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "http.h"
#include "store_read.h"

/* The {id} segment as a run id. */
bool param_run_id(request *rq, response *rs, int64_t *id);
/* ... of a run that exists (its brief in *b). */
bool param_existing_run(request *rq, response *rs, int64_t *id, run_brief *b);
/* An optional integer query argument within [min, max]; *out untouched when absent. */
bool param_query_int(request *rq, response *rs, const char *name, int64_t min, int64_t max, int64_t *out);
/* An optional time query argument: ISO 8601 in UTC ("2026-12-07", "2026-12-07T08:00:00Z")
 * or unix seconds, as unix ms; *out_ms untouched when absent. */
bool param_query_time(request *rq, response *rs, const char *name, int64_t *out_ms);

#endif
