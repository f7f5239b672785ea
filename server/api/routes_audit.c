/* GET /audit: the audit log (store/audit.h), oldest first.
 *
 *   GET /audit?actor=&target=&since=&after=&limit=
 *
 * An admin reads every entry; a user only those it made and those about itself or its
 * runs (subject: the run's owner, the user changed); anybody else none (403). */
#include "routes_audit.h"

#include "base.h"
#include "params.h"
#include "store_read.h"

#define AUDIT_PAGE_DEFAULT 500
#define AUDIT_PAGE_MAX 5000

static void get_audit(request *rq, response *rs) {
    const caller *who = rq_caller(rq);
    if (!who->admin && who->kind != CALLER_USER) {
        reply_problem(rs, 403, NULL, "the audit log is read with a token: a user's token reads what it did and what "
                      "was done to it and its runs, an admin's everything");
        return;
    }
    int64_t since = NO_INT, after = 0, limit = AUDIT_PAGE_DEFAULT;
    if (!param_query_time(rq, rs, "since", &since) || !param_query_int(rq, rs, "after", 0, INT64_MAX, &after) ||
        !param_query_int(rq, rs, "limit", 1, AUDIT_PAGE_MAX, &limit))
        return;
    const char *actor = rq_query(rq, "actor"), *target = rq_query(rq, "target");
    int64_t next = 0;
    json_t *o = store_audit_json(actor && *actor ? actor : NULL, target && *target ? target : NULL, since, after,
                                 who->admin ? NULL : who->name, (int)limit, &next);
    if (!o) {
        reply_problem(rs, 500, NULL, "the database could not be read; see the server's log");
        return;
    }
    reply_json(rs, 200, o);
}

const route audit_routes[] = {
    {.method = "GET", .pattern = "/audit", .handler = get_audit},
};
const size_t audit_routes_count = sizeof audit_routes / sizeof *audit_routes;
