/* Request parameters: see params.h. */
#include "params.h"

#include <errno.h>
#include <stdlib.h>

#include "ids.h"

bool param_run_id(request *rq, response *rs, int64_t *id) {
    if (!parse_run_id(rq->id_text, id)) {
        reply_problem(rs, 404, NULL, "there is no run \"%.60s\": run ids are positive integers without leading zeros", rq->id_text);
        return false;
    }
    return true;
}

bool param_existing_run(request *rq, response *rs, int64_t *id, run_brief *b) {
    if (!param_run_id(rq, rs, id)) return false;
    int found = store_get_brief(*id, b);
    if (found < 0) {
        reply_problem(rs, 500, NULL, "the database could not be read; see the server's log");
        return false;
    }
    if (!found) {
        reply_problem(rs, 404, NULL, "there is no run %lld (GET /runs lists them)", (long long)*id);
        return false;
    }
    return true;
}

bool param_query_int(request *rq, response *rs, const char *name, int64_t min, int64_t max, int64_t *out) {
    const char *s = rq_query(rq, name);
    if (!s) return true;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max) {
        reply_problem(rs, 400, NULL, "query parameter %s must be an integer from %lld to %lld (got \"%.100s\")", name,
                      (long long)min, (long long)max, s);
        return false;
    }
    *out = v;
    return true;
}
