/* Request parameters: see params.h. */
#include "params.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* "2026-12-07", "2026-12-07T08:00:00Z" (seconds and a fraction optional, UTC): unix ms,
 * or false. */
static bool parse_iso_day_or_time(const char *s, int64_t *ms) {
    struct tm tm = {0};
    const char *end = strptime(s, "%Y-%m-%d", &tm);
    if (!end) return false;
    int64_t frac = 0;
    if (*end == 'T') {
        const char *t = strptime(end + 1, "%H:%M", &tm);
        if (!t) return false;
        if (*t == ':') {
            t = strptime(t + 1, "%S", &tm);
            if (!t) return false;
            if (*t == '.') {
                int64_t scale = 100;
                for (t++; *t >= '0' && *t <= '9'; t++, scale /= 10) frac += (*t - '0') * scale;
            }
        }
        if (strcmp(t, "Z") != 0) return false;
    } else if (*end) {
        return false;
    }
    time_t secs = timegm(&tm);
    if (secs == (time_t)-1) return false;
    *ms = (int64_t)secs * 1000 + frac;
    return true;
}

bool param_query_time(request *rq, response *rs, const char *name, int64_t *out_ms) {
    const char *s = rq_query(rq, name);
    if (!s) return true;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s && !*end && !errno && v >= 0 && v < 100000000000LL) {
        *out_ms = v * 1000;
        return true;
    }
    if (parse_iso_day_or_time(s, out_ms)) return true;
    reply_problem(rs, 400, NULL, "query parameter %s must be a time: ISO 8601 in UTC (2026-12-07 or "
                  "2026-12-07T08:00:00Z) or unix seconds (got \"%.100s\")", name, s);
    return false;
}
