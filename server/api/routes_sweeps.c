/* The sweeps' routes: see routes_sweeps.h; what they do is sweep.h's.
 *
 *   POST /sweeps               a sweep (base config, parameters, method, metric, early stopping) -> 201, Location
 *   GET  /sweeps               every sweep, newest first, with its best trial
 *   GET  /sweeps/{id}          the sweep: status, spec, trials (run, params, status, metric), best
 *   POST /sweeps/{id}/cancel   cancel it and its trials -> 202 (its owner or an admin)
 *   POST /sweeps/{id}/pause    no trial made, judged or promoted; running trials stopped in their place -> 202
 *   POST /sweeps/{id}/resume   carry a paused sweep on -> 202
 *   POST /sweeps/{id}/extend   {"max_trials": N}: more trials, the method's sequence continued -> 202
 *   POST /sweeps/{id}/trials   {"params": {...}}: a configuration enqueued by hand -> 201
 *
 * Every answer holding a sweep is masked for whoever is not its owner or an admin
 * (sweep_mask.h). */
#include "routes_sweeps.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "sweep.h"
#include "sweep_mask.h"

/* The {id} of /sweeps/{id}: false (and a 404) when it is not a positive integer. */
static bool sweep_id(request *rq, response *rs, int64_t *id) {
    char *end = NULL;
    long long v = rq->id_text ? strtoll(rq->id_text, &end, 10) : 0;
    if (!rq->id_text || !*rq->id_text || *end || v <= 0) {
        reply_problem(rs, 404, NULL, "there is no sweep %s (GET /sweeps lists them)", rq->id_text ? rq->id_text : "");
        return false;
    }
    *id = v;
    return true;
}

static void reply_sweep(request *rq, response *rs, int status, int64_t id) {
    json_t *o = sweep_json(id);
    if (!o) {
        reply_problem(rs, 404, NULL, "there is no sweep %lld (GET /sweeps lists them)", (long long)id);
        return;
    }
    sweep_mask_for(o, rq_caller(rq));
    reply_json(rs, status, o);
}

static void post_sweeps(request *rq, response *rs) {
    json_error_t je;
    json_t *body = json_loadb(rq->body ? rq->body : "", rq->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!body) {
        reply_problem(rs, 400, NULL, "the request body is not valid JSON: %s at line %d, column %d: send a sweep, "
                      "a JSON object", je.text, je.line, je.column);
        return;
    }
    schema_errors errs = {0};
    char err[1024] = "";
    int64_t id = 0;
    switch (sweep_submit(body, rq_caller(rq), &errs, &id, err, sizeof err)) {
    case SWEEP_OK:
        rs->location = xasprintf("/sweeps/%lld", (long long)id);
        reply_sweep(rq, rs, 201, id);
        break;
    case SWEEP_INVALID:
        reply_problem_counted(rs, 400, schema_errors_to_json(&errs), schema_errors_total(&errs),
                              "the sweep is refused before any trial starts: %s: %s%s", errs.items[0].pointer,
                              errs.items[0].message,
                              schema_errors_total(&errs) > 1 ? " (and more: see errors)" : "");
        break;
    case SWEEP_FORBIDDEN: reply_problem(rs, 403, errs.count ? schema_errors_to_json(&errs) : NULL, "%s", err); break;
    default: reply_problem(rs, 500, NULL, "%s", err); break;
    }
    schema_errors_free(&errs);
    json_decref(body);
}

static void get_sweeps(request *rq, response *rs) {
    json_t *list = sweep_list_json(), *sweeps = json_object_get(list, "sweeps");
    for (size_t i = 0; i < json_array_size(sweeps); i++) sweep_mask_for(json_array_get(sweeps, i), rq_caller(rq));
    reply_json(rs, 200, list);
}

static void get_sweep(request *rq, response *rs) {
    int64_t id;
    if (sweep_id(rq, rs, &id)) reply_sweep(rq, rs, 200, id);
}

static void cancel_sweep(request *rq, response *rs) {
    int64_t id;
    if (!sweep_id(rq, rs, &id)) return;
    char why[512] = "";
    switch (sweep_cancel(id, rq_caller(rq), why, sizeof why)) {
    case SWEEP_OK: reply_sweep(rq, rs, 202, id); return;
    case SWEEP_NOT_FOUND: reply_problem(rs, 404, NULL, "there is no sweep %lld (GET /sweeps lists them)", (long long)id); return;
    case SWEEP_FORBIDDEN: reply_problem(rs, 403, NULL, "%s", why); return;
    case SWEEP_FINISHED: reply_problem(rs, 409, NULL, "%s", why); return;
    default: reply_problem(rs, 500, NULL, "the database could not be read or written; see the server's log"); return;
    }
}

/* What a change's refusal is as an answer. */
static void reply_change(request *rq, response *rs, sweep_result r, int64_t id, const char *why) {
    switch (r) {
    case SWEEP_OK: reply_sweep(rq, rs, 202, id); return;
    case SWEEP_NOT_FOUND: reply_problem(rs, 404, NULL, "there is no sweep %lld (GET /sweeps lists them)", (long long)id); return;
    case SWEEP_FORBIDDEN: reply_problem(rs, 403, NULL, "%s", why); return;
    case SWEEP_INVALID: reply_problem(rs, 400, NULL, "%s", why); return;
    case SWEEP_FINISHED:
    case SWEEP_CONFLICT: reply_problem(rs, 409, NULL, "%s", why); return;
    default: reply_problem(rs, 500, NULL, "the database could not be read or written; see the server's log"); return;
    }
}

static void pause_sweep(request *rq, response *rs) {
    int64_t id;
    char why[512] = "";
    if (sweep_id(rq, rs, &id)) reply_change(rq, rs, sweep_pause(id, rq_caller(rq), why, sizeof why), id, why);
}

static void resume_sweep(request *rq, response *rs) {
    int64_t id;
    char why[512] = "";
    if (sweep_id(rq, rs, &id)) reply_change(rq, rs, sweep_resume(id, rq_caller(rq), why, sizeof why), id, why);
}

/* The request's JSON object body, or NULL (answered: 400). */
static json_t *object_body(request *rq, response *rs, const char *what) {
    json_error_t je;
    json_t *body = json_loadb(rq->body ? rq->body : "", rq->body_len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(body)) {
        reply_problem(rs, 400, NULL, "the request body is not a JSON object%s%s: send %s", body ? "" : ": ",
                      body ? "" : je.text, what);
        json_decref(body);
        return NULL;
    }
    return body;
}

static void extend_sweep(request *rq, response *rs) {
    int64_t id;
    if (!sweep_id(rq, rs, &id)) return;
    json_t *body = object_body(rq, rs, "{\"max_trials\": N}, N above the sweep's max_trials");
    if (!body) return;
    json_t *mt = json_object_get(body, "max_trials");
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v) if (strcmp(key, "max_trials") != 0) {
        reply_problem(rs, 400, NULL, "/%s: unknown field: send {\"max_trials\": N}", key);
        json_decref(body);
        return;
    }
    if (!json_is_integer(mt) || json_integer_value(mt) < 1 || json_integer_value(mt) > 1000000) {
        reply_problem(rs, 400, NULL, "/max_trials: must be an integer above the sweep's max_trials (at most %d)",
                      1000);
        json_decref(body);
        return;
    }
    char why[512] = "";
    reply_change(rq, rs, sweep_extend(id, (int)json_integer_value(mt), rq_caller(rq), why, sizeof why), id, why);
    json_decref(body);
}

static void enqueue_trial(request *rq, response *rs) {
    int64_t id;
    if (!sweep_id(rq, rs, &id)) return;
    json_t *body = object_body(rq, rs, "{\"params\": {\"KEY\": value, ...}}, a value for each of the sweep's parameters");
    if (!body) return;
    const char *key;
    json_t *v;
    json_object_foreach(body, key, v) if (strcmp(key, "params") != 0) {
        reply_problem(rs, 400, NULL, "/%s: unknown field: send {\"params\": {\"KEY\": value, ...}}", key);
        json_decref(body);
        return;
    }
    schema_errors errs = {0};
    char why[1024] = "";
    int trial = -1;
    sweep_result r = sweep_enqueue(id, json_object_get(body, "params"), rq_caller(rq), &errs, &trial, why, sizeof why);
    if (r == SWEEP_OK) {
        rs->location = xasprintf("/sweeps/%lld", (long long)id);
        reply_sweep(rq, rs, 201, id);
    } else if (r == SWEEP_INVALID && errs.count) {
        reply_problem_counted(rs, 400, schema_errors_to_json(&errs), schema_errors_total(&errs),
                              "the trial is refused: %s: %s%s", errs.items[0].pointer, errs.items[0].message,
                              schema_errors_total(&errs) > 1 ? " (and more: see errors)" : "");
    } else if (r == SWEEP_FORBIDDEN && errs.count) {
        reply_problem(rs, 403, schema_errors_to_json(&errs), "%s", why);
    } else {
        reply_change(rq, rs, r, id, why);
    }
    schema_errors_free(&errs);
    json_decref(body);
}

const route sweep_routes[] = {
    {.method = "POST", .pattern = "/sweeps", .handler = post_sweeps, .json_body = true},
    {.method = "GET", .pattern = "/sweeps", .handler = get_sweeps},
    {.method = "GET", .pattern = "/sweeps/{id}", .handler = get_sweep},
    {.method = "POST", .pattern = "/sweeps/{id}/cancel", .handler = cancel_sweep},
    {.method = "POST", .pattern = "/sweeps/{id}/pause", .handler = pause_sweep},
    {.method = "POST", .pattern = "/sweeps/{id}/resume", .handler = resume_sweep},
    {.method = "POST", .pattern = "/sweeps/{id}/extend", .handler = extend_sweep, .json_body = true},
    {.method = "POST", .pattern = "/sweeps/{id}/trials", .handler = enqueue_trial, .json_body = true},
};
const size_t sweep_routes_count = sizeof sweep_routes / sizeof *sweep_routes;
