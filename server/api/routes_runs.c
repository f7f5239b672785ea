/* The handlers of the API: one function per route, each reading what it needs from
 * the store (or asking the scheduler) and answering JSON or a problem.
 *
 *   GET    /healthz                     liveness, devices, ingest counters, the store (503 when it cannot write)
 *   POST   /runs                        submit a run config -> 201, Location
 *   GET    /runs?status=&owner=&name=&sweep_id=&since=&until=&limit=&before=
 *                                       newest first, filtered through indexes (store/run_list.h);
 *                                       "next" is the next page's URL
 *   GET    /runs/{id}                   the run: config, status, reason, times, devices, progress
 *   GET    /runs/{id}/metrics?key=&max_points=&after=   a step series, downsampled on request
 *   GET    /runs/{id}/epochs            per-epoch lr, losses, accuracy, duration
 *   GET    /runs/{id}/timeline          submitted, each pending reason, admitted, started, first step,
 *                                        checkpoints, preempted, queued again, restarted, ended
 *   GET    /runs/{id}/ranks             per rank: device, pid, state, step, step time, last seen
 *   GET    /runs/{id}/checkpoints       the checkpoint files in its directory now (name, size, time)
 *   GET    /runs/{id}/logs?tail=N       the last N lines of the trainer's log (text/plain); rank=: a command
 *                                        run's rank's; attempt=: that rank's output in that attempt
 *   POST   /runs/{id}/cancel            cancel a queued or running run -> 202
 *   POST   /runs/{id}/resume            continue a failed or canceled run (from its newest checkpoint) -> 202
 *   DELETE /runs/{id}                   delete a finished run and its directory -> 204
 *   GET    /queue                       the queued runs in the order they will start, and why each waits
 *   GET    /users                       the users (names, admins, quotas; no token)
 *   GET    /users/me                    who the request's token is (401 without one the server knows)
 *
 * Cancel, delete and resume are for the run's owner and admins (403 naming the owner
 * for anyone else); a user may not submit over its max-priority or its quota (403).
 *   GET    /metrics                     Prometheus text format (metrics.c)
 *   GET    /openapi.json                the API's description (openapi.c)
 *
 * GET /runs/{id} and GET /runs carry an ETag made of the store's versions
 * (run_versions.h) and answer 304 to an If-None-Match that names it; GET /runs/{id}
 * serves its answer from run_cache.h while the run's version is unchanged.
 */
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "audit.h"
#include "base.h"
#include "ddpd_build_config.h"
#include "downsample.h"
#include "fnv.h"
#include "ingest.h"
#include "logtail.h"
#include "run_dir.h"
#include "run_files.h"
#include "metrics.h"
#include "openapi.h"
#include "params.h"
#include "routes.h"
#include "run_cache.h"
#include "run_mask.h"
#include "run_config.h"
#include "run_resume.h"
#include "run_versions.h"
#include "runs.h"
#include "scheduler.h"
#include "state_layout.h"
#include "store.h"
#include "series_read.h"
#include "store_read.h"
#include "users.h"
#include "disk_use.h"

static int64_t started_at;

void routes_init(void) { started_at = now_ms(); }


/* Answers with the run as GET /runs/{id} shows it, built from the store; false (and
 * a 404) when there is none. e->queued: the answer is a queued run's, at
 * e->queue_position, waiting for what hashes to e->waiting_hash. Without `decide`, a
 * queued run's place is as last decided (POST /runs behind a long queue does not wait
 * for the queue's decision: scheduler.c). */
static bool build_run(response *rs, int status, int64_t id, run_cache_entry *e, bool decide) {
    char *raw = NULL;
    json_t *run = store_run_json(id, &raw);
    if (!run) {
        reply_problem(rs, 404, NULL, "there is no run %lld (GET /runs lists them)", (long long)id);
        return false;
    }
    e->queued = strcmp(json_string_value(json_object_get(run, "status")), run_status_name(RUN_QUEUED)) == 0;
    uint32_t pending_hash = 0, copied_hash = 0;
    e->queue_position = 0;
    char *waiting = e->queued ? scheduler_queued_view(id, &e->queue_position, &pending_hash, decide) : NULL;
    if (e->queued) json_object_set_new(run, "queue_position", json_integer(e->queue_position));
    if (waiting) json_object_set_new(run, "waiting_for", json_string(waiting));
    json_t *pending = e->queued ? scheduler_pending(id, &copied_hash, decide) : NULL;
    pending_hash = copied_hash; /* the one in the answer (it may have moved between the two) */
    json_object_set_new(run, "pending", pending ? pending : json_null());
    e->waiting_hash = fnv1a32_text(waiting) ^ pending_hash;
    free(waiting);
    const char *owner = json_string_value(json_object_get(run, "owner"));
    snprintf(e->owner, sizeof e->owner, "%s", owner ? owner : "");
    reply_json_raw(rs, status, run, raw);
    e->secrets = run_mask_needed(rs->body, rs->len);
    return true;
}

/* A run's answer as `rq`'s caller may see it: env values and command arguments hidden
 * unless it is the run's owner or an admin (run_mask.h). Who the caller is is asked
 * only of an answer that holds such things. */
static bool hides_from(request *rq, const run_cache_entry *e) {
    return e->secrets && !run_mask_sees_all(rq_caller(rq), e->owner);
}

static void reply_run(request *rq, response *rs, int status, int64_t id) {
    run_cache_entry e = {0};
    if (build_run(rs, status, id, &e, status != 201) && hides_from(rq, &e)) run_mask_apply(&rs->body, &rs->len);
}

/* A write the store refused: 503 naming why while the database cannot be written
 * (store.h), else 500. */
static void reply_store_refused(response *rs, const char *what) {
    char why[1024];
    if (store_unwritable(why, sizeof why)) reply_problem(rs, 503, NULL, "%s: %s", what, why);
    else reply_problem(rs, 500, NULL, "%s: a database error; see the server's log", what);
}

/* ---- GET /healthz ---- */

/* The store's part of /healthz: whether it can write, and what waits. */
static json_t *store_health_json(const store_health *h) {
    json_t *o = json_pack("{s:b,s:I,s:I,s:I}", "writable", h->writable, "pending", (json_int_t)h->pending,
                          "failed_attempts", (json_int_t)h->failed_total, "refused", (json_int_t)h->refused_total);
    if (!h->writable) {
        char since[32];
        format_iso8601(h->since_ms, since);
        json_object_set_new(o, "reason", json_string(h->reason));
        json_object_set_new(o, "since", json_string(since));
        json_object_set_new(o, "attempts", json_integer((json_int_t)h->attempts));
        json_object_set_new(o, "events_held", json_boolean(h->events_held));
    }
    return o;
}

/* 200 {"status": "ok", ...}; while the database cannot be written, 503: a problem
 * (its detail names the reason) with the same members besides. */
static void get_healthz(request *rq, response *rs) {
    (void)rq;
    scheduler_snapshot sc;
    ingest_counters ing;
    store_health sh;
    char why[1024];
    scheduler_take_snapshot(&sc);
    ingest_take_counters(&ing);
    bool unwritable = store_unwritable(why, sizeof why);
    store_health_take(&sh);
    json_t *o = json_pack("{s:s,s:s,s:I}", "status", "ok", "version", DDPD_VERSION, "uptime_s",
                          (json_int_t)((now_ms() - started_at) / 1000));
    json_object_set_new(o, "devices",
                        json_pack("{s:{s:i,s:i},s:{s:i,s:i},s:i,s:i}", "cpu", "slots", sc.cpu_slots, "free",
                                  sc.cpu_free, "gpu", "count", sc.gpus, "free", sc.gpu_free, "queued", sc.queued,
                                  "active", sc.active));
    json_object_set_new(o, "ingest",
                        json_pack("{s:I,s:I,s:I,s:I,s:I}", "connections", (json_int_t)ing.connections, "lines",
                                  (json_int_t)ing.lines, "events", (json_int_t)ing.events, "malformed",
                                  (json_int_t)ing.malformed, "dropped_connections",
                                  (json_int_t)ing.dropped_connections));
    json_object_set_new(o, "store", store_health_json(&sh));
    if (!unwritable) {
        reply_json(rs, 200, o);
        return;
    }
    json_object_set_new(o, "type", json_string("about:blank"));
    json_object_set_new(o, "title", json_string("Service Unavailable"));
    json_object_set_new(o, "status", json_integer(503));
    json_object_set_new(o, "detail", json_string(why));
    reply_json(rs, 503, o);
    rs->content_type = "application/problem+json";
}

/* ---- POST /runs ---- */

static void invalid_config(response *rs, schema_errors *errs) {
    char *first = xasprintf("%s: %s", errs->items[0].pointer[0] ? errs->items[0].pointer : "(the document)",
                            errs->items[0].message);
    size_t total = schema_errors_total(errs);
    if (total == 1)
        reply_problem(rs, 400, schema_errors_to_json(errs), "the run config is invalid: %s", first);
    else if (!errs->dropped)
        reply_problem(rs, 400, schema_errors_to_json(errs),
                      "the run config has %zu problems, listed in \"errors\"; the first: %s", total, first);
    else
        reply_problem_counted(rs, 400, schema_errors_to_json(errs), total,
                              "the run config has %zu violations; the first %zu are listed in \"errors\"; the first: %s",
                              total, errs->count, first);
    free(first);
}

static void post_runs(request *rq, response *rs) {
    const caller *who = rq_caller(rq);
    size_t i = 0;
    while (i < rq->body_len && strchr(" \t\r\n", rq->body[i])) i++;
    if (i == rq->body_len) {
        reply_problem(rs, 400, json_pack("[{s:s,s:s}]", "pointer", "", "message", "the request body is empty"),
                      "the request body is empty: send a run config, a JSON object");
        return;
    }
    /* Every violation at once: the schema's (defaults filled in), then this host's:
     * devices it can never give, files it will not let the trainer read. */
    schema_errors errs = {0};
    json_t *config = run_config_parse(rq->body, rq->body_len, 0, NULL, &errs);
    if (!config) {
        reply_problem(rs, 400, schema_errors_to_json(&errs), "the request body is %s", errs.items[0].message);
        schema_errors_free(&errs);
        return;
    }
    if (!json_is_object(config)) {
        run_config_validate(config, &errs); /* "must be an object (got string \"x\")" */
        reply_problem(rs, 400, schema_errors_to_json(&errs), "a run config is a JSON object: %s",
                      errs.count ? errs.items[0].message : "?");
        schema_errors_free(&errs);
        json_decref(config);
        return;
    }
    /* every gate a run passes (runs.h), then stored and queued */
    submit_outcome out = {0};
    switch (runs_submit(config, who, 0, 0, &out)) {
    case SUBMIT_OK:
        rs->location = xasprintf("/runs/%lld", (long long)out.id);
        reply_run(rq, rs, 201, out.id);
        break;
    case SUBMIT_INVALID: invalid_config(rs, &out.errs); break;
    case SUBMIT_FORBIDDEN:
    case SUBMIT_NOT_PERMITTED:
        reply_problem(rs, 403, schema_errors_to_json(&out.errs), "%s", out.why);
        break;
    default: reply_problem(rs, submit_http_status(out.result), NULL, "%s", out.why); break;
    }
    submit_outcome_free(&out);
    schema_errors_free(&errs);
    json_decref(config);
}

/* ---- GET /runs ---- */

/* `v` as a URL's query value (unreserved bytes as they are, every other %XX). */
static void url_value(buf_t *b, const char *v) {
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("-._~,", *p))
            buf_append(b, (const char *)p, 1);
        else buf_printf(b, "%%%02X", *p);
    }
}

/* An optional text filter: absent or "" is none; longer than `max` bytes, or with a
 * control character, is a 400 naming it. */
static bool text_filter(request *rq, response *rs, const char *name, size_t max, const char **out) {
    const char *v = rq_query(rq, name);
    *out = NULL;
    if (!v || !*v) return true;
    bool control = false;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) control |= *p < 0x20 || *p == 0x7f;
    if (strlen(v) > max || control) {
        reply_problem(rs, 400, NULL, "%s must be at most %zu bytes of text without control characters (got %zu bytes%s)",
                      name, max, strlen(v), control ? " with a control character" : "");
        return false;
    }
    *out = v;
    return true;
}

static void get_runs(request *rq, response *rs) {
    int64_t limit = 50, before = 0, sweep = 0, since = NO_INT, until = NO_INT;
    if (!param_query_int(rq, rs, "limit", 1, 1000, &limit) || !param_query_int(rq, rs, "before", 1, INT64_MAX, &before) ||
        !param_query_int(rq, rs, "sweep_id", 1, INT64_MAX, &sweep) || !param_query_time(rq, rs, "since", &since) ||
        !param_query_time(rq, rs, "until", &until))
        return;
    run_filter f;
    run_filter_init(&f);
    f.before = before;
    f.sweep_id = sweep;
    if (since != NO_INT) f.since_ms = since;
    if (until != NO_INT) f.until_ms = until;
    if (since != NO_INT && until != NO_INT && since > until) {
        reply_problem(rs, 400, NULL, "since is after until: give a window that starts before it ends");
        return;
    }
    if (!text_filter(rq, rs, "owner", 64, &f.owner) || !text_filter(rq, rs, "name", 200, &f.name_prefix)) return;
    const char *status = rq_query(rq, "status");
    char *copy = xstrdup(status ? status : "");
    char *save = NULL;
    for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        run_status known;
        if (!run_status_parse(s, &known)) {
            reply_problem(rs, 400, NULL,
                          "status \"%.60s\" is not one: use queued, starting, running, canceling, succeeded, failed or canceled (comma-separated for several)",
                          s);
            free(copy);
            return;
        }
        bool seen = false;
        for (int i = 0; i < f.n_statuses; i++) seen |= strcmp(f.statuses[i], run_status_name(known)) == 0;
        if (!seen) f.statuses[f.n_statuses++] = run_status_name(known); /* at most the 7 there are */
    }
    free(copy);
    /* The page follows from the URL and the store: the store's version tags it. */
    char etag[96];
    snprintf(etag, sizeof etag, "\"%016llx-runs-%llu\"", (unsigned long long)run_versions_identity(),
             (unsigned long long)runs_version()); /* before the database is read */
    if (rq_if_none_match(rq, etag)) {
        reply_not_modified(rs, etag);
        return;
    }
    int64_t next_before = 0;
    json_t *page = store_runs_page(&f, (int)limit, &next_before);
    if (!page) {
        reply_problem(rs, 500, NULL, "the database could not be read; see the server's log");
        return;
    }
    json_object_set_new(page, "limit", json_integer(limit));
    if (next_before) { /* the same filters, from the cursor on */
        buf_t next = {0};
        buf_printf(&next, "/runs?limit=%lld&before=%lld", (long long)limit, (long long)next_before);
        const char *keep[] = {"status", "owner", "name", "sweep_id", "since", "until"};
        for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) {
            const char *v = rq_query(rq, keep[i]);
            if (!v || !*v) continue;
            buf_printf(&next, "&%s=", keep[i]);
            url_value(&next, v);
        }
        json_object_set_new(page, "next", json_string(next.data));
        buf_free(&next);
    } else {
        json_object_set_new(page, "next", json_null());
    }
    reply_json(rs, 200, page);
    snprintf(rs->etag, sizeof rs->etag, "%s", etag);
}

/* ---- GET /runs/{id}: from the cache while the run's version holds ---- */

/* The tag of run `id`'s answer under `version`: this server life's identity, the
 * run, its version, and a queued run's place in the queue and what it waits for
 * (which change as other runs start or leave and nodes come and go, with no change
 * to this one). */
static void run_etag(char out[96], int64_t id, const run_cache_entry *e, bool hidden) {
    if (e->queued)
        snprintf(out, 96, "\"%016llx-%lld-%llu-q%d-%08x%s\"", (unsigned long long)run_versions_identity(), (long long)id,
                 (unsigned long long)e->version, e->queue_position, e->waiting_hash, hidden ? "-h" : "");
    else
        snprintf(out, 96, "\"%016llx-%lld-%llu%s\"", (unsigned long long)run_versions_identity(), (long long)id,
                 (unsigned long long)e->version, hidden ? "-h" : "");
}

/* A cached answer whose place in the queue and what it waits for are still the scheduler's. */
static bool cached_answer(int64_t id, uint64_t version, bool want_body, run_cache_entry *e) {
    if (!run_cache_get(id, version, want_body, e)) return false;
    if (!e->queued) return true;
    int position = 0;
    uint32_t pending_hash = 0;
    char *waiting = scheduler_queued_view(id, &position, &pending_hash, true);
    bool current = position == e->queue_position && (fnv1a32_text(waiting) ^ pending_hash) == e->waiting_hash;
    free(waiting);
    if (current) return true;
    free(e->body);
    e->body = NULL;
    return false;
}

static void get_run(request *rq, response *rs) {
    int64_t id;
    if (!param_run_id(rq, rs, &id)) return;
    uint64_t version = run_version(id); /* before the database is read: see run_versions.h */
    bool conditional = rq_header(rq, "If-None-Match") != NULL;
    run_cache_entry e;
    char etag[96];
    /* A conditional request first asks for the tag alone: a match needs no copy of the body. */
    if (conditional && cached_answer(id, version, false, &e)) {
        run_etag(etag, id, &e, hides_from(rq, &e));
        if (rq_if_none_match(rq, etag)) {
            run_cache_note(true);
            reply_not_modified(rs, etag);
            return;
        }
    }
    if (cached_answer(id, version, true, &e)) {
        run_cache_note(true);
        reply_text(rs, 200, e.body, e.len, "application/json");
    } else {
        e = (run_cache_entry){.version = version};
        if (!build_run(rs, 200, id, &e, true)) {
            run_cache_forget(id); /* gone (deleted): nothing of it is kept */
            return;
        }
        run_cache_note(false);
        run_cache_put(id, &e, rs->body, rs->len);
    }
    bool hidden = hides_from(rq, &e); /* the same answer, less what this caller may not see: a tag of its own */
    run_etag(etag, id, &e, hidden);
    if (rq_if_none_match(rq, etag)) {
        free(rs->body);
        reply_not_modified(rs, etag);
        return;
    }
    if (hidden) run_mask_apply(&rs->body, &rs->len);
    snprintf(rs->etag, sizeof rs->etag, "%s", etag);
}

/* ---- who may change a run ---- */

/* Whether the request may `verb` run `id` (its owner, or an admin); else the answer
 * (403 naming the owner, 404, 500) is given and false. */
static bool may_change(request *rq, response *rs, int64_t id, const char *verb) {
    char why[512];
    switch (runs_may_change(id, rq_caller(rq), verb, why, sizeof why)) {
    case RUNS_DONE: return true;
    case RUNS_FORBIDDEN: reply_problem(rs, 403, NULL, "%s", why); return false;
    case RUNS_NOT_FOUND: reply_problem(rs, 404, NULL, "there is no run %lld (GET /runs lists them)", (long long)id); return false;
    default: reply_problem(rs, 500, NULL, "the database could not be read; see the server's log"); return false;
    }
}

/* The audit log's entry of `action` on run `id` by the request's caller, committed
 * before the action acts (audit.h); else the answer (503 or 500) is given and false. */
static bool audited(request *rq, response *rs, int64_t id, const char *action, json_t *detail) {
    char actor[80], target[40];
    snprintf(target, sizeof target, "run/%lld", (long long)id);
    if (audit_write(audit_actor(rq_caller(rq), actor, sizeof actor), action, id, target, NULL, detail) > 0) return true;
    char what[96];
    snprintf(what, sizeof what, "run %lld was left as it was (its audit entry could not be written)", (long long)id);
    reply_store_refused(rs, what);
    return false;
}

/* ---- POST /runs/{id}/cancel ---- */

static void cancel_run(request *rq, response *rs) {
    int64_t id;
    if (!param_run_id(rq, rs, &id) || !may_change(rq, rs, id, "cancel") || !audited(rq, rs, id, "run.cancel", NULL))
        return;
    run_status st = RUN_QUEUED;
    switch (runs_cancel(id, &st)) {
    case RUNS_DONE: reply_run(rq, rs, 202, id); return;
    case RUNS_NOT_FOUND: reply_problem(rs, 404, NULL, "there is no run %lld (GET /runs lists them)", (long long)id); return;
    case RUNS_FINISHED:
        reply_problem(rs, 409, NULL, "run %lld has already finished (%s): there is nothing to cancel", (long long)id,
                      run_status_name(st));
        return;
    case RUNS_SETTING_UP: reply_problem(rs, 409, NULL, "run %lld is being set up; try again in a moment", (long long)id); return;
    default: reply_problem(rs, 500, NULL, "the database could not be read; see the server's log"); return;
    }
}

/* ---- POST /runs/{id}/resume ---- */

static void resume_run(request *rq, response *rs) {
    int64_t id;
    if (!param_run_id(rq, rs, &id) || !may_change(rq, rs, id, "resume") || !audited(rq, rs, id, "run.resume", NULL))
        return;
    char why[2048] = "";
    switch (runs_resume(id, why, sizeof why)) {
    case RESUME_QUEUED: reply_run(rq, rs, 202, id); return;
    case RESUME_NOT_FOUND: reply_problem(rs, 404, NULL, "there is no run %lld (GET /runs lists them)", (long long)id); return;
    case RESUME_REFUSED: reply_problem(rs, 409, NULL, "%s", why); return;
    case RESUME_FORBIDDEN: reply_problem(rs, 403, NULL, "%s", why); return;
    default: reply_problem(rs, 500, NULL, "the database could not be read or written; see the server's log"); return;
    }
}

/* ---- DELETE /runs/{id} ---- */

static void delete_run(request *rq, response *rs) {
    int64_t id;
    if (!param_run_id(rq, rs, &id) || !may_change(rq, rs, id, "delete") || !audited(rq, rs, id, "run.delete", NULL))
        return;
    run_status st = RUN_QUEUED;
    switch (runs_delete(id, &st)) {
    case RUNS_DONE: reply_text(rs, 204, NULL, 0, NULL); return;
    case RUNS_NOT_FOUND: reply_problem(rs, 404, NULL, "there is no run %lld (GET /runs lists them)", (long long)id); return;
    case RUNS_NOT_FINISHED:
        reply_problem(rs, 409, NULL, "run %lld is %s: cancel it first (POST /runs/%lld/cancel), then delete it",
                      (long long)id, run_status_name(st), (long long)id);
        return;
    case RUNS_CHANGED:
        reply_problem(rs, 409, NULL, "run %lld could not be deleted: it changed meanwhile; try again", (long long)id);
        return;
    default: {
        char what[96];
        snprintf(what, sizeof what, "run %lld was not deleted", (long long)id);
        reply_store_refused(rs, what);
        return;
    }
    }
}

/* ---- GET /runs/{id}/metrics ---- */

/* A page of a series' points without max_points: this many unless limit says, at most
 * METRICS_PAGE_MAX (a series can hold ten million; next_after walks them). */
#define METRICS_PAGE_DEFAULT 10000
#define METRICS_PAGE_MAX 100000

/* The shortest of %.15g..%.17g that reads back as the same double. */
static void append_number(buf_t *b, double v) {
    if (!isfinite(v)) {
        buf_append(b, "null", 4);
        return;
    }
    char s[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v) break;
    }
    buf_append(b, s, strlen(s));
}

static void get_metrics(request *rq, response *rs) {
    int64_t id;
    run_brief b;
    if (!param_existing_run(rq, rs, &id, &b)) return;
    const char *key = rq_query(rq, "key");
    if (!key) key = "loss";
    int k = -1;
    for (int i = 0; i < METRIC_COUNT; i++)
        if (strcmp(key, metric_names[i]) == 0) k = i;
    json_t *keys = store_series_keys(id, b.command);
    if (!keys) {
        reply_problem(rs, 500, NULL, "the database could not be read; see the server's log");
        return;
    }
    bool known = k >= 0;
    size_t ki;
    json_t *kv;
    json_array_foreach(keys, ki, kv) known = known || strcmp(json_string_value(kv), key) == 0;
    if (!known) {
        char *list = json_dumps(keys, JSON_COMPACT);
        reply_problem(rs, 400, NULL, "key \"%.60s\" is not a series of run %lld: its series are %s", key, (long long)id,
                      list);
        free(list);
        json_decref(keys);
        return;
    }
    int64_t max_points = 0, after = NO_INT, limit = 0;
    if (!param_query_int(rq, rs, "max_points", 3, 10000000, &max_points) ||
        !param_query_int(rq, rs, "after", -1, INT64_MAX, &after) ||
        !param_query_int(rq, rs, "limit", 1, METRICS_PAGE_MAX, &limit)) {
        json_decref(keys);
        return;
    }
    if (max_points && limit) {
        json_decref(keys);
        reply_problem(rs, 400, NULL, "max_points (a chart of the whole series) and limit (a page of its points) do not "
                      "go together: ask for one of them");
        return;
    }
    /* a chart from the rollups (max_points), else a page of the points themselves */
    series_answer a;
    int64_t key_id = store_series_key(id, key);
    int rc = key_id == NO_INT || key_id == 0 ? -1
             : max_points ? store_series_chart(id, key_id, after, max_points, &a)
                          : store_series_page(id, key_id, after, limit ? limit : METRICS_PAGE_DEFAULT, &a);
    if (rc != 0) {
        if (key_id != NO_INT && key_id != 0) series_answer_free(&a);
        json_decref(keys);
        reply_problem(rs, 500, NULL, "the database could not be read; see the server's log");
        return;
    }
    /* Written by hand: a page can hold a hundred thousand points. */
    buf_t out = {0};
    json_t *key_value = json_string(key);
    char *key_json = json_dumps(key_value, JSON_ENCODE_ANY), *keys_json = json_dumps(keys, JSON_COMPACT);
    json_decref(key_value);
    json_decref(keys);
    buf_printf(&out, "{\"run\":%lld,\"key\":%s,\"keys\":%s,\"count\":%lld,\"downsampled\":%s,\"bucket_steps\":%lld,",
               (long long)id, key_json, keys_json, (long long)a.count,
               a.bucket_steps > 1 && (int64_t)a.n < a.count ? "true" : "false", (long long)a.bucket_steps);
    if (a.next_after == NO_INT) buf_printf(&out, "\"next_after\":null,\"points\":[");
    else buf_printf(&out, "\"next_after\":%lld,\"points\":[", (long long)a.next_after);
    free(key_json);
    free(keys_json);
    for (size_t i = 0; i < a.n; i++) {
        buf_printf(&out, "%s[%lld,", i ? "," : "", (long long)a.points[i].step);
        append_number(&out, a.points[i].value);
        buf_printf(&out, ",%lld]", (long long)a.points[i].t);
    }
    buf_printf(&out, "]}\n");
    series_answer_free(&a);
    reply_text(rs, 200, out.data, out.len, "application/json");
}

/* ---- GET /runs/{id}/epochs, /ranks ---- */

static void get_epochs(request *rq, response *rs) {
    int64_t id;
    run_brief b;
    if (!param_existing_run(rq, rs, &id, &b)) return;
    json_t *a = store_epochs_json(id);
    if (!a) {
        reply_problem(rs, 500, NULL, "the database could not be read; see the server's log");
        return;
    }
    reply_json(rs, 200, json_pack("{s:I,s:o}", "run", (json_int_t)id, "epochs", a));
}

static void get_timeline(request *rq, response *rs) {
    int64_t id;
    run_brief b;
    if (!param_existing_run(rq, rs, &id, &b)) return;
    json_t *a = store_timeline_json(id);
    if (!a) {
        reply_problem(rs, 500, NULL, "the database could not be read; see the server's log");
        return;
    }
    reply_json(rs, 200, json_pack("{s:I,s:s,s:o}", "run", (json_int_t)id, "status", run_status_name(b.status), "entries", a));
}

static void get_ranks(request *rq, response *rs) {
    int64_t id;
    run_brief b;
    if (!param_existing_run(rq, rs, &id, &b)) return;
    json_t *a = store_ranks_json(id);
    if (!a) {
        reply_problem(rs, 500, NULL, "the database could not be read; see the server's log");
        return;
    }
    reply_json(rs, 200, json_pack("{s:I,s:o}", "run", (json_int_t)id, "ranks", a));
}

/* ---- GET /runs/{id}/checkpoints: the files in its checkpoints/ directory now ---- */

static int by_name(const void *a, const void *b) {
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a, "file")),
                  json_string_value(json_object_get(*(json_t *const *)b, "file")));
}

static void get_checkpoints(request *rq, response *rs) {
    int64_t id;
    run_brief b;
    if (!param_existing_run(rq, rs, &id, &b)) return;
    char *run = layout_run_dir(id), *dir = layout_run_path(id, RUN_FILE_CHECKPOINTS), why[512];
    json_t *files = json_array();
    /* the run's own folder: never through a link it put there, nor a file's link followed */
    run_dir rd, cd = {.fd = -1};
    if (run_dir_open(&rd, run, why, sizeof why) == 0) {
        (void)run_dir_open_sub(&rd, layout_run_file_name(RUN_FILE_CHECKPOINTS), &cd, why, sizeof why);
        run_dir_close(&rd);
    }
    free(run);
    char **names = NULL;
    int count = cd.fd >= 0 ? run_dir_names(&cd, &names) : 0;
    for (int i = 0; i < count; i++) {
        const char *name = names[i];
        size_t n = strlen(name);
        const char *suffix = ".safetensors";
        if (n <= strlen(suffix) || strcmp(name + n - strlen(suffix), suffix) != 0) continue; /* *.tmp.PID: being written */
        char *path = xasprintf("%s/%s", dir, name);
        struct stat sb;
        if (run_dir_stat(&cd, name, &sb) == 0 && S_ISREG(sb.st_mode)) {
            char when[32];
            format_iso8601((int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000, when);
            int epoch = -1;
            long step = -1;
            char tail;
            /* epoch-NNNN: the end of epoch N; epoch-NNNN-step-S: within epoch N, before its step S (a preemption) */
            bool within = sscanf(name, "epoch-%d-step-%ld.safetensor%c", &epoch, &step, &tail) == 3 &&
                          tail == 's' && epoch >= 0 && step >= 0;
            bool numbered = within || (sscanf(name, "epoch-%d.safetensor%c", &epoch, &tail) == 2 && tail == 's' &&
                                       epoch >= 0);
            json_array_append_new(files, json_pack("{s:s,s:s,s:I,s:s,s:o,s:o}", "file", name, "path", path,
                                                   "bytes", (json_int_t)sb.st_size, "modified_at", when, "epoch",
                                                   numbered ? json_integer(epoch) : json_null(), "next_step",
                                                   within ? json_integer(step) : json_null()));
        }
        free(path);
    }
    run_dir_names_free(names, count);
    if (cd.fd >= 0) run_dir_close(&cd);
    size_t n = json_array_size(files);
    json_t **items = xmalloc((n ? n : 1) * sizeof *items);
    for (size_t i = 0; i < n; i++) items[i] = json_incref(json_array_get(files, i));
    qsort(items, n, sizeof *items, by_name);
    json_array_clear(files);
    for (size_t i = 0; i < n; i++) json_array_append_new(files, items[i]);
    free(items);
    reply_json(rs, 200, json_pack("{s:I,s:s,s:o}", "run", (json_int_t)id, "dir", dir, "checkpoints", files));
    free(dir);
}

/* ---- GET /runs/{id}/logs ---- */

/* attempt=K with rank=N: where attempt K's output is in rank N's log, [*begin, *end)
 * (end -1: to the end). false (and the problem answered) when there is none. */
static bool attempt_span(response *rs, int64_t id, const run_brief *b, int64_t attempt, int64_t rank,
                         int64_t *begin, int64_t *end) {
    if (!b->command) {
        reply_problem(rs, 400, NULL, "run %lld runs a built-in model: it has no rank logs to take an attempt's part of "
                      "(its log, trainer.log, says where each attempt starts; leave out attempt=)", (long long)id);
        return false;
    }
    if (rank < 0) {
        reply_problem(rs, 400, NULL, "attempt= reads an attempt's part of a rank's log: give rank= too (run %lld has "
                      "ranks 0 to %d)", (long long)id, b->world_size - 1);
        return false;
    }
    int64_t newest = -1;
    int found = store_attempt_span(id, attempt, (int)rank, begin, end, &newest);
    if (found < 0) {
        reply_problem(rs, 500, NULL, "the database could not be read; see the server's log");
    } else if (found == 0 && newest < 0) {
        reply_problem(rs, 404, NULL, "run %lld has no attempt on record yet (it has not started; GET /runs/%lld says "
                      "how it is)", (long long)id, (long long)id);
    } else if (found == 0) {
        reply_problem(rs, 404, NULL, "run %lld has no attempt %lld: its attempts are 0 to %lld (GET /runs/%lld lists "
                      "them)", (long long)id, (long long)attempt, (long long)newest, (long long)id);
    } else if (found == 2) {
        reply_problem(rs, 404, NULL, "attempt %lld of run %lld has no record of where rank %lld's output begins: its "
                      "launcher could not write ranks/rank-%lld.log then, or the server never heard the attempt "
                      "start (read the whole log: leave out attempt=)", (long long)attempt, (long long)id,
                      (long long)rank, (long long)rank);
    }
    return found == 1;
}

static void get_logs(request *rq, response *rs) {
    int64_t id;
    run_brief b;
    if (!param_existing_run(rq, rs, &id, &b)) return;
    int64_t tail = 1000, rank = -1, offset = -1, attempt = -1;
    if (!param_query_int(rq, rs, "tail", 1, 1000000, &tail) || !param_query_int(rq, rs, "rank", 0, 63, &rank) ||
        !param_query_int(rq, rs, "offset", 0, INT64_MAX, &offset) ||
        !param_query_int(rq, rs, "attempt", 0, INT32_MAX, &attempt))
        return;
    if (rank >= 0 && !b.command) {
        reply_problem(rs, 400, NULL, "run %lld runs a built-in model: its ranks share one log (leave out rank=)",
                      (long long)id);
        return;
    }
    if (rank >= b.world_size) {
        reply_problem(rs, 400, NULL, "run %lld has ranks 0 to %d: there is no rank %lld", (long long)id,
                      b.world_size - 1, (long long)rank);
        return;
    }
    /* the bytes read: the whole log, or an attempt's part of a rank's ([begin, end),
     * read as if it were the whole: offsets count from its start) */
    int64_t begin = 0, end = -1;
    if (attempt >= 0 && !attempt_span(rs, id, &b, attempt, rank, &begin, &end)) return;
    char *dir = layout_run_dir(id), rel[64];
    if (rank >= 0) snprintf(rel, sizeof rel, RUN_DIR_RANK_LOG, (int)rank);
    else snprintf(rel, sizeof rel, "%s", RUN_DIR_LOG);
    char *text = NULL;
    size_t len = 0;
    long long next = 0, size = 0;
    /* offset=: whole lines from that byte on, and where the next read starts (so that
     * a follower misses nothing and repeats nothing); else the last `tail` lines */
    int rc = offset >= 0 ? logtail_read_from_span(dir, rel, begin, end, begin + offset, 1 << 20, &text, &len, &next,
                                                  &size)
                         : logtail_read_span(dir, rel, begin, end, (size_t)tail, &text, &len, &next);
    int read_errno = errno;
    free(dir);
    if (rc != 0 && run_file_planted(read_errno)) { /* run_files.h */
        reply_problem(rs, 403, NULL,
                      "run %lld's log is not a file of its own: the run left %s in its directory where its log was, "
                      "and ddpd does not follow a run's links nor open what is not its own file",
                      (long long)id, read_errno == ELOOP ? "a link" : read_errno == ENXIO ? "a FIFO, a socket or a device"
                                    : read_errno == EXDEV ? "another account's file (or a hard link to one)"
                                                          : "a file too large to be its log");
        return;
    }
    if (rc != 0 && read_errno != ENOENT) {
        reply_problem(rs, 500, NULL, "the run's log cannot be read: %s", strerror(read_errno));
        return;
    }
    if (rc != 0) next = offset >= 0 ? begin + offset : begin; /* no log yet */
    rs->header_name = "X-Next-Offset";
    rs->header_value = xasprintf("%lld", next - begin);
    /* (the log as the program wrote it, byte for byte: X-Next-Offset counts its bytes) */
    reply_text(rs, 200, text, len, "text/plain; charset=utf-8");
}

/* ---- GET /queue, /users, /users/me ---- */

/* the same for every caller, written once per decision and tagged by its bytes */
static void get_queue(request *rq, response *rs) {
    char tag[SCHED_QUEUE_TAG_LEN];
    scheduler_queue_tag(tag);
    if (rq_if_none_match(rq, tag)) {
        reply_not_modified(rs, tag);
        return;
    }
    size_t len;
    char *text = scheduler_queue_text(&len, tag); /* (rebuilt meanwhile: the text's own tag) */
    reply_text(rs, 200, text, len, "application/json");
    snprintf(rs->etag, sizeof rs->etag, "%s", tag);
}

static void get_users(request *rq, response *rs) {
    (void)rq;
    reply_json(rs, 200, json_pack("{s:o}", "users", users_json()));
}

static void get_me(request *rq, response *rs) {
    /* by the users as the database has them now (a read's check may be a tick behind):
     * a replaced token is told at once that it is not one */
    caller fresh;
    users_identify(rq_header(rq, "Authorization"), &fresh);
    const caller *who = &fresh;
    if (who->kind == CALLER_USER) {
        user_info u;
        if (users_find(who->name, &u)) {
            int64_t used = disk_use_of(u.name);
            reply_json(rs, 200, json_pack("{s:s, s:s, s:b, s:o, s:i, s:o, s:o, s:o}", "kind", "user", "name", u.name,
                                          "admin", u.admin, "max_devices",
                                          u.max_devices < 0 ? json_null() : json_integer(u.max_devices),
                                          "max_priority", u.max_priority, "max_memory_gb",
                                          u.max_memory_gb < 0 || u.admin ? json_null() : json_real(u.max_memory_gb),
                                          "max_disk_gb", u.max_disk_gb < 0 ? json_null() : json_real(u.max_disk_gb),
                                          "disk_used_bytes", used < 0 ? json_null() : json_integer(used)));
            return;
        }
    }
    if (who->kind == CALLER_ADMIN_TOKEN || (who->kind == CALLER_ANONYMOUS && who->admin)) {
        /* the server's token, or anybody on a box that asks for none: an admin of no name */
        reply_json(rs, 200, json_pack("{s:s, s:n, s:b, s:n, s:i}", "kind", who->kind == CALLER_ADMIN_TOKEN ? "token"
                                      : "anybody", "name", "admin", 1, "max_devices", "max_priority", 100));
        return;
    }
    reply_problem(rs, 401, NULL, "%s", users_refusal(rq_header(rq, "Authorization") ? AUTH_UNKNOWN : AUTH_MISSING));
}

const route api_routes[] = {
    {.method = "GET", .pattern = "/healthz", .handler = get_healthz, .open = true},
    {.method = "POST", .pattern = "/runs", .handler = post_runs, .json_body = true},
    {.method = "GET", .pattern = "/runs", .handler = get_runs},
    {.method = "GET", .pattern = "/runs/{id}", .handler = get_run},
    {.method = "DELETE", .pattern = "/runs/{id}", .handler = delete_run},
    {.method = "POST", .pattern = "/runs/{id}/cancel", .handler = cancel_run},
    {.method = "POST", .pattern = "/runs/{id}/resume", .handler = resume_run},
    {.method = "GET", .pattern = "/runs/{id}/metrics", .handler = get_metrics},
    {.method = "GET", .pattern = "/runs/{id}/epochs", .handler = get_epochs},
    {.method = "GET", .pattern = "/runs/{id}/timeline", .handler = get_timeline},
    {.method = "GET", .pattern = "/runs/{id}/ranks", .handler = get_ranks},
    {.method = "GET", .pattern = "/runs/{id}/checkpoints", .handler = get_checkpoints},
    {.method = "GET", .pattern = "/runs/{id}/logs", .handler = get_logs},
    {.method = "GET", .pattern = "/queue", .handler = get_queue},
    {.method = "GET", .pattern = "/users", .handler = get_users},
    {.method = "GET", .pattern = "/users/me", .handler = get_me},
    {.method = "GET", .pattern = "/metrics", .handler = metrics_handle},
    {.method = "GET", .pattern = "/openapi.json", .handler = openapi_handle, .open = true}, /* how to ask, tokens included */
};
const size_t api_routes_count = sizeof api_routes / sizeof *api_routes;
