/* GET /usage?from=&to=&by=user|run|day: where the device time went, by phase
 * (store/usage_ledger.h), per user, run or day, with goodput (productive / held) per
 * group and for the box. from and to are times (ISO 8601 in UTC or unix seconds): the
 * UTC days they fall on, both included. Any reader may ask (the queue shows each
 * owner's usage too). */
#include "routes_usage.h"

#include <string.h>
#include <time.h>

#include "base.h"
#include "params.h"
#include "store_read.h"

/* The UTC day of unix ms, into day[11]. */
static void day_of(int64_t ms, char day[11]) {
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(day, 11, "%Y-%m-%d", &tm);
}

static void get_usage(request *rq, response *rs) {
    int64_t from = NO_INT, to = NO_INT;
    if (!param_query_time(rq, rs, "from", &from) || !param_query_time(rq, rs, "to", &to)) return;
    const char *by = rq_query(rq, "by");
    if (!by) by = "user";
    if (strcmp(by, "user") && strcmp(by, "run") && strcmp(by, "day")) {
        reply_problem(rs, 400, NULL, "query parameter by must be user, run or day (got \"%.40s\")", by);
        return;
    }
    char from_day[11], to_day[11];
    if (from != NO_INT) day_of(from, from_day);
    if (to != NO_INT) day_of(to, to_day);
    json_t *o = store_usage_json(from != NO_INT ? from_day : NULL, to != NO_INT ? to_day : NULL, by);
    if (!o) {
        reply_problem(rs, 500, NULL, "the database could not be read; see the server's log");
        return;
    }
    reply_json(rs, 200, o);
}

const route usage_routes[] = {
    {.method = "GET", .pattern = "/usage", .handler = get_usage},
};
const size_t usage_routes_count = sizeof usage_routes / sizeof *usage_routes;
