/* The rendezvous routes: see routes_rendezvous.h. The answers carry the client's key
 * and value as they were sent (reply_json_verbatim: a key that looks like a path of
 * this server is not renamed), and are never cached (no ETag: Cache-Control:
 * no-store). Nothing here waits: a key not set yet is a 404 the client polls past. */
#include "routes_rendezvous.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "base.h"
#include "params.h"
#include "rendezvous.h"
#include "run_status.h"
#include "store_read.h"

/* The run's id and the secret the request carries; false when answered (404: not a
 * run id; 401: no bearer at all). */
static bool run_and_secret(request *rq, response *rs, int64_t *id, const char **secret) {
    if (!param_run_id(rq, rs, id)) return false;
    *secret = auth_bearer_value(rq_header(rq, "Authorization"));
    if (!*secret) {
        reply_problem(rs, 401, NULL, "this route needs the run's secret: send \"Authorization: Bearer <secret>\" with "
                      "the secret ddpd gave run %lld's processes (DDPD_RUN_SECRET); the server's token does not open it",
                      (long long)*id);
        return false;
    }
    return true;
}

/* The answer to a request the rendezvous refused (not active, not the secret). */
static void refused(response *rs, int64_t id, rendezvous_result why) {
    if (why == RDV_BAD_SECRET) {
        reply_problem(rs, 401, NULL, "this route needs the run's secret: the bearer sent is not run %lld's secret "
                      "(DDPD_RUN_SECRET of its processes)", (long long)id);
        return;
    }
    /* not a live run of the scheduler: say what it is instead */
    run_brief b;
    int found = store_get_brief(id, &b);
    if (found < 0)
        reply_problem(rs, 404, NULL, "run %lld is not active: the database could not be read to say what it is (see "
                      "the server's log)", (long long)id);
    else if (found == 0)
        reply_problem(rs, 404, NULL, "run %lld is not active: there is no run %lld (GET /runs lists them)",
                      (long long)id, (long long)id);
    else if (b.status == RUN_QUEUED)
        reply_problem(rs, 404, NULL, "run %lld is not active: it is queued; its rendezvous opens when it starts",
                      (long long)id);
    else if (run_status_is_final(b.status))
        reply_problem(rs, 404, NULL, "run %lld is not active: it has ended (%s); its rendezvous is gone",
                      (long long)id, run_status_name(b.status));
    else
        reply_problem(rs, 404, NULL, "run %lld is not active: it has just ended; its rendezvous is gone", (long long)id);
}

#define KEY_RULE "1 to 200 characters from A-Z, a-z, 0-9, '.', '_', ':', '/' and '-'"
#define VALUE_RULE "lowercase hex digits, two per byte, at most 131072 of them (64 KiB)"

/* What is wrong with a value rendezvous_value_ok refused, for a person. */
static void value_fault(const json_t *v, char *out, size_t n) {
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (!s) {
        snprintf(out, n, "%s", v ? "another JSON value than a string" : "none");
        return;
    }
    size_t bad = strspn(s, "0123456789abcdef");
    if (bad < len)
        snprintf(out, n, "character %zu of %zu is %s", bad + 1, len,
                 s[bad] >= 'A' && s[bad] <= 'F' ? "an uppercase hex digit" : "not a hex digit");
    else if (len > RENDEZVOUS_VALUE_MAX)
        snprintf(out, n, "%zu hex digits", len);
    else
        snprintf(out, n, "an odd number of hex digits, %zu", len);
}

/* POST /runs/{id}/rendezvous {"key": K, "value": V} -> 201 (new) or 200 (the same
 * value again) {"key": K} */
static void post_rendezvous(request *rq, response *rs) {
    int64_t id;
    const char *secret;
    if (!run_and_secret(rq, rs, &id, &secret)) return;
    json_error_t e;
    json_t *b = json_loadb(rq->body, rq->body_len, 0, &e);
    if (!json_is_object(b)) {
        reply_problem(rs, 400, NULL, "the body is not a JSON object {\"key\": ..., \"value\": ...}: %s",
                      b ? "it is another JSON value" : e.text);
        json_decref(b);
        return;
    }
    json_t *k = json_object_get(b, "key"), *v = json_object_get(b, "value");
    const char *key = json_string_value(k), *value = json_string_value(v);
    size_t key_len = json_string_length(k), value_len = json_string_length(v);
    if (!rendezvous_key_ok(key, key_len)) {
        reply_problem(rs, 400, NULL, "key: %s is needed (got %s%.60s%s)", KEY_RULE, key ? "\"" : "",
                      key ? key : k ? "another JSON value" : "none", key ? "\"" : "");
    } else if (!rendezvous_value_ok(value, value_len)) {
        char got[128];
        value_fault(v, got, sizeof got);
        reply_problem(rs, 400, NULL, "value: %s is needed (got %s)", VALUE_RULE, got);
    } else {
        rendezvous_result res = rendezvous_put(id, secret, key, key_len, value, value_len);
        if (res == RDV_CREATED || res == RDV_SAME)
            reply_json_verbatim(rs, res == RDV_CREATED ? 201 : 200, json_pack("{s:s}", "key", key));
        else if (res == RDV_CONFLICT)
            reply_problem(rs, 409, NULL, "key %s is already set to another value in run %lld's rendezvous (a key is "
                          "written once)", key, (long long)id);
        else if (res == RDV_FULL)
            reply_problem(rs, 409, NULL, "run %lld's rendezvous holds its most keys (%d): key %s cannot be added",
                          (long long)id, RENDEZVOUS_KEYS_MAX, key);
        else
            refused(rs, id, res);
    }
    json_decref(b);
}

/* GET /runs/{id}/rendezvous?key=K -> 200 {"key": K, "value": V}, or 404 until it is set */
static void get_rendezvous(request *rq, response *rs) {
    int64_t id;
    const char *secret;
    if (!run_and_secret(rq, rs, &id, &secret)) return;
    const char *key = rq_query(rq, "key");
    if (!key || !rendezvous_key_ok(key, strlen(key))) {
        reply_problem(rs, 400, NULL, "query parameter key must be %s (got %s%.60s%s)", KEY_RULE, key ? "\"" : "",
                      key ? key : "none", key ? "\"" : "");
        return;
    }
    char *value;
    size_t value_len;
    rendezvous_result res = rendezvous_get(id, secret, key, strlen(key), &value, &value_len);
    if (res == RDV_FOUND)
        reply_json_verbatim(rs, 200, json_pack("{s:s, s:s%}", "key", key, "value", value, value_len));
    else if (res == RDV_NOT_SET)
        reply_problem(rs, 404, NULL, "key %s is not set yet in run %lld's rendezvous", key, (long long)id);
    else
        refused(rs, id, res);
    free(value);
}

const route rendezvous_routes[] = {
    {.method = "POST", .pattern = "/runs/{id}/rendezvous", .handler = post_rendezvous, .json_body = true,
     .run_secret_auth = true},
    {.method = "GET", .pattern = "/runs/{id}/rendezvous", .handler = get_rendezvous, .run_secret_auth = true},
};
const size_t rendezvous_routes_count = sizeof rendezvous_routes / sizeof *rendezvous_routes;
