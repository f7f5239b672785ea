/* The attempts of a run: see attempts.h. */
#include "attempts.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "env_seconds.h"
#include "log.h"
#include "monotonic.h"

static int last_attempt(const attempt_plan *p) { return p->from + p->policy.max_restarts; }

static json_t *int_or_null(int v, int none) { return v == none ? json_null() : json_integer(v); }

static void event_started(event_sink *s, const attempt_plan *p, int attempt, json_t *extra) {
    json_t *ev = json_pack("{s:i, s:s, s:i}", "attempt", attempt, "phase", "started", "max_restarts", p->policy.max_restarts);
    if (extra) json_object_update(ev, extra);
    json_decref(extra);
    event_emit(s, "attempt", ev);
}

static void event_ended(event_sink *s, int attempt, const attempt_result *r, const failure_verdict *v,
                        int restarting, double backoff_s) {
    json_t *ev = json_pack("{s:i, s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:b}", "attempt", attempt, "phase", "ended",
                           "status", r->status, "reason", r->reason, "failing_rank", int_or_null(r->failing_rank, -1),
                           "exit_code", int_or_null(r->exit_code, -1), "signal", int_or_null(r->signal, 0),
                           "last_line", r->last_line, "restarting", restarting);
    if (restarting) json_object_set_new(ev, "backoff_s", json_real(backoff_s));
    if (v) {
        json_object_set_new(ev, "failure_class", json_string(failure_class_name(v->cls)));
        json_object_set_new(ev, "failure_evidence", json_string(v->evidence));
        if (r->node[0]) json_object_set_new(ev, "failure_node", json_string(r->node));
    }
    event_emit(s, "attempt", ev);
}

/* The class of a failed attempt, from what its launcher saw. */
static void classify(const attempt_result *r, failure_verdict *v) {
    failure_input in = {.exit_code = r->exit_code, .signal = r->signal, .oom_kills = r->oom_kills,
                        .memory_max = r->memory_max[0] ? r->memory_max : NULL,
                        .stepped = r->max_step >= 0 ? 1 : r->output ? 0 : -1,
                        .output = r->output ? r->output : r->last_line, .reason = r->reason};
    failure_classify(&in, v);
}

/* "REASON; failure: CLASS", with the evidence when the reason does not hold it; the
 * reason alone for an exit or a crash, which it says already (its status or signal). */
static void classed(char *out, size_t n, const attempt_result *r, const failure_verdict *v) {
    if (v->cls == FAILURE_EXIT || v->cls == FAILURE_CRASH) {
        snprintf(out, n, "%s", r->reason);
        return;
    }
    int said = !v->evidence[0] || strstr(r->reason, v->evidence) || strstr(r->last_line, v->evidence);
    int w = snprintf(out, n, "%s; failure: %s", r->reason, failure_class_name(v->cls));
    if (!said && w > 0 && (size_t)w < n) snprintf(out + w, n - (size_t)w, " (%.*s)", (int)sizeof v->evidence, v->evidence);
}

void attempts_describe(const attempt_plan *p, int attempt, char *out, size_t n) {
    /* numbered as TORCHELASTIC_RESTART_COUNT and the API's `attempt` are, from 0 */
    snprintf(out, n, "attempt %d starting (TORCHELASTIC_RESTART_COUNT=%d; the last allowed is attempt %d)", attempt,
             attempt, last_attempt(p));
}

/* Canceled after a failure that would have been restarted: the reason says what had
 * happened (`when`: "before attempt 1", ...). */
static void canceled_after(attempts_outcome *out, int sig, const char *when, const char *failure) {
    out->status = "canceled";
    out->signal = sig;
    snprintf(out->reason, sizeof out->reason, "canceled by SIG%s %s (%s)", sigabbrev_np(sig), when, failure);
}

void attempts_run(event_sink *events, const attempt_plan *plan, const attempt_hooks *h, attempts_outcome *out) {
    const restart_policy *pol = &plan->policy;
    if (pol->max_restarts > 0 && !plan->restarts_allowed)
        log_msg(LOG_WARN, "distributed.max_restarts is %d, but a node's part of a run across nodes is not restarted "
                "on its own (the other nodes' ranks lost their peers): its first failure ends it",
                pol->max_restarts);
    restart_budget budget;
    restart_budget_init(&budget, plan->first - plan->from);
    restart_budget_baseline(&budget, plan->earlier_step);
    for (int attempt = plan->first;; attempt++) {
        event_started(events, plan, attempt, h->prepare(h->ctx, attempt));
        attempt_result r = {.status = "failed", .failing_rank = -1, .exit_code = -1, .oom_kills = -1, .max_step = -1};
        h->run(h->ctx, attempt, &r);
        int failed = strcmp(r.status, "failed") == 0;
        failure_verdict v;
        if (failed) classify(&r, &v);
        char said[2304] = "";
        if (failed) classed(said, sizeof said, &r, &v);
        restart_next next = NEXT_FAIL_SPENT;
        int progress = 0;
        double backoff_s = pol->backoff_initial_s;
        if (failed && r.may_restart && plan->restarts_allowed)
            next = restart_decide(pol, &budget, v.cls, r.max_step, r.checkpointed, (double)mono_ms() / 1000.0,
                                  &progress, &backoff_s);
        /* retry_elsewhere: not here; the run fails this launch and its server, which
         * reads the class too, starts it again away from this node (run_restart.c) */
        int would = next == NEXT_RESTART;
        int restarting = failed && r.may_restart && !r.cancel_signal && would;
        event_ended(events, attempt, &r, failed ? &v : NULL, restarting, backoff_s);
        char next_one[128];
        attempts_describe(plan, attempt + 1, next_one, sizeof next_one);
        if (restarting) {
            log_msg(LOG_WARN, "%s in %g s: %s%s", next_one, backoff_s, said,
                    progress && pol->reset_on_progress ? " (it made progress: no restart used up)" : "");
            int sig = h->pause(h->ctx, backoff_s);
            if (!sig) continue;
            log_msg(LOG_WARN, "received SIG%s during the pause: no attempt %d", sigabbrev_np(sig), attempt + 1);
            char when[64];
            snprintf(when, sizeof when, "before attempt %d", attempt + 1);
            canceled_after(out, sig, when, r.reason);
        } else if (failed && r.cancel_signal && r.may_restart && would) {
            canceled_after(out, r.cancel_signal, "as a failed attempt was being stopped", r.reason);
        } else if (failed && next == NEXT_RESTART_ELSEWHERE && !r.cancel_signal) {
            out->status = "failed";
            snprintf(out->reason, sizeof out->reason, "%s; not restarted here: distributed.restart_policy.on.%s is "
                     "retry_elsewhere (the server starts it again on another node)", said, failure_class_name(v.cls));
        } else if (failed && next == NEXT_FAIL_CLASS && pol->max_restarts > 0) {
            out->status = "failed";
            snprintf(out->reason, sizeof out->reason, "%s; not restarted: distributed.restart_policy.on.%s is fail%s", said,
                     failure_class_name(v.cls), pol->given ? "" : " (its default)");
        } else if (failed && next == NEXT_FAIL_LOOP) {
            char where[64] = "before any step";
            if (budget.best_step >= 0) snprintf(where, sizeof where, "at step %lld", budget.best_step);
            out->status = "failed";
            snprintf(out->reason, sizeof out->reason,
                     "crash loop: %d attempts failed %s with no progress (%s) within %g s "
                     "(distributed.restart_policy.crash_loop); the last: %s",
                     budget.loop_n, where, failure_class_name(v.cls), pol->crash_loop_window_s, said);
        } else if (failed && pol->max_restarts > 0 && attempt > plan->from) {
            out->status = "failed";
            snprintf(out->reason, sizeof out->reason, "all %d attempts failed (%s is %d); the last: %s",
                     attempt - plan->from + 1, restart_policy_budget_field(pol), pol->max_restarts, said);
        } else {
            out->status = r.status;
            out->signal = r.cancel_signal;
            snprintf(out->reason, sizeof out->reason, "%s", failed ? said : r.reason);
        }
        return;
    }
}

double attempts_backoff_s(const char *program) {
    return env_seconds_between("DDPD_RESTART_BACKOFF_S", ATTEMPTS_BACKOFF_S, 0, 3600, program);
}

int attempts_policy(attempt_plan *plan, const char *config_path, int max_restarts, const char *program, char *err,
                    size_t n) {
    restart_policy_defaults(&plan->policy, max_restarts, attempts_backoff_s(program));
    json_error_t jerr;
    json_t *doc = json_load_file(config_path, 0, &jerr);
    if (!doc) {
        snprintf(err, n, "cannot read the config %s: line %d: %s", config_path, jerr.line, jerr.text);
        return -1;
    }
    int rc = restart_policy_parse(json_object_get(doc, "distributed"), &plan->policy, err, n);
    json_decref(doc);
    return rc;
}
